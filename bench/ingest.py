"""Ingest throughput: end-to-end ``ingest()`` against bare ``model.encode`` of the same text.

Three seeded file mixes (``bench/ingest_corpus.py``), each generated once into
``bench/.cache/``: ``transcripts``, long meeting transcripts (half WebVTT, half
``[hh:mm:ss] Speaker: text``; 40 files of 15 minutes by default), ``markdown``, 5,000
small handbook pages, and ``pdf``, 40 multi-page PDFs. For each mix a fresh embedded
Weaviate server in a temp dir receives the whole corpus through
``retrieval.write.indexer.ingest``; in the same run the embedder encodes exactly the segment
texts ingest produced, in one call with the same batch size (before and after each
ingest, to average out load drift). The ratio of the two rates says how much the
pipeline costs on top of the encoder.

Target: ingest seg/s >= 0.85 x bare encode seg/s.

The split of ingest time is busy time per stage (discovery; reading and chunking in a
worker thread; the stored-source lookups; encoding the windows; building the other
levels, which encodes a few topic-title candidates of long sources; Weaviate writes),
with how many calls each took: the stages overlap, so they can add up to more than the
wall time, and the call counts show per-file costs (many small files). CPU seconds (ours
and the server's) and the cores other processes kept busy are printed too: on a shared
machine a single run's wall-clock ratio moves by +-0.1, so the verdict uses the median
of ``--repeat`` runs.

``--backend torch`` runs the same with sentence-transformers on torch instead of ONNX
Runtime (the default), to compare the two encoders.

Run: ``.venv/bin/python bench/ingest.py [--mix transcripts|markdown|pdf|all] [--files N]
[--md-files N] [--pdf-files N] [--batch-size B] [--repeat R] [--skip-per-file]
[--backend onnx|torch]``. The 5,000 Markdown files take about 25 minutes a run here
(``--repeat 1 --skip-per-file``); the other mixes a few minutes for three runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar
from unittest import mock

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

import retrieval.write.indexer as indexer
from bench.common import weaviate_binary
from bench.ingest_corpus import MIXES, build_corpus
from bench.ingest_stages import (
    RichIngestProgress,
    StageTimes,
    TimedEmbedder,
    TimedStore,
    timed_discover,
    timed_levels,
    timed_reader,
)
from bench.machine import Contention, describe, process_cpu, server_pid
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.ingest import discover, read_source
from retrieval.models import Document
from retrieval.store.weaviate.server import EmbeddedServer, Endpoint, async_client
from retrieval.write.indexer import IngestReport, ingest

T = TypeVar("T")
TARGET_RATIO = 0.85
console = Console()


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


@dataclass(frozen=True)
class MixResult:
    """One mix measured: its documents and texts, the bare encodes and the ingests."""

    mix: str
    docs: list[Document]
    texts: list[str]
    bares: list[Cost]
    runs: list[IngestRun]
    per_file: Cost | None
    titles: Cost | None  # a bare encode of the texts ingest's levels encoded (topic titles)

    def ratios(self) -> list[float]:
        """Each ingest against the mean of the bare encodes either side of it."""
        return [
            (self.bares[r].wall_s + self.bares[r + 1].wall_s) / 2 / one.wall_s
            for r, one in enumerate(self.runs)
        ]

    def cpu(self) -> tuple[float, float, float, float]:
        """Mean CPU seconds: bare (ours, server's), ingest (ours, server's)."""
        return (
            statistics.mean(b.cpu_s for b in self.bares),
            statistics.mean(b.server_cpu_s for b in self.bares),
            statistics.mean(one.cost.cpu_s for one in self.runs),
            statistics.mean(one.cost.server_cpu_s for one in self.runs),
        )

    def cpu_ratio(self) -> float:
        """Bare encode CPU over ingest's (this process and the server)."""
        bare, bare_server, ours, server = self.cpu()
        return (bare + bare_server) / (ours + server)

    def split_per_k(self) -> tuple[float, float, float, float]:
        """CPU seconds per 1,000 segments: the bare encode, ingest's topic-title encodes,
        the rest of ingest in this process, and Weaviate beyond the bare encode's."""
        bare, bare_server, ours, server = self.cpu()
        titles = self.titles.cpu_s if self.titles is not None else 0.0
        k = 1000 / len(self.texts)
        return bare * k, titles * k, (ours - bare - titles) * k, (server - bare_server) * k

    def others(self) -> list[float | None]:
        """Cores other processes kept busy, per measured step."""
        steps = [*self.bares, *(one.cost for one in self.runs)]
        extra = [c for c in (self.per_file, self.titles) if c is not None]
        return [c.others for c in (*steps, *extra)]


