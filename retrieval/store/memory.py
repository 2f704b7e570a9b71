"""``MemoryStore``: the ``Store`` protocol kept in this process's memory, for fast tests and
as the smallest complete example of a store (``STORE``, its registry line's entry, is at
the end: ``QUORUM_STORE=memory`` keeps nothing once the process exits).

It keeps what Weaviate keeps, as Weaviate's store does: writes under generations (a
source's units first, then its record naming their generation, then older ones dropped),
reads of live generations only, listings newest first, and a hybrid search fusing BM25 on
a unit's words (its text counted twice, its context's stems: ``retrieval.search.stems``) with the
cosine of its vector, each half scaled to 0..1 (Weaviate's relativeScore fusion). Nothing
is persisted; ranks are close to Weaviate's, not identical.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from uuid import NAMESPACE_URL, uuid5

from pydantic_settings import SettingsConfigDict

from retrieval.encoding.embed import cosine
from retrieval.errors import SearchUnavailable
from retrieval.links.links import segment_link
from retrieval.models import Hit, Level, SearchFilters, Segment, Source, SourceInfo, check_kb
from retrieval.search.names import speaker_keys
from retrieval.search.stems import stemmed_query, words
from retrieval.store.base import Embedded, StoredSource, StoreInfo, UpsertResult
from retrieval.store.registry import Opener, StoreKind, StoreSettings
from retrieval.write.levels import context

_NS = uuid5(NAMESPACE_URL, "https://quorum.invalid/memory")
K1, B = 1.2, 0.75  # BM25's usual constants, as Weaviate's defaults


@dataclass(frozen=True)
class _Unit:
    id: str
    source: Source
    segment: Segment
    vector: tuple[float, ...]
    generation: int
    terms: Counter[str]  # what keyword search reads, counted


@dataclass(frozen=True)
class _Record:
    info: SourceInfo
    generation: int


def _terms(source: Source, seg: Segment) -> Counter[str]:
    said = words(seg.text)
    around = words(" ".join([seg.heading or "", seg.lesson_title or "", context(source, seg)]))
    return Counter([*said, *said, *around])


class MemoryStore:
    """A ``Store`` in memory: per knowledge base, units by id and source records by id.
    ``down``: every call fails as an unreachable store does (``ready`` says no)."""

    def __init__(self, *, down: bool = False) -> None:
        self.down = down
        self._units: dict[str, dict[str, _Unit]] = {}
        self._records: dict[str, dict[str, _Record]] = {}
        self._generation = 0

    def _kb(self, kb: str) -> tuple[dict[str, _Unit], dict[str, _Record]]:
        check_kb(kb)
        if self.down:
            raise SearchUnavailable("The in-memory store is down.")
        return self._units.setdefault(kb, {}), self._records.setdefault(kb, {})

    # --- writes
    async def upsert_many(
        self,
        kb: str,
        items: Sequence[Embedded],
        batch_size: int = 256,
        known: dict[str, StoredSource] | None = None,
    ) -> list[UpsertResult | SearchUnavailable]:
        """Write each document's units under one new generation, flip each record to it,
        then drop older generations."""
        units, records = self._kb(kb)
        for item in items:
            if len(item.vectors) != len(item.doc.segments) or len(item.level_vectors) != len(
                item.doc.levels
            ):
                raise ValueError("one vector per segment")
        ids = [item.doc.source.id for item in items]
        previous = known if known is not None else await self.stored_sources(kb, ids)
        self._generation = generation = max(time.time_ns() // 1000, self._generation + 1)
        for item in items:
            source = item.doc.source
            pairs = [
                *zip(item.doc.segments, item.vectors, strict=True),
                *zip(item.doc.levels, item.level_vectors, strict=True),
            ]
            for seg, vec in pairs:
                key = f"{source.id}#{generation}#{seg.position}@{seg.level}"
                uid = str(uuid5(_NS, key))
                vector = tuple(float(x) for x in vec)
                units[uid] = _Unit(uid, source, seg, vector, generation, _terms(source, seg))
        # A reader may come in here, as between a real store's requests: it sees the old
        # generation whole (and a write cancelled here leaves orphans for clean_orphans).
        await asyncio.sleep(0)
        out: list[UpsertResult | SearchUnavailable] = []
        for item in items:  # the flip: from here on each source is its new generation
            source = item.doc.source
            info = SourceInfo(source, len(item.doc.segments), indexed_at=generation / 1e6)
            records[source.id] = _Record(info, generation)
            removed = self._drop_older(units, source.id, generation)
            status = "updated" if source.id in previous else "added"
            out.append(UpsertResult(status, len(item.doc.segments), removed))
        return out

    @staticmethod
    def _drop(units: dict[str, _Unit], which: Callable[[_Unit], bool]) -> int:
        """Drop the units ``which`` selects; how many went."""
        gone = [uid for uid, u in units.items() if which(u)]
        for uid in gone:
            del units[uid]
        return len(gone)

    def _drop_older(self, units: dict[str, _Unit], source_id: str, generation: int) -> int:
        return self._drop(units, lambda u: u.source.id == source_id and u.generation < generation)

    async def delete_source(self, kb: str, source_id: str) -> int:
        """Delete the record, then every unit of the source; how many windows went."""
        units, records = self._kb(kb)
        records.pop(source_id, None)
        windows = sum(
            1 for u in units.values() if u.source.id == source_id and u.segment.level == "window"
        )
        self._drop(units, lambda u: u.source.id == source_id)
        return windows

    async def set_path(self, kb: str, source_id: str, path: str) -> bool:
        """Show ``path`` as the source's path; False when it is not indexed."""
        _, records = self._kb(kb)
        if (record := records.get(source_id)) is None:
            return False
        info = replace(record.info, source=replace(record.info.source, path=path))
        records[source_id] = replace(record, info=info)
        return True

    async def purge(self, kb: str) -> None:
        """Nothing to do: a deleted unit is gone from memory at once."""
        check_kb(kb)

    async def clean_orphans(self, kb: str, min_age_s: float = 3600.0) -> int:
        """Drop units no record makes live: older than their source's live generation, or
        not live and older than ``min_age_s`` (a younger one may be a write under way)."""
        units, records = self._kb(kb)
        cutoff = time.time_ns() // 1000 - int(min_age_s * 1_000_000)

        def orphan(u: _Unit) -> bool:
            live = records.get(u.source.id)
            if live is not None and u.generation == live.generation:
                return False
            return (live is not None and u.generation < live.generation) or u.generation < cutoff

        return self._drop(units, orphan)

    # --- what is stored
    async def knowledge_bases(self) -> list[str]:
        """Every knowledge base written to, by name."""
        if self.down:
            raise SearchUnavailable("The in-memory store is down.")
        return sorted(set(self._units) | set(self._records))

    async def stored_sources(self, kb: str, source_ids: Sequence[str]) -> dict[str, StoredSource]:
        """The content hash and path of each of ``source_ids`` that is indexed."""
        _, records = self._kb(kb)
        return {
            sid: StoredSource(r.info.source.content_hash, r.info.source.path)
            for sid in source_ids
            if (r := records.get(sid)) is not None
        }

    async def list_sources(self, kb: str) -> list[SourceInfo]:
        """Every source, newest recording first, then by title."""
        _, records = self._kb(kb)
        infos = [r.info for r in records.values()]
        infos.sort(key=lambda i: (-(i.source.recorded_at or date.min).toordinal(), i.source.title))
        return infos

    async def count(self, kb: str) -> int:
        """How many windows ``kb`` holds (live or not, as Weaviate counts them)."""
        units, _ = self._kb(kb)
        return sum(1 for u in units.values() if u.segment.level == "window")

    # --- reads
    def _live(self, kb: str, level: Level) -> list[_Unit]:
        units, records = self._kb(kb)
        return [
            u
            for u in units.values()
            if u.segment.level == level
            and (r := records.get(u.source.id)) is not None
            and r.generation == u.generation
        ]

    async def hybrid(
        self,
        kb: str,
        query: str,
        vector: Sequence[float],
        filters: SearchFilters | None,
        k: int,
        alpha: float,
        level: Level = "window",
    ) -> list[Hit]:
        """BM25 and cosine, each scaled to 0..1 over its own results, fused by ``alpha``."""
        every = self._live(kb, level)
        units = [u for u in every if _passes(u, filters)]
        keyword = _bm25(every, units, words(stemmed_query(query)))
        near = {u.id: cosine(vector, u.vector) for u in units}
        kw, vec = _scaled({i: s for i, s in keyword.items() if s > 0}), _scaled(near)
        fused = {u.id: alpha * vec.get(u.id, 0.0) + (1 - alpha) * kw.get(u.id, 0.0) for u in units}
        ranked = sorted(units, key=lambda u: (-fused[u.id], u.source.id, u.segment.position))
        return [_hit(u, fused[u.id], near[u.id]) for u in ranked[:k]]

    async def hybrid_levels(
        self,
        kb: str,
        query: str,
        vector: Sequence[float],
        filters: SearchFilters | None,
        k: int,
        alpha: float,
        plan: Sequence[tuple[Level, float]],
        read: int | None = None,
    ) -> list[list[Hit]]:
        """``hybrid`` over each level in turn (all of each: reading costs nothing here)."""
        return [await self.hybrid(kb, query, vector, filters, k, alpha, lv) for lv, _ in plan]

    async def get(self, kb: str, hit_id: str) -> Hit | None:
        """One live window by id."""
        found = [u for u in self._live(kb, "window") if u.id == hit_id]
        return _hit(found[0]) if found else None

    async def fetch_ordered(
        self,
        kb: str,
        source_id: str,
        *,
        positions: tuple[int, int] | None = None,
        start_s: float | None = None,
        end_s: float | None = None,
        offset: int = 0,
        limit: int = 200,
        level: Level = "window",
    ) -> list[Hit]:
        """A source's live units of ``level`` in order, narrowed as asked."""
        units = [u for u in self._live(kb, level) if u.source.id == source_id]
        seg = [u.segment for u in units]
        kept = [
            u
            for u, s in zip(units, seg, strict=True)
            if (positions is None or positions[0] <= s.position <= positions[1])
            and (start_s is None or (s.end_s is not None and s.end_s >= start_s))
            and (end_s is None or (s.start_s is not None and s.start_s <= end_s))
        ]
        kept.sort(key=lambda u: u.segment.position)
        return [_hit(u) for u in kept[offset : offset + limit]]

    # --- health
    async def ready(self) -> bool:
        """True unless made ``down``."""
        return not self.down

    async def server_info(self) -> StoreInfo:
        """This process's memory."""
        if self.down:
            raise SearchUnavailable("The in-memory store is down.")
        return StoreInfo("memory:", "in-process")


