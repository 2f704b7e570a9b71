"""Quorum's Weaviate schema and the mapping between its objects and our models.

Two multi-tenant collections: ``QuorumSource`` (one object per file, with its content
hash) and ``QuorumSegment`` (one per chunk, with the source's fields denormalised so a
search returns everything in one round trip). Ids are uuid5 of the source id (and the
segment's position), so re-ingesting a file overwrites its objects.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Any
from uuid import NAMESPACE_URL, uuid5

from weaviate.classes.config import (
    Configure,
    ConsistencyLevel,
    DataType,
    Property,
    ReplicationDeletionStrategy,
    Tokenization,
)
from weaviate.collections.classes.config import _ReplicationConfigCreate

from retrieval.links.links import segment_link
from retrieval.models import LEVELS, Hit, Mark, Segment, Source, SourceInfo
from retrieval.search.names import speaker_keys
from retrieval.write.levels import context

SOURCES = "QuorumSource"
SEGMENTS = "QuorumSegment"
UNITS = "QuorumUnit"  # the other levels (turns, topics, summaries): ``retrieval.write.levels``
VECTOR = "default"
_NS = uuid5(NAMESPACE_URL, "https://quorum.invalid/segments")


def replication(replicas: int) -> _ReplicationConfigCreate:
    """Each tenant's objects kept on ``replicas`` nodes. A delete and a write of one object
    that two nodes disagree on resolve to whichever came last (a source forgotten, then
    added again, stays added); async replication brings a node that was down up to date in
    the background."""
    return Configure.replication(
        factor=replicas,
        async_enabled=True,
        deletion_strategy=ReplicationDeletionStrategy.TIME_BASED_RESOLUTION,
    )


def consistency(replicas: int) -> ConsistencyLevel | None:
    """The consistency level of every read and write: QUORUM when replicated (None for one
    copy, Weaviate's default). A quorum (2 of 3) answers with one node down, and since
    reads and writes each reach a majority (R + W > N) every read meets at least one
    replica holding the latest write, even on a node that has just come back. ONE would
    be faster but could read a rejoined node's stale copy (a forgotten source back in an
    answer); ALL would fail with any node down."""
    return ConsistencyLevel.QUORUM if replicas > 1 else None


def segment_uuid(source_id: str, position: int, generation: int = 0, level: str = "window") -> str:
    """Deterministic id of a segment (or a unit of another level) of one generation (a
    write) of its source."""
    key = f"{source_id}#{position}" if not generation else f"{source_id}#{generation}#{position}"
    return str(uuid5(_NS, key if level == "window" else f"{key}@{level}"))


def source_uuid(source_id: str) -> str:
    """Deterministic id of a source."""
    return str(uuid5(_NS, source_id))


def as_datetime(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


# Which write of a source a segment belongs to; the source record names the live one.
GENERATION = Property(name="generation", data_type=DataType.INT)

# The properties units are narrowed by ranges of (``filters``: a search's dates, a source's
# span of positions or seconds; ``writes``: older generations). Each gets Weaviate's range
# index, which answers ``>=``/``<=`` in one read however many distinct values the property
# holds; the filterable index alone reads one bitmap per value in the range (every date,
# every second of every recording). Collections made before these existed get the index
# added when the store connects (``reindex``).
RANGE_FILTERED = ("recorded_at", "position", "start_s", "end_s", "generation")


def _ranged(kind: DataType, name: str) -> Property:
    return Property(name=name, data_type=kind, index_range_filters=True)


# The properties that hold a source's words, searched by keyword and never filtered on.
# They have no filterable index: its keys are the words themselves, and a key whose
# every object was deleted stays in its segment until a compaction with another segment
# drops it (a source added and removed within one memtable flush has none to meet), so
# the words of a removed source would outlive it on disk. Collections made before keep
# theirs until the store connects and drops it (``Collections.ensure_schema``).
UNFILTERED = ("text", "source_title", "heading", "lesson_title", "context", "title", "description")


def _words(name: str, **config: Any) -> Property:
    return Property(name=name, data_type=DataType.TEXT, index_filterable=False, **config)


SEGMENT_PROPERTIES = [
    _words("text", tokenization=Tokenization.WORD),
    Property(name="source_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
    _words("source_title", skip_vectorization=True),
    Property(name="source_url", data_type=DataType.TEXT, index_searchable=False),
    Property(name="source_kind", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
    _ranged(DataType.DATE, "recorded_at"),
    Property(name="speakers", data_type=DataType.TEXT_ARRAY, index_searchable=False),
    Property(name="speaker_keys", data_type=DataType.TEXT_ARRAY, tokenization=Tokenization.FIELD),
    _ranged(DataType.NUMBER, "start_s"),
    _ranged(DataType.NUMBER, "end_s"),
    Property(name="page", data_type=DataType.INT),
    _words("heading"),
    Property(name="lesson", data_type=DataType.INT),
    _words("lesson_title"),
    Property(name="lesson_url", data_type=DataType.TEXT, index_searchable=False),
    _ranged(DataType.INT, "position"),
    # Where each cue starts in ``text`` and when it is said (``Mark``), as three parallel
    # arrays: a sentence's second comes from these, never from the window's start.
    *(
        Property(name=name, data_type=kind, index_filterable=False, index_range_filters=False)
        for name, kind in (
            ("mark_at", DataType.INT_ARRAY),
            ("mark_start", DataType.NUMBER_ARRAY),
            ("mark_end", DataType.NUMBER_ARRAY),
        )
    ),
    _ranged(DataType.INT, "generation"),
    # What the unit is part of (title, speakers, heading): searched, never displayed.
    _words("context", tokenization=Tokenization.WORD),
]
UNIT_PROPERTIES = [
    *SEGMENT_PROPERTIES,
    Property(name="level", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
]

SOURCE_PROPERTIES = [
    Property(name="source_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
    _words("title"),
    Property(name="kind", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
    Property(name="url", data_type=DataType.TEXT, index_searchable=False),
    Property(name="recorded_at", data_type=DataType.DATE),
    Property(name="speakers", data_type=DataType.TEXT_ARRAY, index_searchable=False),
    Property(name="path", data_type=DataType.TEXT, index_searchable=False),
    Property(name="content_hash", data_type=DataType.TEXT, index_searchable=False),
    _words("description"),
    Property(name="segment_count", data_type=DataType.INT),
    Property(name="unit_count", data_type=DataType.INT),  # of the other levels
    GENERATION,
]


def segment_properties(source: Source, seg: Segment) -> dict[str, Any]:
    props: dict[str, Any] = {
        "text": seg.text,
        "source_id": source.id,
        "source_title": source.title,
        "source_url": source.url,
        "source_kind": source.kind,
        "recorded_at": as_datetime(source.recorded_at) if source.recorded_at else None,
        "speakers": list(seg.speakers),
        "speaker_keys": speaker_keys(seg.speakers),
        "start_s": seg.start_s,
        "end_s": seg.end_s,
        "page": seg.page,
        "heading": seg.heading,
        "lesson": seg.lesson,
        "lesson_title": seg.lesson_title,
        "lesson_url": seg.lesson_url,
        "position": seg.position,
        "context": context(source, seg),
    }
    if seg.level != "window":
        props["level"] = seg.level
    if seg.marks:
        props["mark_at"] = [m.at for m in seg.marks]
        props["mark_start"] = [round(m.start_s, 3) for m in seg.marks]
        props["mark_end"] = [round(m.end_s, 3) for m in seg.marks]
    return {k: v for k, v in props.items() if v is not None}


def _marks(p: Any) -> tuple[Mark, ...]:
    """The marks stored with a segment; none for untimed text or data from before marks."""
    at, start, end = p.get("mark_at") or (), p.get("mark_start") or (), p.get("mark_end") or ()
    if not (len(at) == len(start) == len(end)):
        return ()
    return tuple(Mark(int(a), float(s), float(e)) for a, s, e in zip(at, start, end, strict=True))


def _date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return None


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


# How a hybrid search explains a hit's vector half: its original score is the cosine
# similarity (1 - cosine distance) to the query vector.
_VECTOR_SCORE = re.compile(
    r"Result Set vector[^)]*\) Document \S+: original score ([-+0-9.eE]+)", re.IGNORECASE
)


def hybrid_similarity(explanation: str | None) -> float | None:
    """The cosine to the query a hybrid search's explanation gives a hit; None when the hit
    came from the keyword half alone (or the explanation says nothing of vectors)."""
    found = _VECTOR_SCORE.search(explanation or "")
    return float(found.group(1)) if found else None


def hit_from_object(obj: Any, score: float = 0.0, similarity: float | None = None) -> Hit:
    """Build a Hit from a QuorumSegment object returned by the client, with its
    ``similarity`` to the query when the search knows it."""
    p = obj.properties
    source = Source(
        id=str(p.get("source_id") or ""),
        title=str(p.get("source_title") or ""),
        kind=p.get("source_kind") or "document",
        url=p.get("source_url"),
        recorded_at=_date(p.get("recorded_at")),
    )
    segment = Segment(
        source_id=source.id,
        position=int(p.get("position") or 0),
        text=str(p.get("text") or ""),
        start_s=_opt_float(p.get("start_s")),
        end_s=_opt_float(p.get("end_s")),
        speakers=tuple(p.get("speakers") or ()),
        page=_opt_int(p.get("page")),
        heading=p.get("heading"),
        lesson=_opt_int(p.get("lesson")),
        lesson_title=p.get("lesson_title"),
        lesson_url=p.get("lesson_url"),
        marks=_marks(p),
        level=p.get("level") if p.get("level") in LEVELS else "window",
    )
    return Hit(
        id=str(obj.uuid),
        segment=segment,
        source=source,
        score=score,
        link=segment_link(source, segment),
        similarity=similarity,
    )


def source_from_object(obj: Any) -> SourceInfo:
    p = obj.properties
    source = Source(
        id=str(p.get("source_id") or ""),
        title=str(p.get("title") or ""),
        kind=p.get("kind") or "document",
        url=p.get("url"),
        recorded_at=_date(p.get("recorded_at")),
        speakers=tuple(p.get("speakers") or ()),
        path=str(p.get("path") or ""),
        content_hash=str(p.get("content_hash") or ""),
        description=p.get("description"),
    )
    generation = p.get("generation")  # microseconds since the epoch, when it was written
    return SourceInfo(
        source=source,
        segments=int(p.get("segment_count") or 0),
        indexed_at=int(generation) / 1e6 if generation else None,
    )