async def run_ingest(
    endpoint: Endpoint, kb: str, embedder: TimedEmbedder, folder: Path, progress: Progress
) -> tuple[IngestReport, float]:
    """Ingest ``folder`` into a fresh kb; returns the report and wall seconds."""
    times = embedder.times
    task = progress.add_task(f"ingest into {kb}", total=None)
    # Instrumentation only: the indexer looks these up at call time.
    with (
        mock.patch.object(indexer, "read_source", timed_reader(times)),
        mock.patch.object(indexer, "_discover", timed_discover(times)),
        mock.patch.object(indexer, "build", timed_levels(times)),
    ):
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


def measure_mix(
    mix: str,
    folder: Path,
    model: SentenceTransformerEmbedder,
    args: argparse.Namespace,
    binary: Path,
    progress: Progress,
) -> MixResult:
    """Alternate bare encodes and ingests of one mix's corpus."""
    task = progress.add_task(f"reading the {mix} corpus", total=None)
    docs = [read_source(p, root=folder) for p in discover([folder])]
    progress.remove_task(task)
    texts = [s.text for d in docs for s in d.segments]
    encode_in_thread(model, [texts[: args.batch_size]])  # warm the worker-thread path

    def bare(label: str, pid: int | None) -> Cost:
        task = progress.add_task(f"{mix}: {label} ({len(texts)} segments)", total=None)
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
    per_file = None
    if not args.skip_per_file:
        task = progress.add_task(f"{mix}: bare encode, one call per file", total=None)
        per_doc = [[s.text for s in d.segments] for d in docs]
        per_file, _ = measure(lambda: encode_in_thread(model, per_doc), None)
        progress.remove_task(task)
    titles = None
    if extra := runs[0].times.level_texts:
        task = progress.add_task(f"{mix}: bare encode of the {len(extra)} title texts", total=None)
        titles, _ = measure(lambda: encode_in_thread(model, [extra]), None)
        progress.remove_task(task)

    for result in runs[0].report.failed:
        console.print(f"[red]failed[/red] {result.path}: {result.reason}")
    for one in runs:
        ordered = sorted(one.times.docs, key=lambda d: d.source.path)
        got = [s.text for d in ordered for s in d.segments]
        if got != texts:
            raise SystemExit(f"{mix}: ingest produced different segments than read_source did")
    return MixResult(mix, docs, texts, bares, runs, per_file, titles)


def run(args: argparse.Namespace, binary: Path) -> None:
    """Build each mix's corpus, measure it, print its tables; a summary for several."""
    mixes = MIXES if args.mix == "all" else (args.mix,)
    files = {"transcripts": args.files, "markdown": args.md_files, "pdf": args.pdf_files}
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}"))
    results: list[MixResult] = []
    with Progress(*columns, TimeElapsedColumn(), console=console, transient=True) as progress:
        folders = {
            mix: build_corpus(mix, files[mix], args.minutes, args.seed, progress) for mix in mixes
        }
        task = progress.add_task("loading model", total=None)
        model = SentenceTransformerEmbedder.from_path(
            batch_size=args.batch_size, backend=args.backend
        )
        assert model.backend == args.backend, "the ONNX export is missing: run `make install`"
        model.encode(["warm-up sentence"] * args.batch_size)
        progress.remove_task(task)
        for mix in mixes:
            result = measure_mix(mix, folders[mix], model, args, binary, progress)
            progress.console.rule(f"[bold]{mix}")
            report_tables(args, result)
            results.append(result)
    if len(results) > 1:
        summary_table(args, results)


