"""Citations: the ``[n]`` markers in an answer, checked against the sources actually given
and resolved to links that open a recording at the second or a PDF at the page.

Markers may be ``[2]``, ``[2, 5]``, ``[2][5]`` or ``[2-4]``. A number that was never
given to Claude is invented: it is dropped from the text and logged (the numbers only,
never the text). Each numbered source is its own citation, so two moments of one
recording stay two links.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from bot.models import Citation, NumberedSource
from retrieval.links.links import format_timestamp, said_at, segment_link
from retrieval.models import Hit

log = logging.getLogger("quorum.citations")

# ``[3]``, ``[3, 4]``, ``[3-5]``; not a Markdown link text ``[3](...)``.
MARKER = re.compile(r"(\s*)\[(\s*\d{1,3}(?:\s*[,;\u2013-]\s*\d{1,3})*\s*)\](?!\()")
_MAX_RANGE = 20


def label_for(hit: Hit) -> str:
    """``"Title @ 12:14"``, ``"Title, p. 5"``, ``"Title, Lesson 2"``, or the title."""
    seg, title = hit.segment, hit.source.title or hit.source.id
    if seg.start_s is not None:
        return f"{title} @ {format_timestamp(seg.start_s)}"
    if seg.page is not None:
        return f"{title}, p. {seg.page}"
    if seg.lesson is not None:
        return f"{title}, Lesson {seg.lesson}"
    heading = (seg.heading or "").split(" > ")[-1].strip()
    if heading and heading.casefold() != title.casefold():
        return f"{title}, {heading}"
    return title


def at_second(hit: Hit, second: float, said: float | None = None) -> tuple[str, str | None]:
    """The label and deep link of ``hit``'s recording at ``second``: ``"Title @ 3:05"``;
    ``said``, when the cited sentence starts later, tells Quorum's own page which line to
    highlight (several sentences can open at one second)."""
    moved = replace(hit, segment=replace(hit.segment, start_s=second))
    return label_for(moved), said_at(hit.source, segment_link(hit.source, moved.segment), said)


def number_sources(hits: Sequence[Hit]) -> tuple[NumberedSource, ...]:
    """Number passages ``[1]..[n]`` in the order given."""
    return tuple(NumberedSource(n=i, hit=h, label=label_for(h)) for i, h in enumerate(hits, 1))


def citation_for(source: NumberedSource) -> Citation:
    """The citation of a numbered source: its label and deep link."""
    hit = source.hit
    return Citation(
        n=source.n,
        hit_id=hit.id,
        title=hit.source.title,
        link=hit.link,
        label=source.label,
        start_s=hit.segment.start_s,
        page=hit.segment.page,
        speaker=hit.segment.speaker,
    )


def parse_numbers(inside: str) -> list[int]:
    """The numbers of one marker's inside: ``"2, 5"`` -> [2, 5]; ``"2-4"`` -> [2, 3, 4]."""
    numbers: list[int] = []
    for part in re.split(r"\s*[,;]\s*", inside.strip()):
        bounds = [int(x) for x in re.split(r"\s*[\u2013-]\s*", part) if x]
        if len(bounds) == 2 and 0 < bounds[1] - bounds[0] <= _MAX_RANGE:
            numbers.extend(range(bounds[0], bounds[1] + 1))
        else:
            numbers.extend(bounds)
    return list(dict.fromkeys(numbers))


def cited_numbers(text: str) -> list[int]:
    """Every number cited in ``text``, in order of first use."""
    found: list[int] = []
    for m in MARKER.finditer(text):
        found.extend(n for n in parse_numbers(m.group(2)) if n not in found)
    return found


@dataclass(frozen=True)
class Resolved:
    """An answer's text with invented markers removed, and its citations."""

    text: str
    citations: tuple[Citation, ...]
    invented: tuple[int, ...]


def resolve(text: str, sources: Sequence[NumberedSource]) -> Resolved:
    """Check every marker against ``sources``: keep the valid numbers, drop invented ones."""
    by_n = {s.n: s for s in sources}
    used: list[int] = []
    invented: list[int] = []

    def fix(m: re.Match[str]) -> str:
        numbers = parse_numbers(m.group(2))
        valid = [n for n in numbers if n in by_n]
        invented.extend(n for n in numbers if n not in by_n and n not in invented)
        used.extend(n for n in valid if n not in used)
        if not valid:
            return ""
        if len(valid) == len(numbers):
            return m.group(0)
        return f"{m.group(1)}[{', '.join(map(str, valid))}]"

    cleaned = MARKER.sub(fix, text)
    if invented:
        # Dropping a marker can leave " ." or doubled spaces behind.
        cleaned = re.sub(r"[ \t]+([.,;:!?])", r"\1", cleaned)
        cleaned = re.sub(r"[ \t]{2,}", " ", cleaned)
        log.warning("dropped invented citation numbers %s (sources 1-%d)", invented, len(by_n))
    return Resolved(
        text=cleaned.strip(),
        citations=tuple(citation_for(by_n[n]) for n in used),
        invented=tuple(invented),
    )


def citation_json(c: Citation) -> dict[str, Any]:
    """A citation as JSON (``quorum ask --json``, the session store)."""
    return {
        "n": c.n,
        "label": c.label,
        "title": c.title,
        "link": c.link,
        "start_s": c.start_s,
        "page": c.page,
        "speaker": c.speaker,
        "hit_id": c.hit_id,
        "support": c.support,
        "source_n": c.source_n,
        "quote": c.quote,
    }


def source_json(s: NumberedSource) -> dict[str, Any]:
    """A numbered source as JSON (``quorum ask --json``, the session store)."""
    hit = s.hit
    seg = hit.segment
    return {
        "n": s.n,
        "label": s.label,
        "title": hit.source.title,
        "source_id": hit.source.id,
        "kind": hit.source.kind,
        "link": hit.link,
        "view": hit.source.view,  # Quorum's own page of the source (a signed link)
        "recorded_at": hit.source.recorded_at.isoformat() if hit.source.recorded_at else None,
        "start_s": seg.start_s,
        "end_s": seg.end_s,
        "page": seg.page,
        "speakers": list(seg.speakers),
        "hit_id": hit.id,
        "score": round(hit.score, 4),
    }