def _passes(u: _Unit, filters: SearchFilters | None) -> bool:
    """Whether ``u`` is within ``filters``, as ``weaviate/filters.py`` writes them."""
    if filters is None:
        return True
    if filters.source:
        raise ValueError("resolve the source name to source_ids before searching the store")
    seg, when = u.segment, u.source.recorded_at
    return (
        (not filters.speaker or speaker_keys([filters.speaker])[0] in speaker_keys(seg.speakers))
        and (not filters.source_ids or u.source.id in filters.source_ids)
        and (filters.lesson is None or seg.lesson == filters.lesson)
        and (not filters.kind or u.source.kind == filters.kind)
        and (not filters.after or (when is not None and when >= filters.after))
        and (not filters.before or (when is not None and when <= filters.before))
    )


def _bm25(every: Sequence[_Unit], units: Iterable[_Unit], query: list[str]) -> dict[str, float]:
    """Okapi BM25 of ``units`` for ``query``'s terms (each once), with document frequencies
    and lengths taken over ``every`` unit of the level."""
    n = len(every) or 1
    mean = sum(u.terms.total() for u in every) / n or 1.0
    terms = list(dict.fromkeys(query))
    df = {t: sum(1 for u in every if t in u.terms) for t in terms}
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in terms}
    scores: dict[str, float] = {}
    for u in units:
        norm = K1 * (1 - B + B * u.terms.total() / mean)
        scores[u.id] = sum(
            idf[t] * u.terms[t] * (K1 + 1) / (u.terms[t] + norm) for t in terms if t in u.terms
        )
    return scores