def report_tables(args: argparse.Namespace, res: MixResult) -> None:
    """Print one mix's throughput table, the split of ingest time and the CPU accounting."""
    docs, texts, bares, runs = res.docs, res.texts, res.bares, res.runs
    n = len(texts)
    table = Table(
        title=f"Ingest throughput, {res.mix} ({args.backend} encoder, batch size {args.batch_size})"
    )
    columns = ("run", "files", "segments", "ingest s", "ingest seg/s", "bare seg/s", "ratio")
    for col in (*columns, "other load, cores"):
        table.add_column(col, justify="right")
    for r, (one, ratio) in enumerate(zip(runs, res.ratios(), strict=True)):
        bare_s = (bares[r].wall_s + bares[r + 1].wall_s) / 2
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
    for col in ("stage", "seconds", "% of ingest wall", "calls", "items per call"):
        split.add_column(col, justify="right")
    wall = statistics.mean(one.wall_s for one in runs)

    def mean(get: Callable[[StageTimes], float]) -> float:
        return statistics.mean(get(one.times) for one in runs)

    split_rows: list[tuple[str, float, float | None, str]] = [
        ("discover files", mean(lambda t: t.discover_s), 1.0, f"{len(docs)} files"),
        ("read + chunk (worker thread)", mean(lambda t: t.read_s), None, ""),
        (
            "stored-source lookups",
            mean(lambda t: t.lookup_s),
            mean(lambda t: t.lookups),
            f"{len(docs) / mean(lambda t: t.lookups):.1f} files",
        ),
        (
            "embed windows (awaited)",
            mean(lambda t: t.embed_s),
            mean(lambda t: t.embeds),
            f"{mean(lambda t: t.embed_texts) / mean(lambda t: t.embeds):.0f} texts",
        ),
        (
            "other levels (incl. title encodes)",
            mean(lambda t: t.levels_s),
            mean(lambda t: t.level_embeds),
            f"{mean(lambda t: len(t.level_texts)) / max(1, mean(lambda t: t.level_embeds)):.0f}"
            " texts",
        ),
        (
            "Weaviate write (upsert_many)",
            mean(lambda t: t.write_s),
            mean(lambda t: t.writes),
            f"{len(docs) / mean(lambda t: t.writes):.1f} files",
        ),
    ]
    for stage, secs, calls, per_call in split_rows:
        split.add_row(
            stage,
            f"{secs:.2f}",
            f"{100 * secs / wall:.0f}%",
            "" if calls is None else f"{calls:.0f}",
            per_call,
        )
    console.print(split)

    per_k = 1000 / n
    cpu = Table(title="CPU seconds per 1000 segments (steadier than wall time under load)")
    for col in ("step", "Python process", "Weaviate server", "total"):
        cpu.add_column(col, justify="right")
    bare_cpu, bare_server, ingest_cpu, ingest_server = res.cpu()
    rows = [("bare encode, one call", bare_cpu, bare_server)]
    if res.per_file is not None:
        rows.append(("bare encode, one call per file", res.per_file.cpu_s, 0.0))
    if res.titles is not None:
        rows.append(("bare encode of the topic-title texts alone", res.titles.cpu_s, 0.0))
    rows.append(("ingest", ingest_cpu, ingest_server))
    for step, py, wv in rows:
        cpu.add_row(step, f"{py * per_k:.1f}", f"{wv * per_k:.1f}", f"{(py + wv) * per_k:.1f}")
    console.print(cpu)

    chars = sum(map(len, texts)) / max(1, n)
    per_file = (
        f"; one call per file: {n / res.per_file.wall_s:.1f}" if res.per_file is not None else ""
    )
    console.print(
        f"{n / len(docs):.1f} segments/file, {chars:.0f} chars/segment. "
        f"Bare encode seg/s across the run: {', '.join(f'{n / b.wall_s:.1f}' for b in bares)}"
        f"{per_file} (all in a worker thread, like ingest's). "
        f"CPU-time ratio (bare / ingest total): {res.cpu_ratio():.2f}."
    )
    enc, titles, rest, weaviate = res.split_per_k()
    console.print(
        f"Per 1,000 segments, CPU s: bare encode {enc:.1f}; ingest adds {titles:.1f} for the "
        f"topic-title encodes (a bare encode of those texts), {rest:.1f} for the rest of "
        f"this process (reading, chunking, levels, client) and {weaviate:.1f} in Weaviate."
    )
    ratio = statistics.median(res.ratios())
    console.print(
        f"Target ratio >= {TARGET_RATIO}: "
        + ("[green]met[/green]" if ratio >= TARGET_RATIO else "[red]missed[/red]")
        + f" (median {ratio:.2f} over {len(runs)} run(s))"
    )
    console.print(describe(res.others()))


