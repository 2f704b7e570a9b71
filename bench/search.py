"""Search latency at 10k, 100k and 1M segments, split into embed / Weaviate / Quorum's own
time, with the router and filters on.

Each size is a seeded synthetic archive of meetings, 100 segments each (10k is the first
100 sources, 100k the first 1000, 1M all 10,000), written with every level the ingest
builds (turns, windows, topics, summaries) through the product's batched write
(``WeaviateStore.upsert_many``); ``bench/search_corpus.py`` says how. The text is always real
synthetic talk, so BM25 and the speaker and date filters see real words; vectors come
from the real model for the first ``--real`` segments (cached as ``.npy`` shards under
``bench/.cache/``) and are *derived* from those past it (a real vector plus seeded noise,
renormalised: MiniLM's own distribution, not uniform random vectors), since MiniLM cannot
encode a million texts on this machine. Each size's Weaviate data dir is cached
(``bench/.cache/weaviate-10k``, ``-100k``, ``-1m``), so a rerun only searches.

After a warm-up, ~200 distinct queries per size (so the embedder's query cache never
answers) run one at a time through ``SearchService.search_timed``, which routes each one
(``retrieval.search.route``) as the product does: half unfiltered, a quarter with a speaker
filter, a quarter with a date range; some ask about a remark or for an overview, so every
route is measured.

Beside each routed search the same query runs twice more, untimed by the product: the
floor (the query embedded, then one unfiltered hybrid query over windows: what any search
costs at this size) and, for a route of several levels, its levels one after another
instead of at once. Each route and filter is printed against the floor as a ratio of p95s.

Targets: Quorum's own overhead p50 < 5 ms; total p95 < 60 ms at 100k segments and
<= 40 ms at 1M. The cores other processes kept busy meanwhile are printed beside each
size: on a shared 2-core box a burst of someone else's work shows up as a p95 spike.
Run: ``nice -n 10 .venv/bin/python bench/search.py [--sizes 100000 1000000] [--real 10000]``.
Filling 1M is slow the first time (about 120 segments/s with their topics on the shared
box, turns doubling the objects); a stopped fill resumes where it stopped, and
``--no-fill`` searches what is there. A data dir is reused only with the options it was
built with (its ``bench-corpus.json`` says which).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import statistics
import time
from collections.abc import Sequence
from datetime import date, timedelta
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from bench.common import weaviate_binary
from bench.machine import Contention, describe, process_cpu, server_pid
from bench.search_corpus import CACHE, KB, Corpus, fill, label
from bench.synthetic import FIRST, Talk
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.models import SearchFilters
from retrieval.search.route import OVERVIEW, REMARK, UNSURE, WINDOWS, Route, route
from retrieval.search.search import FUSE_CANDIDATES, SearchService, SearchTimings
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import EmbeddedServer, Endpoint, async_client

OWN_P50_MS = 5.0
TARGETS = {100_000: 60.0, 1_000_000: 40.0}  # total p95, ms
ROUTES: dict[Route, str] = {
    WINDOWS: "windows",
    REMARK: "remark",
    OVERVIEW: "overview",
    UNSURE: "unsure",
}
console = Console(width=None if Console().is_terminal else 120)
# filter, route, timings, hits, CPU ms of Weaviate and of this process (embedding included)
Measured = tuple[str, str, SearchTimings, int, tuple[float, float]]
KINDS = ("none", "speaker", "date")
FLOOR_TARGET = 1.3  # every route and filter's p95 within this many times the floor's

QUERY_TEMPLATES = (
    "{term} migration",
    "{term} {service}",
    "{service} outage",
    "{metric} {region}",
    "{customer} {service}",
    "{term} vs {term2}",
    "{service} latency",
    "{term} rollback plan",
    "what did we decide about {term}",
    "why did the {service} fail",
    "who owns the {service}",
    "when is the {service} migration",
    "how much does {term} cost",
    "what happened to {metric} after the deploy",
    "did {customer} complain about the {service}",
    "is {term} supported in {region}",
    "{term} incident postmortem",
    "{team} team on-call for the {service}",
    "{customer} renewal {term}",
    "tests flaky because of {term}",
    "{metric} dropped in {region}",
    "plan for {term} before {month}",
    "{service} p99 in milliseconds",
    "who is hiring for {team}",
    "what did {first} say about {term}",
    "who said the {service} needs {term}",
    "summarize the discussion about {term}",
    "what was the {service} review about",
    "main points on {term} for {customer}",
    "who talked about {metric} in {region}",
)


def make_queries(seed: int, count: int) -> list[tuple[str, SearchFilters]]:
    """``count`` distinct queries; every 4th has a speaker filter, every 4th+2 a date."""
    talk = Talk(f"queries-{seed}")
    rng = talk.rng
    seen: set[str] = set()
    queries: list[tuple[str, SearchFilters]] = []
    while len(queries) < count:
        text = talk.fill(rng.choice(QUERY_TEMPLATES))
        key = " ".join(text.lower().split())
        if key in seen:
            continue
        seen.add(key)
        n = len(queries)
        if n % 4 == 1:
            filters = SearchFilters(speaker=rng.choice(FIRST))
        elif n % 4 == 3:
            after = date(2023, 1, 2) + timedelta(days=rng.randrange(630))
            filters = SearchFilters(after=after, before=after + timedelta(days=90))
        else:
            filters = SearchFilters()
        queries.append((text, filters))
    return queries


def kind_of(filters: SearchFilters) -> str:
    """ "none", "speaker" or "date"."""
    return "speaker" if filters.speaker else "date" if filters.after else "none"


async def stored_count(endpoint: Endpoint) -> int:
    """Segments in the bench knowledge base (0 when there is none)."""
    async with WeaviateStore.connect(async_client(endpoint), endpoint.url) as store:
        return await store.count(KB)


async def measure(
    endpoint: Endpoint,
    model: SentenceTransformerEmbedder,
    queries: Sequence[tuple[str, SearchFilters]],
    warmup: int,
    k: int,
    progress: Progress,
    server: int | None,
) -> list[Measured]:
    """Run the queries one at a time, each routed by the service: (filter kind, route,
    timings, hits, CPU ms of Weaviate and this process) for each measured one."""
    out: list[Measured] = []
    task = progress.add_task("queries", total=len(queries), mem="")
    async with WeaviateStore.connect(async_client(endpoint), endpoint.url) as store:
        service = SearchService(store, model)
        for n, (text, filters) in enumerate(queries):
            theirs, ours = process_cpu(server), time.process_time()
            hits, timings = await service.search_timed(KB, text, filters, k)
            theirs, ours = process_cpu(server) - theirs, time.process_time() - ours
            cpu = (theirs * 1000, ours * 1000)
            floor = await floor_ms(store, model, text, k, timings.embed_ms)
            one_by_one = await sequential_ms(store, model, text, filters, k)
            if n >= warmup:
                out.append((kind_of(filters), ROUTES[route(text)], timings, len(hits), cpu))
                FLOORS.append(floor)
                SEQUENTIAL.append((ROUTES[route(text)], one_by_one, timings.store_ms))
            progress.advance(task)
    progress.remove_task(task)
    return out


FLOORS: list[float] = []  # per measured query: embed ms + one unfiltered window query's ms
# per measured query: route, its levels searched one after another (ms), and at once (ms)
SEQUENTIAL: list[tuple[str, float, float]] = []


async def floor_ms(
    store: WeaviateStore, model: SentenceTransformerEmbedder, text: str, k: int, embed_ms: float
) -> float:
    """The floor for ``text``: its embedding (as the routed search just measured it) plus
    one unfiltered hybrid query over windows."""
    vector = model.encode([text])[0]
    t = time.perf_counter()
    await store.hybrid(KB, text, vector, None, k, 0.5, "window")
    return embed_ms + (time.perf_counter() - t) * 1000


async def sequential_ms(
    store: WeaviateStore,
    model: SentenceTransformerEmbedder,
    text: str,
    filters: SearchFilters,
    k: int,
) -> float:
    """The route's levels searched one after another (what concurrency saves)."""
    vector = model.encode([text])[0]
    plan = route(text)
    each = k if len(plan) == 1 else max(k, FUSE_CANDIDATES)
    t = time.perf_counter()
    for level, _ in plan:
        await store.hybrid(KB, text, vector, filters, each, 0.5, level)
    return (time.perf_counter() - t) * 1000


