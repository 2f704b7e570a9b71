"""The search service the core calls: validate, resolve filters, embed, hybrid search,
optional rerank. ``SearchService.archive(kb)`` gives an ``Archive`` bound to one
knowledge base; nothing reached through it can see another.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Protocol

from retrieval.encoding.embed import Embedder
from retrieval.errors import InvalidInput
from retrieval.links.links import segment_link
from retrieval.links.share import LinkSigner
from retrieval.models import KINDS, LEVELS, Hit, SearchFilters, SourceInfo, check_kb
from retrieval.search.names import SourceChoice, choose_sources, title_matches
from retrieval.search.route import fixed, fuse, route
from retrieval.store import Store

MAX_K = 100
# Weaviate compares dates as int64 nanoseconds since 1970: outside these, a filter silently
# matches nothing.
EARLIEST_DATE, LATEST_DATE = date(1678, 1, 1), date(2262, 4, 11)
MAX_RESULTS = 10_000  # Weaviate's QUERY_MAXIMUM_RESULTS: offset + limit may not pass it
MAX_QUERY_CHARS = 2000
FUSE_CANDIDATES = 20  # hits ranked per level when several are fused
FUSE_READ = 3  # of which this many times the hits wanted are read (the best ranked)


class Reranker(Protocol):
    """Reorders hits for a query (a cross-encoder)."""

    async def rerank(self, query: str, hits: list[Hit], k: int) -> list[Hit]:
        """The best ``k`` of ``hits`` for ``query``, best first."""
        ...


@dataclass
class SearchTimings:
    """Where one search spent its time, in milliseconds."""

    embed_ms: float = 0.0
    store_ms: float = 0.0
    rerank_ms: float = 0.0
    total_ms: float = 0.0

    @property
    def own_ms(self) -> float:
        """Quorum's own overhead: everything but embedding, the store and reranking."""
        return max(0.0, self.total_ms - self.embed_ms - self.store_ms - self.rerank_ms)


class NothingMatches(Exception):
    """A filter names a source that does not exist, so no segment can match."""


@dataclass
class _SourceCache:
    at: float = 0.0
    infos: list[SourceInfo] = field(default_factory=list)


def validate_query(query: str, k: int) -> str:
    """Reject an empty or over-long query and an out-of-range ``k``."""
    text = " ".join(query.split())
    if not text:
        raise InvalidInput("The query is empty: say what to search for.")
    if len(text) > MAX_QUERY_CHARS:
        raise InvalidInput(
            f"The query is too long ({len(text)} characters; at most {MAX_QUERY_CHARS})."
        )
    if not 1 <= k <= MAX_K:
        raise InvalidInput(f"The number of results must be between 1 and {MAX_K}, not {k}.")
    return text


def validate_filters(filters: SearchFilters) -> None:
    """Reject filters that cannot be satisfied as written."""
    for name, day in (("after", filters.after), ("before", filters.before)):
        if day is not None and not EARLIEST_DATE <= day <= LATEST_DATE:
            raise InvalidInput(
                f"The {name} date {day} is outside the dates search can filter on "
                f"({EARLIEST_DATE} to {LATEST_DATE})."
            )
    if filters.after and filters.before and filters.after > filters.before:
        raise InvalidInput(
            f"The date range is reversed: after {filters.after} "
            f"is later than before {filters.before}."
        )
    if filters.kind is not None and filters.kind not in KINDS:
        raise InvalidInput(f"Unknown kind {filters.kind!r}; use one of {', '.join(KINDS)}.")
    if unknown := [lv for lv in filters.levels if lv not in LEVELS]:
        raise InvalidInput(f"Unknown level {unknown[0]!r}; use one of {', '.join(LEVELS)}.")
    if filters.lesson is not None and filters.lesson < 0:
        raise InvalidInput(f"Lesson numbers start at 0, not {filters.lesson}.")


