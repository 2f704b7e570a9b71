"""Date filters and a source's span with and without Weaviate's range index, on the same
archive: what the range index on ``recorded_at``, ``start_s``, ``end_s``, ``position`` and
``generation`` buys (``retrieval/store/weaviate/schema.py``), and what adding it to an
archive an older Quorum made costs (``retrieval/store/weaviate/reindex.py``).

It copies one size's cached search corpus (``bench/search.py`` builds it: run that
first), drops the range indexes in the copy, and searches both at once, each on a server
of its own: the same queries interleaved in a shuffled order (a date-filtered hybrid
search over windows, the same query unfiltered as each side's floor, and one source's
span of two minutes read in order), so a burst of someone else's work lands on both sides
alike. Only Weaviate's time is measured (queries are embedded before). Then it stops the
indexed side and adds the indexes back to the copy as the first start after upgrading
would, and prints how long that took. The copy is deleted at the end.

Run: ``nice -n 10 .venv/bin/python bench/range_index.py [--size 100000] [--queries 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.common import percentile, temp_server
from bench.machine import describe, machine_busy, process_cpu, server_pid
from bench.search import make_queries
from bench.search_corpus import CACHE, KB, label
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.models import SearchFilters
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.reindex import add_range_indexes
from retrieval.store.weaviate.schema import RANGE_FILTERED, SEGMENTS, UNITS
from retrieval.store.weaviate.server import Endpoint, async_client

console = Console(width=None if Console().is_terminal else 120)
KINDS = ("date filter", "unfiltered (floor)", "span read")
SIDES = ("with", "without")


async def opened(endpoint: Endpoint) -> WeaviateStore:
    """A store on ``endpoint`` with its schema as it is (``connect`` would add indexes)."""
    store = WeaviateStore(async_client(endpoint, timeout_s=300), endpoint.url)
    await store.client.connect()
    return store


async def drop_range_indexes(store: WeaviateStore) -> None:
    for col in (SEGMENTS, UNITS):
        config = store.client.collections.use(col).config
        for prop in RANGE_FILTERED:
            await config.delete_property_index(prop, "rangeFilters")


async def measure(
    stores: dict[str, WeaviateStore],
    queries: list[tuple[str, list[float], SearchFilters]],
    sources: int,
) -> dict[tuple[str, str], list[float]]:
    """Milliseconds per (kind, side), every query asked of both sides in a shuffled order."""
    rng = random.Random(0)
    times: dict[tuple[str, str], list[float]] = {(k, s): [] for k in KINDS for s in SIDES}
    found: dict[tuple[str, str], list[str]] = {}
    same = 0
    for n, (text, vector, dated) in enumerate(queries):
        sid = f"bench-{rng.randrange(sources):05d}"
        start = rng.uniform(0, 1500)

        work = [(k, s) for k in KINDS for s in SIDES]
        rng.shuffle(work)
        for kind, side in work:
            store = stores[side]
            t0 = time.perf_counter()
            if kind == "date filter":
                hits = await store.hybrid(KB, text, vector, dated, 8, 0.5)
            elif kind == "span read":
                hits = await store.fetch_ordered(KB, sid, start_s=start, end_s=start + 120)
            else:
                hits = await store.hybrid(KB, text, vector, None, 8, 0.5)
            if n >= 10:  # the first ten warm both sides up
                times[(kind, side)].append((time.perf_counter() - t0) * 1000)
            found[(kind, side)] = [h.id for h in hits]
        same += all(found[(k, "with")] == found[(k, "without")] for k in KINDS)
    console.print(f"the same hits on both sides for {same} of {len(queries)} queries")
    return times


def table(times: dict[tuple[str, str], list[float]]) -> Table:
    out = Table(title="Weaviate ms (p50 / p95), the same queries on both sides")
    for col in ("query", "with range index", "without", "p95 without / with"):
        out.add_column(col, justify="right")
    for kind in KINDS:
        with_, without = times[(kind, "with")], times[(kind, "without")]
        out.add_row(
            kind,
            f"{percentile(with_, 50):.1f} / {percentile(with_, 95):.1f}",
            f"{percentile(without, 50):.1f} / {percentile(without, 95):.1f}",
            f"{percentile(without, 95) / max(percentile(with_, 95), 1e-9):.2f}",
        )
    for side in SIDES:
        floor = percentile(times[("unfiltered (floor)", side)], 95)
        dated = percentile(times[("date filter", side)], 95)
        out.add_row(f"date p95 / floor, {side}", "", "", f"{dated / floor:.2f}")
    return out


async def main(size: int, count: int) -> None:
    source_dir = CACHE / f"weaviate-{label(size)}"
    if not (source_dir / "weaviate").is_dir():
        raise SystemExit(f"No {source_dir}: run bench/search.py --sizes {size} first.")
    model = SentenceTransformerEmbedder.from_path()
    asked = [(t, f) for t, f in make_queries(1, count * 4) if f.after][:count]
    vectors = await model.embed_documents([t for t, _ in asked])
    queries = [(t, list(map(float, v)), f) for (t, f), v in zip(asked, vectors, strict=True)]
    copy = Path(tempfile.mkdtemp(prefix="quorum-range-", dir=CACHE))
    try:
        console.print(f"copying {source_dir} ...")
        shutil.copytree(source_dir / "weaviate", copy / "weaviate")
        async with (
            temp_server(source_dir) as with_end,
            temp_server(copy) as without_end,
            # The product's connect: the indexes are there (added, if the corpus predates them).
            WeaviateStore.connect(async_client(with_end), with_end.url) as with_store,
        ):
            without_store = await opened(without_end)
            await drop_range_indexes(without_store)
            pids = [server_pid(source_dir), server_pid(copy)]
            busy, ours = machine_busy(), time.process_time() + sum(map(process_cpu, pids))
            t0 = time.perf_counter()
            stores = {"with": with_store, "without": without_store}
            times = await measure(stores, queries, size // 100)
            wall = time.perf_counter() - t0
            after = machine_busy()
            used = time.process_time() + sum(map(process_cpu, pids)) - ours
            others = None if busy is None or after is None else (after - busy - used) / wall
            await without_store.client.close()
        console.print(table(times))
        console.print(describe([None if others is None else max(0.0, others)]))
        async with temp_server(copy) as end:  # alone: the migration as a start pays it
            store = await opened(end)
            t0 = time.perf_counter()
            done = await add_range_indexes(
                store.client, {SEGMENTS: list(RANGE_FILTERED), UNITS: list(RANGE_FILTERED)}
            )
            took = time.perf_counter() - t0
            await store.client.close()
        console.print(
            f"{label(size)}: adding the range indexes to the archive took {took:.1f} s"
            + ("" if done else " (not finished: see the log above)")
        )
    finally:
        shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000, help="a size bench/search.py built")
    parser.add_argument("--queries", type=int, default=200, help="date-filtered queries")
    args = parser.parse_args()
    asyncio.run(main(args.size, args.queries))
