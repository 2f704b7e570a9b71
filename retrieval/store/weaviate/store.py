"""Weaviate storage: one tenant per knowledge base, hybrid search with filters over each
level, neighbours, transcripts and listings; writes come from ``writes``, the collections
and the schema from ``collections`` and ``schema`` (all in this package).

Every read keeps only the units of a source's live generation (``writes``), so a reader
never sees half a source.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import date
from typing import Any

import weaviate
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery, Sort

from retrieval.encoding.embed import cosine
from retrieval.errors import SearchUnavailable
from retrieval.models import Hit, Level, SearchFilters, SourceInfo
from retrieval.search.route import best
from retrieval.search.stems import has_stems, keyword_query, stemmed_query
from retrieval.store.base import StoreInfo
from retrieval.store.weaviate.errors import translate_errors
from retrieval.store.weaviate.filters import both, of_source
from retrieval.store.weaviate.filters import where as to_where
from retrieval.store.weaviate.rebuild import Rebuilds
from retrieval.store.weaviate.schema import (
    VECTOR,
    hit_from_object,
    hybrid_similarity,
    source_from_object,
)
from retrieval.store.weaviate.tenants import follows_switch

# What keyword search reads: the text, where it sits, and what it is part of (title and
# speakers: "what did the retro say about rollback" finds a window that never says "retro").
# A unit's own words count twice: its context (title, speakers, heading) is shared by every
# unit of its source, so it may tip a tie but not outrank the words that were said. Where
# units store stems (``retrieval.search.stems``), a question is asked as stems, which live in the
# context beside the title's: there only words without a stem (numbers, "IL-6") count twice.
QUERY_PROPERTIES = ["text^2", "heading", "lesson_title", "context"]
# Whether a knowledge base stores stems is judged on this many of its units; a no is asked
# again after this many seconds (an ingest may have added them since).
STEMS_SAMPLE = 100
ANSWER_CHECK_S = 10.0
"""How long a server that accepts the connection may take to connect and say whether it
is ready: a stopped or wedged one (connections accepted, nothing answered) is one
sentence after this, not the query timeout (QUORUM_WEAVIATE_TIMEOUT_S) and more."""
STEMS_RECHECK_S = 60.0


class WeaviateStore(Rebuilds):
    """Quorum's Weaviate store: connect, write (``Writes``), purge (``Rebuilds``), search
    and list."""

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(
        cls, client: weaviate.WeaviateAsyncClient, url: str, replicas: int = 1
    ) -> AsyncIterator[WeaviateStore]:
        """Connect, make sure the schema exists (``replicas`` copies of each object), and
        close on exit."""
        try:
            with translate_errors(url):
                try:
                    async with asyncio.timeout(ANSWER_CHECK_S):
                        await client.connect()  # asks the server (the query timeout)
                        await client.is_ready()
                except TimeoutError:
                    raise SearchUnavailable(
                        f"Weaviate at {url} accepts connections but has not answered for "
                        f"{ANSWER_CHECK_S:g} seconds; check that it is running and not stuck."
                    ) from None
        except SearchUnavailable:
            with contextlib.suppress(Exception):
                await client.close()
            raise
        try:
            store = cls(client, url, replicas)
            await store.ensure_schema()
            yield store
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def ready(self) -> bool:
        """True when Weaviate says it is ready (False when it cannot be reached)."""
        try:
            return bool(await self.client.is_ready())
        except Exception:  # readiness is a yes or no: any failure is a no
            return False

    async def server_info(self) -> StoreInfo:
        """Weaviate's URL and the version it reports."""
        with translate_errors(self.url):
            meta = await self.client.get_meta()
        return StoreInfo(self.url, str(meta.get("version", "?")))

    async def _keywords(self, kb: str, query: str) -> str:
        """What the keyword half asks of ``kb``: the stems of the query's words (and its words
        with digits) where units store stems; else the query and its stems, of which only
        the words match (a knowledge base ingested before stems searches as it did)."""
        return stemmed_query(query) if await self._has_stems(kb) else keyword_query(query)

    async def _has_stems(self, kb: str) -> bool:
        """Whether every unit in a sample of ``kb``'s units stores stems in its context; a
        no is asked again after a minute (an ingest may add them), a yes is kept. One unit
        without is a knowledge base partly ingested before stems: asked as stems, its
        older units would match only words with digits, so it is asked the words (and
        stems) until ``quorum ingest --force`` gives every unit its stems."""
        now = time.monotonic()
        known = self._stems.get(kb)
        if known is not None and (known[0] or now - known[1] < STEMS_RECHECK_S):
            return known[0]
        with translate_errors(self.url):
            res = await self.segments(kb).query.fetch_objects(
                limit=STEMS_SAMPLE, return_properties=["context"]
            )
        marked = [has_stems(str(o.properties.get("context") or "")) for o in res.objects]
        found = bool(marked) and all(marked)
        self._stems[kb] = (found, now)
        return found

    @follows_switch
    async def list_sources(self, kb: str) -> list[SourceInfo]:
        """Every source in the knowledge base, newest recording first, then by title."""
        if not await self.has_kb(kb):
            return []
        infos: list[SourceInfo] = []
        with translate_errors(self.url):
            async for obj in self._iterate(self.sources_collection(kb)):
                infos.append(source_from_object(obj))
        infos.sort(key=lambda i: (-(i.source.recorded_at or date.min).toordinal(), i.source.title))
        return infos

    @follows_switch
    async def count(self, kb: str) -> int:
        """How many segments the knowledge base holds."""
        if not await self.has_kb(kb):
            return 0
        with translate_errors(self.url):
            agg = await self.segments(kb).aggregate.over_all(total_count=True)
        return int(agg.total_count or 0)

    @follows_switch
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
        """Hybrid search (BM25 on the text and its context, vector on our own embedding),
        relativeScore fusion, over the units of one level.

        In two steps: the hybrid query asks for ids and scores only, then the ranked
        objects are read by id. A query returning properties costs Weaviate 2-6 ms more
        CPU, about the same for 8 hits as for 20 (it seems to read every candidate of
        both halves before fusing): most of a small level's cost (``bench/fused_query.py``)."""
        if not await self.has_kb(kb):
            return []
        limit = k
        keywords = await self._keywords(kb, query)
        col, only = self._of_level(kb, level)
        where = both([f for f in (only, to_where(filters)) if f is not None])
        with translate_errors(self.url):
            while True:
                ranked = await self._ranked(col, where, keywords, vector, alpha, limit)
                live = await self._read_live(kb, [(col, [o.uuid for o in ranked])])
                # Orphans took places: ask once more with room for them (rare: after a crash).
                if len(live) == len(ranked) or len(ranked) < limit or limit > k:
                    break
                limit = min(k + 2 * (len(ranked) - len(live)) + 10, 1000)
        return await self._hits(col, ranked, live, vector, k)

    @follows_switch
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
        """``hybrid`` over each level of ``plan`` in one round of requests: the levels'
        queries at once (ids and scores), then one read per collection and one live
        check, of only the ``read`` hits ranked first across the levels when given (each
        level's list then a prefix of its own). A level whose hits to read include
        orphans asks again alone (``hybrid``: rare, after a crash)."""
        if len(plan) == 1 or not await self.has_kb(kb):
            return [await self.hybrid(kb, query, vector, filters, k, alpha, lv) for lv, _ in plan]
        keywords = await self._keywords(kb, query)
        narrow = to_where(filters)
        cols = [self._of_level(kb, lv) for lv, _ in plan]
        with translate_errors(self.url):
            where = [both([f for f in (only, narrow) if f is not None]) for _, only in cols]
            runs = await asyncio.gather(
                *(
                    self._ranked(col, w, keywords, vector, alpha, k)
                    for (col, _), w in zip(cols, where, strict=True)
                )
            )
            ids = [(w, [str(o.uuid) for o in run]) for (_, w), run in zip(plan, runs, strict=True)]
            wanted = best(ids, read) if read is not None else {i for _, run in ids for i in run}
            runs = [[o for o in run if str(o.uuid) in wanted] for run in runs]
            levels = [lv for lv, _ in plan]
            windows: list[Any] = []
            units: list[Any] = []
            for lv, run in zip(levels, runs, strict=True):
                (windows if lv == "window" else units).extend(o.uuid for o in run)
            live = await self._read_live(
                kb, [(self.segments(kb), windows), (self.units(kb), units)]
            )
        out = []
        for lv, (col, _), run in zip(levels, cols, runs, strict=True):
            if any(o.uuid not in live for o in run):
                out.append(await self.hybrid(kb, query, vector, filters, k, alpha, lv))
            else:
                out.append(await self._hits(col, run, live, vector, k))
        return out

    async def _ranked(
        self,
        col: Any,
        where: Any,
        keywords: str,
        vector: Sequence[float],
        alpha: float,
        limit: int,
    ) -> list[Any]:
        """One hybrid query's ranked objects: ids, scores and explanations, no properties."""
        res = await col.query.hybrid(
            query=keywords,
            vector=list(vector),
            target_vector=VECTOR,
            alpha=alpha,
            fusion_type=HybridFusion.RELATIVE_SCORE,
            query_properties=QUERY_PROPERTIES,
            filters=where,
            limit=limit,
            return_properties=[],
            # The explanation carries each hit's cosine to the query: fetching
            # the vectors to compute it costs ~5 ms more at 1M segments.
            return_metadata=MetadataQuery(score=True, explain_score=True),
        )
        return list(res.objects)

    async def _read_live(
        self, kb: str, wanted: Sequence[tuple[Any, Sequence[Any]]]
    ) -> dict[Any, Any]:
        """The objects of each (collection, ids) pair read at once, with every property,
        those of a live generation only, by id."""
        reads = await asyncio.gather(*(self._by_id(col, ids) for col, ids in wanted if ids))
        return {o.uuid: o for o in await self._live(kb, [o for read in reads for o in read])}

    async def _hits(
        self, col: Any, ranked: Sequence[Any], live: dict[Any, Any], vector: Sequence[float], k: int
    ) -> list[Hit]:
        """The first ``k`` live ones of ``ranked`` as hits, with their similarity."""
        hits = [
            hit_from_object(
                live[o.uuid],
                float(o.metadata.score or 0.0),
                similarity=hybrid_similarity(o.metadata.explain_score),
            )
            for o in ranked
            if o.uuid in live
        ][:k]
        if hits and all(h.similarity is None for h in hits):
            # None came from the vector half (or the explanation changed): their vectors.
            hits = await self._with_similarity(col, hits, vector)
        return hits

    async def _by_id(self, col: Any, ids: Sequence[Any]) -> list[Any]:
        """The objects of ``ids`` (those still there), with every property."""
        if not ids:
            return []
        res = await col.query.fetch_objects(
            filters=Filter.by_id().contains_any(list(ids)), limit=len(ids)
        )
        return list(res.objects)

    async def _with_similarity(
        self, col: Any, hits: list[Hit], query: Sequence[float]
    ) -> list[Hit]:
        """``hits`` with their cosine to ``query``, from their stored vectors."""
        with translate_errors(self.url):
            res = await col.query.fetch_objects(
                filters=Filter.by_id().contains_any([h.id for h in hits]),
                limit=len(hits),
                include_vector=[VECTOR],
                return_properties=[],
            )
        cosines = {str(o.uuid): cosine(query, o.vector[VECTOR]) for o in res.objects if o.vector}
        return [replace(h, similarity=cosines.get(h.id)) for h in hits]

    @follows_switch
    async def bm25(self, kb: str, query: str, filters: SearchFilters | None, k: int) -> list[Hit]:
        """Keyword search alone, ranked as hybrid search's keyword half ranks (for
        benchmarks and diagnostics): the same properties, weights and query, so a unit's
        text counts as in hybrid search and its title is not read once more from
        ``source_title``."""
        with translate_errors(self.url):
            res = await self.segments(kb).query.bm25(
                query=await self._keywords(kb, query),
                query_properties=QUERY_PROPERTIES,
                filters=to_where(filters),
                limit=k,
                return_metadata=MetadataQuery(score=True),
            )
            live = await self._live(kb, res.objects)
        return [hit_from_object(o, float(o.metadata.score or 0.0)) for o in live]

    @follows_switch
    async def near_vector(
        self, kb: str, vector: Sequence[float], filters: SearchFilters | None, k: int
    ) -> list[Hit]:
        """Vector search alone (for benchmarks and diagnostics)."""
        with translate_errors(self.url):
            res = await self.segments(kb).query.near_vector(
                near_vector=list(vector),
                target_vector=VECTOR,
                filters=to_where(filters),
                limit=k,
                return_metadata=MetadataQuery(distance=True),
            )
            live = await self._live(kb, res.objects)
        similarities = [1.0 - float(o.metadata.distance or 0.0) for o in live]
        return [
            hit_from_object(o, s, similarity=s) for o, s in zip(live, similarities, strict=True)
        ]

    @follows_switch
    async def get(self, kb: str, hit_id: str) -> Hit | None:
        """One segment by id."""
        if not await self.has_kb(kb):
            return None
        with translate_errors(self.url):
            obj = await self.segments(kb).query.fetch_object_by_id(hit_id)
            live = [] if obj is None else await self._live(kb, [obj])
        return hit_from_object(live[0]) if live else None

    @follows_switch
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
        """A source's segments (or units of ``level``) in order of position: those at
        ``positions`` (first and last, inclusive) and overlapping ``start_s``..``end_s``
        when given."""
        if not await self.has_kb(kb):
            return []
        col, only = self._of_level(kb, level)
        span = of_source(source_id, positions, start_s, end_s)
        with translate_errors(self.url):
            live_only = await self._live_generation(kb, source_id)
            if live_only is None:
                return []
            where = Filter.all_of([f for f in (only, span, live_only) if f is not None])
            res = await col.query.fetch_objects(
                filters=where,
                sort=Sort.by_property("source_id").by_property("position"),
                offset=offset,
                limit=limit,
            )
            live = await self._live(kb, res.objects)
        return [hit_from_object(o) for o in live]
