"""One Weaviate request per fused route, or one per level? Measured on ``bench/search.py``'s
cached archive (its 20k data dir by default), every query through every way at once.

Per query (``bench/search.py``'s pool: half unfiltered, a quarter with a speaker filter, a
quarter with a date range), after embedding it once, each of these runs, in a shuffled
order so the machine's load falls on all alike:

- two floors, one unfiltered hybrid query over windows: ``before`` as
  ``WeaviateStore.hybrid`` asked it until now (the query returns every property, then the
  live check), and ``now`` (``WeaviateStore.hybrid``: ids and scores, then a read by id);
- for every route (windows, remark, overview, unsure, whatever the question's words):
  (a) ``per level, before``: one query per level at once, each returning its properties,
      fused by ``retrieval.search.route.fuse`` (the product until now);
  (a') ``ids first, all read``: ``WeaviateStore.hybrid_levels`` asked for every
      candidate: the levels' queries at once asking ids and scores only, then one read
      by id per collection and one live check for all of them;
  (a'') ``ids first, best 3k read (now)``: the product (``SearchService``): the same, the
      ids ranked by the weighted RRF first (``route.best``) and only the best 3k read;
  (b) ``one request (all levels)``: ONE hybrid query over an extra collection
      (``BenchAllLevels``) holding every level of the knowledge base (windows and units
      copied with their vectors, a ``level`` property on each), filtered to the route's
      levels with ``ContainsAny``, ``FUSE_CANDIDATES`` per level asked for in all (ids
      first, then one read); its hits split by level and fused by the same weighted RRF;
  (c) ``units + windows``: one query for the route's levels that share ``QuorumUnit``
      (``level`` ContainsAny) beside one over windows, at once, split and fused alike.

Each is timed with the query's embedding added, as the product's total is, and printed
against both floors as a ratio of p95s, with the Weaviate server's CPU per search (read
from ``/proc``: it moves far less than wall time when other processes load the box).
``top-8 kept`` is the share of (a)'s eight hits the way also returns: what changes for
the reader (``bench/qmsum.py`` says whether it is better or worse).

Run: ``nice -n 10 .venv/bin/python bench/fused_query.py [--size 20000] [--queries 200]``
(the data dir must exist: build it with ``bench/search.py --sizes 20000 --real 2000``).
The first run copies the archive into ``BenchAllLevels`` (about a minute at 20k).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from weaviate.classes.config import Configure
from weaviate.classes.data import DataObject
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery

from bench.common import weaviate_binary
from bench.machine import Contention, describe, process_cpu, server_pid
from bench.search import make_queries, open_server, percentile
from bench.search_corpus import KB, Corpus
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.models import Hit, Level, SearchFilters
from retrieval.search.route import OVERVIEW, REMARK, UNSURE, WINDOWS, Route, fuse
from retrieval.search.search import FUSE_CANDIDATES, FUSE_READ
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.filters import both, where
from retrieval.store.weaviate.schema import (
    SEGMENTS,
    UNIT_PROPERTIES,
    UNITS,
    VECTOR,
    hit_from_object,
    hybrid_similarity,
)
from retrieval.store.weaviate.server import async_client
from retrieval.store.weaviate.store import QUERY_PROPERTIES

ALL_LEVELS = "BenchAllLevels"
ROUTES: dict[str, Route] = {
    "windows": WINDOWS,
    "remark": REMARK,
    "overview": OVERVIEW,
    "unsure": UNSURE,
}
K = 8
console = Console(width=None if Console().is_terminal else 120)


async def copy_all_levels(store: WeaviateStore) -> int:
    """``BenchAllLevels`` filled with every window and unit of the bench knowledge base
    (same ids, vectors and properties; windows get ``level`` = "window"); its size."""
    client = store.client
    if not await client.collections.exists(ALL_LEVELS):
        await client.collections.create(
            ALL_LEVELS,
            properties=UNIT_PROPERTIES,
            multi_tenancy_config=Configure.multi_tenancy(
                enabled=True, auto_tenant_creation=True, auto_tenant_activation=True
            ),
            vector_config=Configure.Vectors.self_provided(name=VECTOR),
            inverted_index_config=Configure.inverted_index(index_null_state=True),
        )
    target = client.collections.use(ALL_LEVELS).with_tenant(KB)
    live = await store.names.live(KB)  # the knowledge base's tenant (a removal rebuilds it)
    want = 0
    for name in (SEGMENTS, UNITS):
        agg = (
            await client.collections.use(name)
            .with_tenant(live)
            .aggregate.over_all(total_count=True)
        )
        want += int(agg.total_count or 0)
    have = await target.aggregate.over_all(total_count=True) if await _has_tenant(store) else None
    if have is not None and int(have.total_count or 0) == want:
        return want
    t0 = time.perf_counter()
    copied = 0
    for name in (SEGMENTS, UNITS):
        source = client.collections.use(name).with_tenant(live)
        after = None
        while True:
            page = await source.query.fetch_objects(limit=1000, after=after, include_vector=True)
            if not page.objects:
                break
            batch = []
            for o in page.objects:
                props = {k: v for k, v in o.properties.items() if v is not None}
                props.setdefault("level", "window")
                batch.append(DataObject(properties=props, uuid=o.uuid, vector=o.vector))
            res = await target.data.insert_many(batch)
            if res.has_errors:
                raise SystemExit(f"copy failed: {next(iter(res.errors.values()))}")
            copied += len(batch)
            after = page.objects[-1].uuid
            if copied % 10_000 < len(batch):
                console.print(f"copied {copied:,} of {want:,} objects")
    console.print(f"copied {copied:,} objects in {time.perf_counter() - t0:.0f} s")
    return copied


async def _has_tenant(store: WeaviateStore) -> bool:
    col = store.client.collections.use(ALL_LEVELS)
    return await col.tenants.get_by_name(KB) is not None


async def raw_query(
    store: WeaviateStore,
    col: Any,
    text: str,
    vector: Sequence[float],
    filters: SearchFilters,
    only: Any,
    limit: int,
    properties: bool,
) -> list[Any]:
    """The objects of one hybrid query as ``WeaviateStore.hybrid`` asks it (keywords,
    properties searched, fusion, scores and explanation), before the live check; with
    every property (as before) or with none (ids and scores)."""
    res = await col.query.hybrid(
        query=await store._keywords(KB, text),
        vector=list(vector),
        target_vector=VECTOR,
        alpha=0.5,
        fusion_type=HybridFusion.RELATIVE_SCORE,
        query_properties=QUERY_PROPERTIES,
        filters=both([x for x in (only, where(filters)) if x is not None]),
        limit=limit,
        return_properties=None if properties else [],
        return_metadata=MetadataQuery(score=True, explain_score=True),
    )
    return list(res.objects)


async def read_live(store: WeaviateStore, ranked: Sequence[Any], cols: Sequence[Any]) -> list[Hit]:
    """``ranked`` (objects of a query without properties) read by id from ``cols`` at once,
    checked live, as hits in their order."""
    ids = [o.uuid for o in ranked]
    reads = await asyncio.gather(*(store._by_id(col, ids) for col in cols))
    live = {o.uuid: o for o in await store._live(KB, [o for read in reads for o in read])}
    return [_hit(live[o.uuid], o) for o in ranked if o.uuid in live]


def _hit(full: Any, ranked: Any) -> Hit:
    meta = ranked.metadata
    return hit_from_object(full, float(meta.score or 0.0), hybrid_similarity(meta.explain_score))


async def hybrid_before(
    store: WeaviateStore, text: str, vec: Any, f: SearchFilters | None, k: int, level: Level
) -> list[Hit]:
    """``WeaviateStore.hybrid`` as it was: the query returns every property, then the live
    check (its retry past orphans left out: the bench has none)."""
    col, only = store._of_level(KB, level)
    objects = await raw_query(store, col, text, vec, f or SearchFilters(), only, k, True)
    return [_hit(o, o) for o in await store._live(KB, objects)]


def fused(plan: Route, hits: Sequence[Hit]) -> list[Hit]:
    """``hits`` of several levels split by level (each keeping its order) and fused."""
    runs = [(w, [h for h in hits if h.segment.level == lv][:FUSE_CANDIDATES]) for lv, w in plan]
    return fuse(runs, K)


def _each(plan: Route) -> int:
    return K if len(plan) == 1 else max(K, FUSE_CANDIDATES)


async def per_level_before(
    store: WeaviateStore, text: str, vec: Any, f: SearchFilters, plan: Route
) -> list[Hit]:
    """(a) before: one query per level at once, each returning its properties."""
    each = _each(plan)
    runs = await asyncio.gather(*(hybrid_before(store, text, vec, f, each, lv) for lv, _ in plan))
    return fuse([(w, run) for (_, w), run in zip(plan, runs, strict=True)], K)


async def per_level(
    store: WeaviateStore, text: str, vec: Any, f: SearchFilters, plan: Route
) -> list[Hit]:
    """(a') now, the product: ``WeaviateStore.hybrid_levels`` (the levels' queries at once
    asking ids and scores, then one read by id per collection and one live check) of
    only the best ``FUSE_READ`` x k by the weighted RRF, as ``SearchService`` asks it."""
    read = FUSE_READ * K if len(plan) > 1 else None
    runs = await store.hybrid_levels(KB, text, vec, f, _each(plan), 0.5, plan, read)
    return fuse([(w, run) for (_, w), run in zip(plan, runs, strict=True)], K)


async def all_read(
    store: WeaviateStore, text: str, vec: Any, f: SearchFilters, plan: Route
) -> list[Hit]:
    """(a'') the same, every level's candidates read."""
    runs = await store.hybrid_levels(KB, text, vec, f, _each(plan), 0.5, plan)
    return fuse([(w, run) for (_, w), run in zip(plan, runs, strict=True)], K)


