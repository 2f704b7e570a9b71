"""Search latency at 10k and 100k segments, split into embed / Weaviate / Quorum's own time.

Each size is a seeded synthetic archive (1000 sources x 100 segments for 100k; the 10k
archive is its first 100 sources) of meeting talk: 2-4 sentences from a few speakers
per segment, with dates and speakers set, so speaker and date filters have something to
narrow. Vectors come from the real model and are cached as ``.npy`` shards under
``bench/.cache/``; each size's Weaviate data dir is cached too
(``bench/.cache/weaviate-10k``, ``weaviate-100k``), so a rerun only searches.

After a warm-up, ~200 distinct queries per size (so the embedder's query cache never
answers) run one at a time through ``SearchService.search_timed``: half unfiltered, a
quarter with a speaker filter, a quarter with a date range.

Targets: Quorum's own overhead p50 < 5 ms; total p95 < 60 ms at 100k segments. The
cores other processes kept busy meanwhile are printed beside each size: on a shared
2-core box a burst of someone else's work shows up as a p95 spike in "embed".
Run: ``.venv/bin/python bench/search.py [--sizes 10000 100000] [--queries 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import shutil
import statistics
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.common import weaviate_binary
from bench.machine import Contention, describe, server_pid
from bench.synthetic import FIRST, GENERATOR_VERSION, Talk, meeting_date, meeting_title
from retrieval.embed import SentenceTransformerEmbedder
from retrieval.models import Document, SearchFilters, Segment, Source
from retrieval.search import SearchService, SearchTimings
from retrieval.store import Store
from retrieval.weaviate_server import EmbeddedServer, Endpoint, async_client

CACHE = Path(__file__).resolve().parent / ".cache"
KB = "bench"
SHARD_SOURCES = 100  # sources per cached vector shard
OWN_P50_MS = 5.0
TOTAL_P95_MS = 60.0
TARGET_SIZE = 100_000
console = Console()

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
)


def label(size: int) -> str:
    """``100000`` -> ``"100k"``."""
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def source_document(i: int, seed: int, per_source: int) -> Document:
    """Source ``i`` of the archive: a dated meeting with ``per_source`` segments."""
    talk = Talk(f"search-{seed}-{i}")
    title, day = meeting_title(talk), meeting_date(talk)
    sid = f"bench-{i:05d}"
    rng = talk.rng
    speakers = talk.cast[: rng.randint(2, 5)]
    segments: list[Segment] = []
    t = 0.0
    for pos in range(per_source):
        turns = [(rng.choice(speakers), talk.sentence()) for _ in range(rng.randint(2, 4))]
        named = list(dict.fromkeys(who for who, _ in turns))
        if len(named) > 1:  # as the chunker renders a window with several speakers
            text = "\n".join(f"{who}: {said}" for who, said in turns)
        else:
            text = " ".join(said for _, said in turns)
        length = sum(len(said.split()) for _, said in turns) / 2.5
        segments.append(Segment(sid, pos, text, start_s=t, end_s=t + length, speakers=tuple(named)))
        t += length
    digest = hashlib.sha256(f"{GENERATOR_VERSION}-{seed}-{i}-{per_source}".encode()).hexdigest()
    source = Source(
        id=sid,
        title=title,
        kind="video",
        url=f"https://video.example/{sid}",
        recorded_at=day,
        speakers=tuple(dict.fromkeys(s for seg in segments for s in seg.speakers)),
        path=f"synthetic/{sid}.vtt",
        content_hash=digest,
    )
    return Document(source, tuple(segments))


@dataclass(frozen=True)
class Corpus:
    """The archive's parameters, and where its vectors are cached."""

    seed: int
    per_source: int

    @property
    def folder(self) -> Path:
        """The vector cache for these parameters."""
        return CACHE / f"search-v{GENERATOR_VERSION}-s{self.seed}-p{self.per_source}"

    def documents(self, first: int, count: int) -> list[Document]:
        """Sources ``first .. first+count-1``."""
        return [source_document(i, self.seed, self.per_source) for i in range(first, first + count)]

    def vectors(
        self, shard: int, docs: Sequence[Document], model: SentenceTransformerEmbedder, bar: Any
    ) -> np.ndarray[Any, Any]:
        """The shard's vectors, encoded once and cached as ``.npy``."""
        path = self.folder / f"vectors-{shard:04d}.npy"
        texts = [s.text for d in docs for s in d.segments]
        if path.exists():
            cached: np.ndarray[Any, Any] = np.load(path)
            if cached.shape[0] == len(texts):
                bar(len(texts))
                return cached
        self.folder.mkdir(parents=True, exist_ok=True)
        parts: list[np.ndarray[Any, Any]] = []
        # A worker thread that ends with the build, so the queries later see the same
        # OpenMP thread setup as the bot (torch only ever called from worker threads).
        with ThreadPoolExecutor(max_workers=1) as pool:
            for i in range(0, len(texts), 1024):
                chunk = texts[i : i + 1024]
                parts.append(np.asarray(pool.submit(model.encode, chunk).result(), np.float32))
                bar(len(chunk))
        vectors = np.concatenate(parts)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vectors)
        tmp.replace(path)
        return vectors


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


