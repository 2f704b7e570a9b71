"""Ingest throughput: end-to-end ``ingest()`` against bare ``model.encode`` of the same text.

A seeded synthetic corpus of meeting transcripts (half WebVTT, half ``[hh:mm:ss] Speaker:
text``; 40 files of 15 minutes by default) is generated once into ``bench/.cache/``.
A fresh embedded Weaviate server in a temp dir receives the whole corpus through
``retrieval.indexer.ingest``; in the same run the embedder encodes exactly the segment
texts ingest produced, in one call with the same batch size (before and after the
ingest, to average out load drift). The ratio of the two rates says how much the
pipeline costs on top of the encoder.

Target: ingest seg/s >= 0.85 x bare encode seg/s.

The split of ingest time is busy time per stage (reading and chunking in a worker
thread, embedding, Weaviate writes); the stages overlap, so they can add up to more
than the wall time. CPU seconds (ours and the server's) and the cores other processes
kept busy are printed too: on a shared machine a single run's wall-clock ratio moves by
+-0.1, so the verdict uses the median of ``--repeat`` runs.

``--backend torch`` runs the same with sentence-transformers on torch instead of ONNX
Runtime (the default), to compare the two encoders.

Run: ``.venv/bin/python bench/ingest.py [--files N] [--batch-size B] [--repeat R]
[--backend onnx|torch]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from unittest import mock

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

import retrieval.indexer as indexer
from bench.common import weaviate_binary
from bench.machine import Contention, describe, process_cpu, server_pid
from bench.synthetic import (
    GENERATOR_VERSION,
    Talk,
    meeting,
    meeting_date,
    meeting_title,
    to_transcript,
    to_vtt,
)
from retrieval.embed import SentenceTransformerEmbedder
from retrieval.indexer import FileResult, IngestReport, ingest
from retrieval.ingest import discover, read_source
from retrieval.ingest.metadata import slug
from retrieval.models import Document
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import EmbeddedServer, Endpoint, async_client

T = TypeVar("T")
CACHE = Path(__file__).resolve().parent / ".cache"
TARGET_RATIO = 0.85
console = Console()


def corpus_dir(files: int, minutes: float, seed: int) -> Path:
    """Where the corpus for these parameters is cached."""
    return CACHE / f"ingest-v{GENERATOR_VERSION}-f{files}-m{minutes:g}-s{seed}"


def build_corpus(files: int, minutes: float, seed: int, progress: Progress) -> Path:
    """Write the corpus unless it is cached; returns its folder."""
    folder = corpus_dir(files, minutes, seed)
    if (folder / ".complete").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    task = progress.add_task("writing corpus", total=files)
    for i in range(files):
        talk = Talk(f"ingest-{seed}-{i}")
        title, day = meeting_title(talk), meeting_date(talk)
        lines = meeting(talk, minutes)
        if i % 2:
            path, text = tmp / f"{day}-{slug(title)}-{i:03d}.txt", to_transcript(lines)
        else:
            path, text = tmp / f"{day}-{slug(title)}-{i:03d}.vtt", to_vtt(lines)
        path.write_text(text, encoding="utf-8")
        progress.advance(task)
    (tmp / ".complete").touch()
    tmp.rename(folder)
    return folder


@dataclass
class StageTimes:
    """Busy seconds per ingest stage, and the documents ingest read."""

    read_s: float = 0.0
    embed_s: float = 0.0
    write_s: float = 0.0
    docs: list[Document] = field(default_factory=list)


class TimedEmbedder:
    """Wraps an embedder to add up the time ingest spends waiting for vectors."""

    def __init__(self, inner: SentenceTransformerEmbedder, times: StageTimes) -> None:
        self.inner = inner
        self.times = times

    @property
    def dim(self) -> int:
        """Vector length."""
        return self.inner.dim

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Timed pass-through."""
        t0 = time.perf_counter()
        try:
            return await self.inner.embed_documents(texts)
        finally:
            self.times.embed_s += time.perf_counter() - t0

    async def embed_query(self, text: str) -> list[float]:
        """Pass-through."""
        return await self.inner.embed_query(text)


class TimedStore(WeaviateStore):
    """A store that adds up the time spent in ``upsert_many`` (the Weaviate writes)."""

    times: StageTimes

    async def upsert_many(self, *args: Any, **kwargs: Any) -> Any:
        """Timed pass-through."""
        t0 = time.perf_counter()
        try:
            return await super().upsert_many(*args, **kwargs)
        finally:
            self.times.write_s += time.perf_counter() - t0


def timed_reader(times: StageTimes) -> Callable[..., Document]:
    """``read_source`` that records its time and the documents it returns."""

    def read(path: Path, **kwargs: Any) -> Document:
        t0 = time.perf_counter()
        try:
            doc = read_source(path, **kwargs)
        finally:
            times.read_s += time.perf_counter() - t0
        times.docs.append(doc)
        return doc

    return read


