"""The retrieval layer's data: sources, their segments, search hits and filters."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Literal

from retrieval.errors import InvalidInput

Kind = Literal["video", "audio", "document", "course"]
KINDS: tuple[Kind, ...] = ("video", "audio", "document", "course")
# A source at several resolutions (``retrieval.write.levels``): one speaker's turn (a paragraph
# of a document), today's windows, topics (sections, pages), the whole source (its summary).
Level = Literal["turn", "window", "topic", "summary"]
LEVELS: tuple[Level, ...] = ("turn", "window", "topic", "summary")


@dataclass(frozen=True)
class Source:
    """One ingested file: a recording, a document, a course."""

    id: str
    title: str
    kind: Kind
    url: str | None = None
    recorded_at: date | None = None
    speakers: tuple[str, ...] = ()
    path: str = ""
    content_hash: str = ""
    description: str | None = None
    # Quorum's own page of this source, signed for the knowledge base it was read from
    # (``retrieval.links.share``); set by the search service, never stored.
    view: str | None = None


@dataclass(frozen=True)
class Mark:
    """Where one cue or turn begins inside a segment's text, and when it is said.

    ``at`` is a character offset into ``Segment.text`` (the cue's first character, after
    any ``Speaker:`` label). Marks let every sentence of a window keep the second it was
    said instead of the window's start."""

    at: int
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Segment:
    """A searchable window of a source, with where it sits in that source.

    Media segments carry ``start_s``/``end_s`` (seconds); PDF segments carry ``page``
    (1-based); Markdown carries ``heading`` (a path like ``"Setup > Tokens"``); course
    segments carry ``lesson`` (number), ``lesson_title`` and ``lesson_url``.
    """

    source_id: str
    position: int
    text: str
    start_s: float | None = None
    end_s: float | None = None
    speakers: tuple[str, ...] = ()
    page: int | None = None
    heading: str | None = None
    lesson: int | None = None
    lesson_title: str | None = None
    lesson_url: str | None = None
    marks: tuple[Mark, ...] = ()
    level: Level = "window"

    @property
    def speaker(self) -> str | None:
        """The first (main) speaker, if any."""
        return self.speakers[0] if self.speakers else None


@dataclass(frozen=True)
class Document:
    """A parsed file: its source and its ordered segments, before embedding."""

    source: Source
    segments: tuple[Segment, ...]
    # Units of the other levels (turns, topics, summary), each numbered 0.. in its level.
    levels: tuple[Segment, ...] = ()
    original: Original | None = None  # the file its page plays or offers, as ingest read it
    # A recording's speakers as voice vectors (label, CAM++ centroid), found at ingest:
    # kept (``retrieval.speakers.voiceprints``) only with QUORUM_VOICES=on, never in the index.
    voices: tuple[tuple[str, tuple[float, ...]], ...] = ()


@dataclass(frozen=True)
class Original:
    """A file a source's page serves (a recording, a PDF) and the sha256 of the bytes
    ingest read from it: the media store keeps exactly those bytes."""

    path: Path
    digest: str


@dataclass(frozen=True)
class Hit:
    """A segment returned by a search, with its source, score and deep link.

    ``similarity`` is the cosine between the query and the segment's own vector (hybrid
    search only): unlike the fused score, which is relative to the other hits, it says
    how close the best hit really is."""

    id: str
    segment: Segment
    source: Source
    score: float
    link: str | None = None
    similarity: float | None = None


@dataclass(frozen=True)
class SearchFilters:
    """Narrowing a search. Empty fields do not filter."""

    speaker: str | None = None
    source_ids: tuple[str, ...] = ()
    source: str | None = None
    lesson: int | None = None
    kind: Kind | None = None
    after: date | None = None
    before: date | None = None
    # Which resolutions to search (``retrieval.search.route``); empty: chosen from the question.
    levels: tuple[Level, ...] = ()

    def is_empty(self) -> bool:
        """True when nothing narrows the search."""
        return self == SearchFilters()


@dataclass(frozen=True)
class SourceInfo:
    """A source as listed by the store, with how many segments it has."""

    source: Source
    segments: int
    extra: dict[str, str] = field(default_factory=dict)
    indexed_at: float | None = None  # when its live version was written (epoch seconds)


KB_PATTERN = re.compile(r"[A-Za-z0-9_-]{1,64}")  # whole name: fullmatch, so no "kb\n"


def check_kb(kb: str) -> str:
    """Validate a knowledge-base name (every store keeps each one apart under it)."""
    if not KB_PATTERN.fullmatch(kb):
        raise InvalidInput(
            "Knowledge base names use letters, digits, '-' and '_' (at most 64): "
            f"{kb!r} is not one."
        )
    return kb


# Pages route on ids (``/v/{token}`` signs one; ``~insights`` and friends are Quorum's own
# names): an id starts with a letter or digit and holds no '/', '~', space or control.
SOURCE_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def check_source_id(source_id: str) -> str:
    """The one rule for a source id, whatever gives it (a file name, a sidecar, front
    matter, a manifest); InvalidInput says what an id may be."""
    if not SOURCE_ID_PATTERN.fullmatch(source_id):
        shown = source_id if len(source_id) <= 60 else source_id[:57] + "..."
        raise InvalidInput(
            f"source id {shown!r} is not allowed: an id starts with a letter or digit and "
            "uses only letters, digits, '.', '-' and '_' (at most 200); names starting with "
            "'~' and anything with '/' are Quorum's own"
        )
    return source_id