async def fill_store(
    endpoint: Endpoint, docs: Sequence[Document], vectors: np.ndarray[Any, Any], progress: Progress
) -> None:
    """Upsert every source not already stored with the same content hash."""
    task = progress.add_task("upserting sources", total=len(docs))
    offsets = np.cumsum([0, *(len(d.segments) for d in docs)])
    gate = asyncio.Semaphore(4)
    async with Store.connect(async_client(endpoint, timeout_s=120), endpoint.url) as store:

        async def one(n: int, doc: Document) -> None:
            async with gate:
                if await store.source_hash(KB, doc.source.id) != doc.source.content_hash:
                    rows = vectors[offsets[n] : offsets[n + 1]].tolist()
                    await store.upsert(KB, doc, rows)
            progress.advance(task)

        # The first upsert creates the tenant; the rest may then run side by side.
        await one(0, docs[0])
        await asyncio.gather(*(one(n, d) for n, d in enumerate(docs) if n))
        count = await store.count(KB)
    if count != offsets[-1]:
        raise SystemExit(f"the store holds {count} segments, expected {offsets[-1]}")
    progress.remove_task(task)


async def stored_count(endpoint: Endpoint) -> int:
    """Segments in the bench knowledge base (0 when there is none)."""
    async with Store.connect(async_client(endpoint), endpoint.url) as store:
        return await store.count(KB)


async def measure(
    endpoint: Endpoint,
    model: SentenceTransformerEmbedder,
    queries: Sequence[tuple[str, SearchFilters]],
    warmup: int,
    k: int,
    progress: Progress,
) -> list[tuple[str, SearchTimings, int]]:
    """Run the queries one at a time: (filter kind, timings, hits) for each measured one."""
    out: list[tuple[str, SearchTimings, int]] = []
    task = progress.add_task("queries", total=len(queries))
    async with Store.connect(async_client(endpoint), endpoint.url) as store:
        service = SearchService(store, model)
        for n, (text, filters) in enumerate(queries):
            hits, timings = await service.search_timed(KB, text, filters, k)
            if n >= warmup:
                out.append((kind_of(filters), timings, len(hits)))
            progress.advance(task)
    progress.remove_task(task)
    return out