class RichIngestProgress:
    """Shows ingest's per-file progress on a rich bar."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self.progress = progress
        self.task = task

    def started(self, files: int) -> None:
        """Set the bar's length."""
        self.progress.update(self.task, total=files)

    def file_done(self, result: FileResult) -> None:
        """Advance the bar."""
        self.progress.advance(self.task)


def encode_in_thread(embedder: SentenceTransformerEmbedder, calls: list[list[str]]) -> None:
    """Encode each list in one ``embed_documents`` call (a worker thread), as ingest does.

    Not on the main thread: there, libgomp's idle OpenMP workers spin at full speed
    between kernels, which on a busy 2-core box cost ~15-50% more CPU than the same
    encode from a worker thread (OMP_WAIT_POLICY=PASSIVE removes the difference), so a
    main-thread reference would flatter the ratio.
    """

    async def go() -> None:
        for texts in calls:
            await embedder.embed_documents(texts)

    asyncio.run(go())


@dataclass(frozen=True)
class Cost:
    """Wall and CPU seconds of one measured step (CPU: this process and the server), and
    how many cores other processes kept busy meanwhile."""

    wall_s: float
    cpu_s: float
    server_cpu_s: float
    others: float | None


def measure(step: Callable[[], T], server_pid: int | None) -> tuple[Cost, T]:
    """Run ``step`` and say what it cost."""
    w, c, s = time.perf_counter(), time.process_time(), process_cpu(server_pid)
    contention = Contention(server_pid)
    out = step()
    cost = Cost(
        time.perf_counter() - w,
        time.process_time() - c,
        process_cpu(server_pid) - s,
        contention.others(),
    )
    return cost, out


@dataclass(frozen=True)
class IngestRun:
    """One timed ingest: its wall time (ingest() alone), cost, stage split and report."""

    wall_s: float
    cost: Cost
    times: StageTimes
    report: IngestReport


async def run_ingest(
    endpoint: Endpoint, kb: str, embedder: TimedEmbedder, folder: Path, progress: Progress
) -> tuple[IngestReport, float]:
    """Ingest ``folder`` into a fresh kb; returns the report and wall seconds."""
    times = embedder.times
    task = progress.add_task(f"ingest into {kb}", total=None)
    # Instrumentation only: the indexer looks up read_source at call time.
    with mock.patch.object(indexer, "read_source", timed_reader(times)):
        async with TimedStore.connect(async_client(endpoint), endpoint.url) as store:
            assert isinstance(store, TimedStore)
            store.times = times
            t0 = time.perf_counter()
            report = await ingest(
                store, embedder, kb, [folder], progress=RichIngestProgress(progress, task)
            )
            wall = time.perf_counter() - t0
    progress.remove_task(task)
    return report, wall


def run(args: argparse.Namespace, binary: Path) -> None:
    """Build the corpus, then alternate bare encodes and ingests; print the tables."""
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}"))
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as progress:
        folder = build_corpus(args.files, args.minutes, args.seed, progress)
        task = progress.add_task("loading model", total=None)
        model = SentenceTransformerEmbedder.from_path(
            batch_size=args.batch_size, backend=args.backend
        )
        assert model.backend == args.backend, "the ONNX export is missing: run `make install`"
        model.encode(["warm-up sentence"] * args.batch_size)
        progress.remove_task(task)
        docs = [read_source(p, root=folder) for p in discover([folder])]
        texts = [s.text for d in docs for s in d.segments]
        encode_in_thread(model, [texts[: args.batch_size]])  # warm the worker-thread path

        def bare(label: str, pid: int | None) -> Cost:
            task = progress.add_task(f"{label} ({len(texts)} segments)", total=None)
            cost, _ = measure(lambda: encode_in_thread(model, [texts]), pid)
            progress.remove_task(task)
            return cost

        bares: list[Cost] = []
        runs: list[IngestRun] = []
        with tempfile.TemporaryDirectory(prefix="quorum-bench-") as tmp:
            server = EmbeddedServer(Path(tmp), binary)
            endpoint = server.start()
            try:
                pid = server_pid(Path(tmp))
                bares.append(bare("bare encode", pid))
                for r in range(args.repeat):
                    times = StageTimes()
                    embedder = TimedEmbedder(model, times)
                    ingest_once = run_ingest(endpoint, f"bench{r}", embedder, folder, progress)
                    cost, (report, wall) = measure(partial(asyncio.run, ingest_once), pid)
                    runs.append(IngestRun(wall, cost, times, report))
                    bares.append(bare("bare encode again", pid))
            finally:
                server.stop()
        task = progress.add_task("bare encode, one call per file", total=None)
        per_doc = [[s.text for s in d.segments] for d in docs]
        per_file, _ = measure(lambda: encode_in_thread(model, per_doc), None)
        progress.remove_task(task)

    for result in runs[0].report.failed:
        console.print(f"[red]failed[/red] {result.path}: {result.reason}")
    for one in runs:
        ordered = sorted(one.times.docs, key=lambda d: d.source.path)
        got = [s.text for d in ordered for s in d.segments]
        if got != texts:
            raise SystemExit("ingest produced different segments than read_source did")
    report_tables(args, docs, texts, bares, runs, per_file)