def summary_table(args: argparse.Namespace, results: Sequence[MixResult]) -> None:
    """One line per mix: the verdict's numbers side by side."""
    table = Table(
        title=f"Ingest vs bare encode per mix ({args.backend}, median of runs)",
        caption="load: cores other processes kept busy, mean (max); then CPU s per 1,000 "
        "segments: the bare encode, and what ingest adds (title encodes, the rest of this "
        "process, Weaviate)",
    )
    columns = ("mix", "files", "segs", "ratio", "CPU ratio", "load")
    for col in (*columns, "encode", "titles", "rest", "Weaviate"):
        table.add_column(col, justify="right")
    for res in results:
        seen = [x for x in res.others() if x is not None]
        load = f"{statistics.mean(seen):.1f} ({max(seen):.1f})" if seen else "?"
        ratio = statistics.median(res.ratios())
        style = "green" if ratio >= TARGET_RATIO else "red"
        table.add_row(
            res.mix,
            str(len(res.docs)),
            str(len(res.texts)),
            f"[{style}]{ratio:.2f}[/{style}]",
            f"{res.cpu_ratio():.2f}",
            load,
            *(f"{x:.1f}" for x in res.split_per_k()),
        )
    console.print(table)


def _cores(ingest_others: float | None, *bare_others: float | None) -> str:
    """ "ingest / bare" cores other processes used, "?" where unknown."""
    bare = [x for x in bare_others if x is not None]
    left = "?" if ingest_others is None else f"{ingest_others:.1f}"
    return f"{left} / {sum(bare) / len(bare):.1f}" if bare else f"{left} / ?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mix",
        choices=(*MIXES, "all"),
        default="transcripts",
        help="which corpus (transcripts, the default; markdown; pdf; all, one after another)",
    )
    parser.add_argument("--files", type=int, default=40, help="transcript files (default 40)")
    parser.add_argument("--minutes", type=float, default=15, help="minutes per file (15)")
    parser.add_argument("--md-files", type=int, default=5000, help="Markdown files (5000)")
    parser.add_argument("--pdf-files", type=int, default=40, help="PDF files (40)")
    parser.add_argument("--batch-size", type=int, default=64, help="encoder batch size (64)")
    parser.add_argument(
        "--repeat", type=int, default=3, help="ingest runs, each into a new kb (3; median)"
    )
    parser.add_argument("--seed", type=int, default=0, help="corpus seed (0)")
    parser.add_argument(
        "--skip-per-file",
        action="store_true",
        help="skip the reference encode of one call per file (long for many small files)",
    )
    parser.add_argument(
        "--backend",
        choices=("onnx", "torch"),
        default="onnx",
        help="embedding runtime (onnx, the default; run again with torch to compare)",
    )
    args = parser.parse_args()
    for name in ("files", "md_files", "pdf_files", "repeat", "batch_size"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    binary = weaviate_binary()
    run(args, binary)


if __name__ == "__main__":
    main()
