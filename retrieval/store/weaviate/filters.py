"""Quorum's ``SearchFilters`` in Weaviate's terms: the one place a search's narrowing, or a
source's span of units, becomes a Weaviate filter (the store's methods take Quorum types
and call these)."""

from __future__ import annotations

from weaviate.classes.query import Filter
from weaviate.collections.classes.filters import _Filters

from retrieval.models import SearchFilters
from retrieval.search.names import speaker_keys
from retrieval.store.weaviate.schema import as_datetime


def where(filters: SearchFilters | None) -> _Filters | None:
    """The Weaviate filter for ``filters`` (None: nothing narrows). ``filters.levels`` picks
    collections, not objects, so it is not part of it; a source *name* must already be
    resolved to ``source_ids`` (``SearchService.resolve_filters``)."""
    if filters is None:
        return None
    if filters.source:
        raise ValueError("resolve the source name to source_ids before searching the store")
    parts: list[_Filters] = []
    if filters.speaker:
        keys = speaker_keys([filters.speaker])
        parts.append(Filter.by_property("speaker_keys").contains_any(keys[:1]))
    if filters.source_ids:
        parts.append(Filter.by_property("source_id").contains_any(list(filters.source_ids)))
    if filters.lesson is not None:
        parts.append(Filter.by_property("lesson").equal(filters.lesson))
    if filters.kind:
        parts.append(Filter.by_property("source_kind").equal(filters.kind))
    if filters.after:
        parts.append(Filter.by_property("recorded_at").greater_or_equal(as_datetime(filters.after)))
    if filters.before:
        parts.append(Filter.by_property("recorded_at").less_or_equal(as_datetime(filters.before)))
    return both(parts)


def of_source(
    source_id: str,
    positions: tuple[int, int] | None = None,
    start_s: float | None = None,
    end_s: float | None = None,
) -> _Filters:
    """One source's units: those at ``positions`` (first and last, inclusive) and those
    overlapping ``start_s``..``end_s``, when given."""
    parts = [Filter.by_property("source_id").equal(source_id)]
    if positions is not None:
        parts.append(Filter.by_property("position").greater_or_equal(positions[0]))
        parts.append(Filter.by_property("position").less_or_equal(positions[1]))
    if start_s is not None:
        parts.append(Filter.by_property("end_s").greater_or_equal(start_s))
    if end_s is not None:
        parts.append(Filter.by_property("start_s").less_or_equal(end_s))
    result = both(parts)
    assert result is not None
    return result


def both(parts: list[_Filters]) -> _Filters | None:
    """All of ``parts`` (None when there are none)."""
    if not parts:
        return None
    return Filter.all_of(parts) if len(parts) > 1 else parts[0]