def report_tables(
    args: argparse.Namespace,
    docs: Sequence[Document],
    texts: Sequence[str],
    bares: Sequence[Cost],
    runs: Sequence[IngestRun],
    per_file: Cost,
) -> None:
    """Print the throughput table, the split of ingest time and the CPU accounting."""
    n = len(texts)
    table = Table(title=f"Ingest throughput ({args.backend} encoder, batch size {args.batch_size})")
    columns = ("run", "files", "segments", "ingest s", "ingest seg/s", "bare seg/s", "ratio")
    for col in (*columns, "other load, cores"):
        table.add_column(col, justify="right")
    ratios: list[float] = []
    for r, one in enumerate(runs):
        # Each ingest is compared with the mean of the bare encodes either side of it.
        bare_s = (bares[r].wall_s + bares[r + 1].wall_s) / 2
        ratio = bare_s / one.wall_s
        ratios.append(ratio)
        style = "green" if ratio >= TARGET_RATIO else "red"
        table.add_row(
            str(r + 1),
            str(len(docs)),
            str(n),
            f"{one.wall_s:.1f}",
            f"{n / one.wall_s:.1f}",
            f"{n / bare_s:.1f}",
            f"[{style}]{ratio:.2f}[/{style}]",
            _cores(one.cost.others, bares[r].others, bares[r + 1].others),
        )
    console.print(table)

    split = Table(title="Where ingest time went (busy seconds, mean of runs; stages overlap)")
    for col in ("stage", "seconds", "% of ingest wall"):
        split.add_column(col, justify="right")
    wall = statistics.mean(one.wall_s for one in runs)
    for stage, secs in (
        ("read + chunk (worker thread)", statistics.mean(one.times.read_s for one in runs)),
        ("embed (awaited)", statistics.mean(one.times.embed_s for one in runs)),
        (
            "Weaviate write (WeaviateStore.upsert_many)",
            statistics.mean(one.times.write_s for one in runs),
        ),
    ):
        split.add_row(stage, f"{secs:.1f}", f"{100 * secs / wall:.0f}%")
    console.print(split)

    per_k = 1000 / n
    cpu = Table(title="CPU seconds per 1000 segments (steadier than wall time under load)")
    for col in ("step", "Python process", "Weaviate server", "total"):
        cpu.add_column(col, justify="right")
    bare_cpu = statistics.mean(b.cpu_s for b in bares)
    bare_server = statistics.mean(b.server_cpu_s for b in bares)
    ingest_cpu = statistics.mean(one.cost.cpu_s for one in runs)
    ingest_server = statistics.mean(one.cost.server_cpu_s for one in runs)
    for step, py, wv in (
        ("bare encode, one call", bare_cpu, bare_server),
        ("bare encode, one call per file (as ingest)", per_file.cpu_s, 0.0),
        ("ingest", ingest_cpu, ingest_server),
    ):
        cpu.add_row(step, f"{py * per_k:.1f}", f"{wv * per_k:.1f}", f"{(py + wv) * per_k:.1f}")
    console.print(cpu)

    chars = sum(map(len, texts)) / max(1, n)
    console.print(
        f"{n / len(docs):.1f} segments/file, {chars:.0f} chars/segment. Bare encode seg/s "
        f"across the run: {', '.join(f'{n / b.wall_s:.1f}' for b in bares)}; one call per "
        f"file: {n / per_file.wall_s:.1f} (all in a worker thread, like ingest's). "
        "CPU-time ratio (bare / ingest total): "
        f"{(bare_cpu + bare_server) / (ingest_cpu + ingest_server):.2f}."
    )
    ratio = statistics.median(ratios)
    console.print(
        f"Target ratio >= {TARGET_RATIO}: "
        + ("[green]met[/green]" if ratio >= TARGET_RATIO else "[red]missed[/red]")
        + f" (median {ratio:.2f} over {len(runs)} run(s))"
    )
    console.print(describe([c.others for c in (*bares, *(one.cost for one in runs), per_file)]))


def _cores(ingest_others: float | None, *bare_others: float | None) -> str:
    """ "ingest / bare" cores other processes used, "?" where unknown."""
    bare = [x for x in bare_others if x is not None]
    left = "?" if ingest_others is None else f"{ingest_others:.1f}"
    return f"{left} / {sum(bare) / len(bare):.1f}" if bare else f"{left} / ?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=40, help="transcript files (default 40)")
    parser.add_argument("--minutes", type=float, default=15, help="minutes per file (15)")
    parser.add_argument("--batch-size", type=int, default=64, help="encoder batch size (64)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="ingest runs, each into a new kb (3; median)"
    )
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (0)")
    parser.add_argument(
        "--backend",
        choices=("onnx", "torch"),
        default="onnx",
        help="embedding runtime (onnx, the default; run again with torch to compare)",
    )
    args = parser.parse_args()
    binary = weaviate_binary()
    run(args, binary)


if __name__ == "__main__":
    main()