def ensure_corpus(
    size: int,
    corpus: Corpus,
    model: SentenceTransformerEmbedder,
    progress: Progress,
) -> tuple[list[Document], np.ndarray[Any, Any]]:
    """The documents and vectors of the first ``size`` segments (encoding what is missing)."""
    sources = size // corpus.per_source
    docs: list[Document] = []
    parts: list[np.ndarray[Any, Any]] = []
    task = progress.add_task(f"vectors for {label(size)}", total=sources * corpus.per_source)
    for shard in range((sources + SHARD_SOURCES - 1) // SHARD_SOURCES):
        first = shard * SHARD_SOURCES
        shard_docs = corpus.documents(first, min(SHARD_SOURCES, sources - first))
        full = corpus.documents(first, SHARD_SOURCES) if len(shard_docs) < SHARD_SOURCES else []
        vectors = corpus.vectors(
            shard, full or shard_docs, model, lambda n: progress.advance(task, n)
        )
        docs.extend(shard_docs)
        parts.append(vectors[: len(shard_docs) * corpus.per_source])
    progress.remove_task(task)
    return docs, np.concatenate(parts)


def open_server(size: int, corpus: Corpus, binary: Path) -> tuple[EmbeddedServer, Path]:
    """The size's cached Weaviate data dir, wiped first if it holds another corpus."""
    data_dir = CACHE / f"weaviate-{label(size)}"
    marker = data_dir / "bench-corpus.json"
    want = {"generator": GENERATOR_VERSION, "seed": corpus.seed, "per_source": corpus.per_source}
    if data_dir.exists():
        try:
            same = json.loads(marker.read_text()) == want
        except (OSError, ValueError):
            same = False
        if not same:
            shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(want))
    return EmbeddedServer(data_dir, binary), data_dir


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
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if any(size % args.per_source for size in args.sizes):
        parser.error(f"every size must be a multiple of --per-source ({args.per_source})")
    binary = weaviate_binary()
    corpus = Corpus(args.seed, args.per_source)
    model = SentenceTransformerEmbedder.from_path(batch_size=args.batch_size)
    results: dict[int, list[tuple[str, SearchTimings, int]]] = {}
    others: dict[int, float | None] = {}
    # One pool, so no query repeats across sizes either: the embedder's cache is shared.
    per_size = args.warmup + args.queries
    pool = make_queries(args.seed, per_size * len(args.sizes))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as progress:
        for n, size in enumerate(args.sizes):
            server, data_dir = open_server(size, corpus, binary)
            endpoint = server.start()
            try:
                if asyncio.run(stored_count(endpoint)) != size:
                    docs, vectors = ensure_corpus(size, corpus, model, progress)
                    asyncio.run(fill_store(endpoint, docs, vectors, progress))
                queries = pool[n * per_size : (n + 1) * per_size]
                contention = Contention(server_pid(data_dir))
                results[size] = asyncio.run(
                    measure(endpoint, model, queries, args.warmup, args.k, progress)
                )
                others[size] = contention.others()
            finally:
                server.stop()
            console.print(f"{label(size)}: searched {data_dir}")
    report(results, others)


def report(
    results: dict[int, list[tuple[str, SearchTimings, int]]], others: dict[int, float | None]
) -> None:
    """Print the latency tables and the verdict on the targets."""
    table = Table(title="Search latency, ms (p50 / p95)")
    for col in ("size", "queries", "embed", "weaviate", "own", "total", "other load, cores"):
        table.add_column(col, justify="right")
    for size, rows in results.items():
        cells = []
        for part in ("embed_ms", "weaviate_ms", "own_ms", "total_ms"):
            values = [getattr(t, part) for _, t, _ in rows]
            cells.append(f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f}")
        busy = others.get(size)
        table.add_row(label(size), str(len(rows)), *cells, "?" if busy is None else f"{busy:.1f}")
    console.print(table)

    by_filter = Table(title="By filter, ms (p50 / p95); hits per query")
    for col in ("size", "filter", "queries", "weaviate", "total", "mean hits"):
        by_filter.add_column(col, justify="right")
    for size, rows in results.items():
        for kind in ("none", "speaker", "date"):
            picked = [(t, h) for k, t, h in rows if k == kind]
            if not picked:
                continue
            wv = [t.weaviate_ms for t, _ in picked]
            total = [t.total_ms for t, _ in picked]
            by_filter.add_row(
                label(size),
                kind,
                str(len(picked)),
                f"{percentile(wv, 50):.1f} / {percentile(wv, 95):.1f}",
                f"{percentile(total, 50):.1f} / {percentile(total, 95):.1f}",
                f"{statistics.mean(h for _, h in picked):.1f}",
            )
    console.print(by_filter)

    for size, rows in results.items():
        own = percentile([t.own_ms for _, t, _ in rows], 50)
        ok = own < OWN_P50_MS
        console.print(
            f"{label(size)}: own overhead p50 {own:.2f} ms (target < {OWN_P50_MS:g}): "
            + ("[green]met[/green]" if ok else "[red]missed[/red]")
        )
    if TARGET_SIZE in results:
        p95 = percentile([t.total_ms for _, t, _ in results[TARGET_SIZE]], 95)
        ok = p95 < TOTAL_P95_MS
        console.print(
            f"{label(TARGET_SIZE)}: total p95 {p95:.1f} ms (target < {TOTAL_P95_MS:g}): "
            + ("[green]met[/green]" if ok else "[red]missed[/red]")
        )
    console.print(describe(list(others.values())))


if __name__ == "__main__":
    main()