def open_server(
    size: int, corpus: Corpus, binary: Path, keep: bool = False
) -> tuple[EmbeddedServer, Path]:
    """The size's cached Weaviate data dir, wiped first if it holds another corpus (an
    exit instead when ``keep``)."""
    data_dir = CACHE / f"weaviate-{label(size)}"
    marker = data_dir / "bench-corpus.json"
    want = corpus.marker(size)
    if data_dir.exists():
        try:
            same = json.loads(marker.read_text()) == want
        except (OSError, ValueError):
            same = False
        if not same and keep:
            raise SystemExit(f"{data_dir} was built with other options: {marker.read_text()}")
        if not same:
            console.print(f"{data_dir} holds another corpus: rebuilding it")
            shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(want))
    return EmbeddedServer(data_dir, binary), data_dir


async def build(
    endpoint: Endpoint,
    corpus: Corpus,
    size: int,
    model: SentenceTransformerEmbedder,
    progress: Progress,
) -> None:
    """Write what the size's data dir lacks (real vectors encoded first if not cached)."""
    task = progress.add_task("real vectors", total=None, mem="")
    base = corpus.base(size, model, lambda n: progress.advance(task, n))
    progress.remove_task(task)
    t0 = time.perf_counter()
    async with WeaviateStore.connect(async_client(endpoint, timeout_s=300), endpoint.url) as store:
        await fill(store, corpus, size, base, progress)
    console.print(f"{label(size)}: written in {(time.perf_counter() - t0) / 60:.1f} min")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (linear interpolation)."""
    return float(np.percentile(np.asarray(values), q))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=200, help="measured queries per size")
    parser.add_argument("--warmup", type=int, default=20, help="unmeasured queries first")
    parser.add_argument("--k", type=int, default=8, help="hits per search (8, as the bot)")
    parser.add_argument("--per-source", type=int, default=100, help="segments per source")
    parser.add_argument("--batch-size", type=int, default=64, help="encoder batch size")
    parser.add_argument(
        "--real",
        type=int,
        default=100_000,
        help="segments whose vectors the model encodes; later ones get derived vectors",
    )
    parser.add_argument(
        "--no-turns",
        action="store_true",
        help="write no turn units (they double the objects to index: for a quick 1M build)",
    )
    parser.add_argument(
        "--no-fill",
        action="store_true",
        help="search each data dir as it stands (a fill stopped part-way), writing nothing",
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if any(size % args.per_source for size in args.sizes):
        parser.error(f"every size must be a multiple of --per-source ({args.per_source})")
    binary = weaviate_binary()
    corpus = Corpus(args.seed, args.per_source, args.real, turns=not args.no_turns)
    model = SentenceTransformerEmbedder.from_path(batch_size=args.batch_size)
    results: dict[int, list[Measured]] = {}
    others: dict[int, float | None] = {}
    spent: dict[int, float] = {}  # CPU seconds per query, Weaviate's and ours
    # One pool, so no query repeats across sizes either: the embedder's cache is shared.
    per_size = args.warmup + args.queries
    pool = make_queries(args.seed, per_size * len(args.sizes))
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[mem]}"),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        for n, size in enumerate(args.sizes):
            server, data_dir = open_server(size, corpus, binary, keep=args.no_fill)
            endpoint = server.start()
            try:
                stored = asyncio.run(stored_count(endpoint))
                if stored != size and not args.no_fill:
                    asyncio.run(build(endpoint, corpus, size, model, progress))
                    stored = size
                queries = pool[n * per_size : (n + 1) * per_size]
                pid = server_pid(data_dir)
                contention = Contention(pid)
                cpu = time.process_time() + process_cpu(pid)
                results[stored] = asyncio.run(
                    measure(endpoint, model, queries, args.warmup, args.k, progress, pid)
                )
                others[stored] = contention.others()
                spent[stored] = (time.process_time() + process_cpu(pid) - cpu) / len(queries)
            finally:
                server.stop()
            console.print(f"{label(stored)}: searched {data_dir} ({stored:,} segments)")
    report(results, others, spent)


def _cell(values: Sequence[float]) -> str:
    return f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f}"


def report(
    results: dict[int, list[Measured]], others: dict[int, float | None], spent: dict[int, float]
) -> None:
    """Print the latency tables and the verdict on the targets. The CPU a query cost
    (Weaviate's and this process's, so query embedding included) is beside its latency:
    unlike the latency it hardly moves when other processes load the machine."""
    table = Table(title="Search latency, ms (p50 / p95); CPU ms per query; other load in cores")
    heads = ("size", "queries", "embed", "weaviate", "own", "total", "CPU/query", "other load")
    for col in heads:
        table.add_column(col, justify="right")
    for size, rows in results.items():
        cells = [
            _cell([getattr(t, part) for _, _, t, _, _ in rows])
            for part in ("embed_ms", "store_ms", "own_ms", "total_ms")
        ]
        busy = others.get(size)
        cpu = f"{spent[size] * 1000:.1f}" if size in spent else "?"
        table.add_row(
            label(size), str(len(rows)), *cells, cpu, "?" if busy is None else f"{busy:.1f}"
        )
    console.print(table)

    split = Table(
        title="By filter and by route, ms (p50 / p95); hits and CPU ms per query "
        "(Weaviate / this process, embedding included)"
    )
    for col in ("size", "filter / route", "queries", "weaviate", "total", "hits", "CPU"):
        split.add_column(col, justify="right")
    for size, rows in results.items():
        groups = [(kind, [r for r in rows if r[0] == kind]) for kind in KINDS]
        groups += [(name, [r for r in rows if r[1] == name]) for name in ROUTES.values()]
        for name, picked in groups:
            if not picked:
                continue
            split.add_row(
                label(size),
                name,
                str(len(picked)),
                _cell([t.store_ms for _, _, t, _, _ in picked]),
                _cell([t.total_ms for _, _, t, _, _ in picked]),
                f"{statistics.mean(h for _, _, _, h, _ in picked):.1f}",
                " / ".join(
                    f"{statistics.mean(c[i] for _, _, _, _, c in picked):.0f}" for i in (0, 1)
                ),
            )
    console.print(split)

    floor = Table(
        title="Against the floor (the query embedded + one unfiltered hybrid query over "
        "windows, run beside each one), ms; the ratio of p95s"
    )
    for col in ("size", "filter / route", "queries", "total", "floor", "p95 / floor"):
        floor.add_column(col, justify="right")
    start = 0  # FLOORS holds every size's measured queries, in the order they ran
    for size, rows in results.items():
        floors_of = FLOORS[start : start + len(rows)]
        start += len(rows)
        indexed = [(kind, [i for i, r in enumerate(rows) if r[0] == kind]) for kind in KINDS]
        indexed += [
            (name, [i for i, r in enumerate(rows) if r[1] == name]) for name in ROUTES.values()
        ]
        for name, idx in indexed:
            if not idx:
                continue
            totals = [rows[i][2].total_ms for i in idx]
            floors = [floors_of[i] for i in idx]
            ratio = percentile(totals, 95) / percentile(floors, 95)
            mark = "green" if ratio <= FLOOR_TARGET else "red"
            floor.add_row(
                label(size),
                name,
                str(len(idx)),
                _cell(totals),
                _cell(floors),
                f"[{mark}]{ratio:.2f}[/{mark}]",
            )
    console.print(floor)
    together = Table(
        title="A route's levels: Weaviate ms at once (asyncio.gather, the product) "
        "vs one after another, p50 / p95"
    )
    for col in ("route", "queries", "at once", "one after another"):
        together.add_column(col, justify="right")
    for name in ROUTES.values():
        pairs = [(seq, now) for r, seq, now in SEQUENTIAL if r == name]
        if pairs:
            together.add_row(
                name, str(len(pairs)), _cell([b for _, b in pairs]), _cell([a for a, _ in pairs])
            )
    console.print(together)

    for size, rows in results.items():
        own = percentile([t.own_ms for _, _, t, _, _ in rows], 50)
        ok = own < OWN_P50_MS
        console.print(
            f"{label(size)}: own overhead p50 {own:.2f} ms (target < {OWN_P50_MS:g}): "
            + ("[green]met[/green]" if ok else "[red]missed[/red]")
        )
    for size, target in TARGETS.items():
        if size in results:
            p95 = percentile([t.total_ms for _, _, t, _, _ in results[size]], 95)
            ok = p95 <= target
            console.print(
                f"{label(size)}: total p95 {p95:.1f} ms (target <= {target:g}): "
                + ("[green]met[/green]" if ok else "[red]missed[/red]")
            )
    console.print(describe(list(others.values())))


if __name__ == "__main__":
    main()