class SearchService:
    """Hybrid search over the store with our own embeddings."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        *,
        alpha: float = 0.5,
        reranker: Reranker | None = None,
        rerank_candidates: int = 30,
        source_cache_s: float = 10.0,
        signer: LinkSigner | None = None,
    ) -> None:
        if not 0.0 <= alpha <= 1.0:
            raise InvalidInput(f"alpha must be between 0 and 1, not {alpha}.")
        self.store = store
        self.embedder = embedder
        self.alpha = alpha
        self.reranker = reranker
        self.rerank_candidates = rerank_candidates
        self._source_cache: dict[str, _SourceCache] = {}
        self._source_cache_s = source_cache_s
        self.signer = signer

    def linked(self, kb: str, hits: list[Hit]) -> list[Hit]:
        """``hits`` with each source's signed page (``retrieval.links.share``) and, for a source
        without a URL of its own, a link to that page at the hit."""
        if self.signer is None or not hits:
            return hits
        views: dict[str, str] = {}
        out = []
        for hit in hits:
            sid = hit.source.id
            view = views.get(sid) or views.setdefault(sid, self.signer.page(kb, sid))
            source = replace(hit.source, view=view)
            out.append(replace(hit, source=source, link=segment_link(source, hit.segment)))
        return out

    def archive(self, kb: str) -> KbArchive:
        """Read access bound to one knowledge base."""
        return KbArchive(self, check_kb(kb))

    def forget_sources(self, kb: str) -> None:
        """Drop the cached source list (after an ingest or delete)."""
        self._source_cache.pop(kb, None)

    async def sources(self, kb: str) -> list[SourceInfo]:
        """The knowledge base's sources, cached for a few seconds (filters resolve titles)."""
        cached = self._source_cache.get(kb)
        now = time.monotonic()
        if cached and now - cached.at < self._source_cache_s:
            return cached.infos
        infos = await self.store.list_sources(kb)
        self._source_cache[kb] = _SourceCache(now, infos)
        return infos

    async def current_source(self, kb: str, source_id: str) -> SourceInfo | None:
        """A source as the store holds it now: the store confirms it (one record read)
        and the cached list describes it, read again when it does not know it yet. A
        source removed by another process within the cache's seconds is gone here at
        once: what a page plays must not outlive its removal."""
        if source_id not in await self.store.stored_sources(kb, [source_id]):
            self.forget_sources(kb)
            return None
        for _ in range(2):
            found = [i for i in await self.sources(kb) if i.source.id == source_id]
            if found:
                return found[0]
            self.forget_sources(kb)  # added since the list was cached
        return None

    async def choose_sources(self, kb: str, name: str) -> SourceChoice:
        """The sources a typed name selects (``retrieval.search.names``: exact names win)."""
        return choose_sources(name, [i.source for i in await self.sources(kb)])

    async def resolve_source_ids(self, kb: str, title: str) -> list[str]:
        """Ids of the sources a typed name selects."""
        return list((await self.choose_sources(kb, title)).ids)

    async def resolve_filters(self, kb: str, filters: SearchFilters) -> SearchFilters:
        """``filters`` validated, with a typed source name resolved to the ids it selects
        (the store takes ids); raises NothingMatches when the name selects no source."""
        validate_filters(filters)
        if not filters.source:
            return filters
        matched = await self.resolve_source_ids(kb, filters.source)
        ids = [i for i in filters.source_ids if i in matched] if filters.source_ids else matched
        if not ids:
            raise NothingMatches(filters.source)
        return replace(filters, source=None, source_ids=tuple(ids))

    async def search(
        self, kb: str, query: str, filters: SearchFilters | None = None, k: int = 8
    ) -> list[Hit]:
        """Hybrid search, best first."""
        hits, _ = await self.search_timed(kb, query, filters, k)
        return hits

    async def search_timed(
        self, kb: str, query: str, filters: SearchFilters | None = None, k: int = 8
    ) -> tuple[list[Hit], SearchTimings]:
        """Hybrid search, with where the time went."""
        t0 = time.perf_counter()
        timings = SearchTimings()
        text = validate_query(query, k)
        try:
            resolved = await self.resolve_filters(kb, filters or SearchFilters())
        except NothingMatches:
            timings.total_ms = (time.perf_counter() - t0) * 1000
            return [], timings
        t1 = time.perf_counter()
        vector = await self.embedder.embed_query(text)
        t2 = time.perf_counter()
        limit = max(k, self.rerank_candidates) if self.reranker else k
        levels = filters.levels if filters else ()
        plan = fixed(levels) if levels else route(text)
        each = limit if len(plan) == 1 else max(limit, FUSE_CANDIDATES)
        # Several levels: only the hits that can make the fused top ``limit`` are read,
        # unless dropping contained hits left too few (then every candidate is read).
        hits: list[Hit] = []
        for read in (FUSE_READ * limit, None) if len(plan) > 1 else (None,):
            runs = await self.store.hybrid_levels(
                kb, text, vector, resolved, each, self.alpha, plan, read
            )
            hits = fuse([(w, run) for (_, w), run in zip(plan, runs, strict=True)], limit)
            if read is None or len(hits) == limit or sum(map(len, runs)) < read:
                break
        t3 = time.perf_counter()
        if self.reranker and hits:
            hits = await self.reranker.rerank(text, hits, k)
        t4 = time.perf_counter()
        timings.embed_ms = (t2 - t1) * 1000
        timings.store_ms = (t3 - t2) * 1000
        timings.rerank_ms = (t4 - t3) * 1000
        timings.total_ms = (t4 - t0) * 1000
        return self.linked(kb, hits[:k]), timings