async def one_request(
    store: WeaviateStore, text: str, vec: Any, f: SearchFilters, plan: Route
) -> list[Hit]:
    """(b) one query over every level in one collection, ids first, then one read."""
    col = store.client.collections.use(ALL_LEVELS).with_tenant(KB)
    only = Filter.by_property("level").contains_any([lv for lv, _ in plan])
    limit = K if len(plan) == 1 else FUSE_CANDIDATES * len(plan)
    ranked = await raw_query(store, col, text, vec, f, only, limit, False)
    return fused(plan, await read_live(store, ranked, [col]))


async def units_windows(
    store: WeaviateStore, text: str, vec: Any, f: SearchFilters, plan: Route
) -> list[Hit]:
    """(c) one query for the route's levels in ``QuorumUnit`` beside one over windows."""
    units = [lv for lv, _ in plan if lv != "window"]
    if not units:
        return await per_level(store, text, vec, f, plan)
    each = max(K, FUSE_CANDIDATES)

    async def of_units() -> list[Hit]:
        only = Filter.by_property("level").contains_any(units)
        col = store.units(KB)
        ranked = await raw_query(store, col, text, vec, f, only, each * len(units), False)
        return await read_live(store, ranked, [col])

    asks = [of_units()]
    if len(units) < len(plan):
        asks.append(store.hybrid(KB, text, vec, f, each, 0.5, "window"))
    runs = await asyncio.gather(*asks)
    return fused(plan, [h for run in runs for h in run])