def _scaled(scores: dict[str, float]) -> dict[str, float]:
    """Each score as its place between the lowest (0) and the highest (1)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    return {i: (s - low) / (high - low) if high > low else 1.0 for i, s in scores.items()}


def _hit(u: _Unit, score: float = 0.0, similarity: float | None = None) -> Hit:
    """A unit as the store returns it: its source as a hit carries it (no speakers, path or
    hash: those are the listing's), linked at its moment."""
    source = Source(u.source.id, u.source.title, u.source.kind, u.source.url, u.source.recorded_at)
    return Hit(u.id, u.segment, source, score, segment_link(source, u.segment), similarity)


class MemorySettings(StoreSettings):
    """The in-memory store has nothing to set (``QUORUM_MEMORY_*`` would be its prefix)."""

    model_config = SettingsConfigDict(
        env_prefix="QUORUM_MEMORY_", env_file=".env", extra="ignore", populate_by_name=True
    )


@contextlib.asynccontextmanager
async def open_memory(
    settings: MemorySettings, data_dir: Path, one_shot: bool = False
) -> AsyncIterator[MemoryStore]:
    """A new, empty store in this process's memory (nothing under ``data_dir``)."""
    yield MemoryStore()


_OPENER: Opener = open_memory  # mypy: fits the registry, yields a ``Store``
STORE = StoreKind(settings=MemorySettings, opener="retrieval.store.memory:open_memory")