class KbArchive:
    """An ``Archive`` bound in code to one knowledge base."""

    def __init__(self, service: SearchService, kb: str) -> None:
        self._service = service
        self._kb = kb

    @property
    def kb(self) -> str:
        """The knowledge base this archive reads."""
        return self._kb

    async def search(
        self, query: str, filters: SearchFilters | None = None, k: int = 8
    ) -> list[Hit]:
        """Hybrid search in this knowledge base."""
        return await self._service.search(self._kb, query, filters, k)

    async def neighbours(self, hit_id: str, before: int = 1, after: int = 1) -> list[Hit]:
        """The segment and its neighbours in the same source, in order."""
        store = self._service.store
        hit = await store.get(self._kb, hit_id)
        if hit is None:
            raise InvalidInput(f"No segment with id {hit_id!r} in this knowledge base.")
        pos = hit.segment.position
        around = (max(0, pos - before), pos + after)
        return self._service.linked(
            self._kb,
            await store.fetch_ordered(
                self._kb, hit.source.id, positions=around, limit=before + after + 1
            ),
        )

    async def transcript(
        self,
        source_id: str,
        start_s: float | None = None,
        end_s: float | None = None,
        offset: int = 0,
        limit: int = 200,
    ) -> list[Hit]:
        """A source's segments in order, optionally those overlapping a time range."""
        if not 1 <= limit <= 500:
            raise InvalidInput(f"limit must be between 1 and 500, not {limit}.")
        if not 0 <= offset <= MAX_RESULTS - limit:
            raise InvalidInput(
                f"offset must be between 0 and {MAX_RESULTS - limit:,} (Weaviate pages through "
                f"at most {MAX_RESULTS:,} results), not {offset:,}."
            )
        return self._service.linked(
            self._kb,
            await self._service.store.fetch_ordered(
                self._kb, source_id, start_s=start_s, end_s=end_s, offset=offset, limit=limit
            ),
        )

    async def summary(self, source: str) -> Hit:
        """The stored summary of a source, named by id or title; InvalidInput says why
        there is none."""
        infos = await self.sources()
        exact = [i for i in infos if source in (i.source.id, i.source.title)]
        found = exact or [i for i in infos if title_matches(source, i.source)]
        if not found:
            raise InvalidInput(f"No source matches {source!r}; `quorum sources` lists them.")
        if len(found) > 1:
            names = ", ".join(i.source.id for i in found[:5])
            raise InvalidInput(f"{source!r} matches several sources ({names}); name one by id.")
        info = found[0]
        units = await self._service.store.fetch_ordered(
            self._kb, info.source.id, limit=1, level="summary"
        )
        if not units:
            raise InvalidInput(
                f"{info.source.id} has no summary: it is too short to need one, or it was "
                "ingested before summaries existed (`quorum ingest --force` makes one)."
            )
        return self._service.linked(self._kb, units)[0]

    async def sources(self) -> list[SourceInfo]:
        """Every source in this knowledge base."""
        return await self._service.sources(self._kb)

    async def speakers(self) -> list[str]:
        """Every speaker named in this knowledge base, most frequent source first."""
        seen: dict[str, int] = {}
        for info in await self.sources():
            for name in info.source.speakers:
                seen[name] = seen.get(name, 0) + 1
        return sorted(seen, key=lambda n: (-seen[n], n))