WAYS = {
    "per level, before": per_level_before,
    "ids first, all read": all_read,
    "ids first, best 3k read (now)": per_level,
    "one request (all levels)": one_request,
    "units + windows": units_windows,
}
BEFORE, NOW = ("floor", "before"), ("floor", "now")
Key = tuple[str, str]


async def measure(
    endpoint: Any, model: SentenceTransformerEmbedder, queries: Any, warmup: int, pid: int | None
) -> tuple[dict[Key, list[float]], dict[Key, list[float]], dict[Key, list[float]], float | None]:
    """Every query through every way and both floors, in a shuffled order: (total ms,
    Weaviate CPU ms, share of the top 8 of "per level, before" kept) by (route, way), and
    the cores other processes kept busy."""
    keys: list[Key] = [BEFORE, NOW, *((r, w) for r in ROUTES for w in WAYS)]
    times: dict[Key, list[float]] = {key: [] for key in keys}
    cpus: dict[Key, list[float]] = {key: [] for key in keys}
    kept: dict[Key, list[float]] = {key: [] for key in keys[2:]}
    rng = random.Random(0)
    contention = None
    async with WeaviateStore.connect(async_client(endpoint), endpoint.url) as store:
        await copy_all_levels(store)
        for n, (text, filters) in enumerate(queries):
            if n == warmup:
                contention = Contention(pid)
            t = time.perf_counter()
            vec = await model.embed_query(text)
            embed_ms = (time.perf_counter() - t) * 1000
            order = list(keys)
            rng.shuffle(order)
            got: dict[Key, list[Hit]] = {}
            for key in order:
                cpu, t = process_cpu(pid), time.perf_counter()
                if key == BEFORE:
                    await hybrid_before(store, text, vec, None, K, "window")
                elif key == NOW:
                    await store.hybrid(KB, text, vec, None, K, 0.5, "window")
                else:
                    got[key] = await WAYS[key[1]](store, text, vec, filters, ROUTES[key[0]])
                if n >= warmup:
                    times[key].append(embed_ms + (time.perf_counter() - t) * 1000)
                    cpus[key].append((process_cpu(pid) - cpu) * 1000)
            if n < warmup:
                continue
            for r, w in kept:
                base = {h.id for h in got[(r, "per level, before")]}
                same = {h.id for h in got[(r, w)]} & base
                kept[(r, w)].append(len(same) / len(base) if base else 1.0)
    return times, cpus, kept, contention.others() if contention else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000)
    parser.add_argument("--real", type=int, default=2000, help="as the data dir was built")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1, help="query pool (0 is bench/search.py's)")
    args = parser.parse_args()
    corpus = Corpus(0, 100, args.real)
    server, data_dir = open_server(args.size, corpus, weaviate_binary(), keep=True)
    model = SentenceTransformerEmbedder.from_path()
    queries = make_queries(args.seed, args.warmup + args.queries)
    endpoint = server.start()
    try:
        times, cpus, kept, others = asyncio.run(
            measure(endpoint, model, queries, args.warmup, server_pid(data_dir))
        )
    finally:
        server.stop()
    table = Table(
        title=f"{args.size:,} segments, {args.queries} queries: total ms (query embedded + "
        "Weaviate + fusion), p50 / p95, and its p95 over the floor's (one unfiltered window "
        "query as it was / as it is now); Weaviate's CPU ms per search (mean)"
    )
    heads = ("route", "way", "total", "/ floor before", "/ floor now", "Weaviate CPU", "top-8 kept")
    for col in heads:
        table.add_column(col, justify="right")
    before, now = percentile(times[BEFORE], 95), percentile(times[NOW], 95)
    for key, values in times.items():
        share = kept.get(key)
        p95 = percentile(values, 95)
        table.add_row(
            *key,
            _cell(values),
            f"{p95 / before:.2f}",
            f"{p95 / now:.2f}",
            f"{statistics.mean(cpus[key]):.1f}",
            f"{statistics.mean(share):.2f}" if share else "",
        )
    console.print(table)
    console.print(describe([others]))


def _cell(values: Sequence[float]) -> str:
    return f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f}"


if __name__ == "__main__":
    main()
