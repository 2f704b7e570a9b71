"""Citation accuracy on QMSum (validation split, 35 meetings, 237 specific queries): does
each ``[n]`` of an answer open the recording inside the gold span it relies on?

    .venv/bin/python bench/citations.py [--path a|b|both] [--limit N] [--show 5] [--json out.json]
        [--index DIR]

``--index DIR`` keeps the ingested meetings there, so a second run (an answer change to
compare) only asks the questions.

The user's path throughout: the meetings are written as timed WebVTT exactly as
bench/qmsum.py writes them (150 words a minute), ingested by the real indexer into an
embedded Weaviate, and every question goes through ``bot.engine.Engine.ask`` with the
meeting as its source filter and MiniLM for alignment. Two answerers:

- (a) extractive: no Claude key, so the extractive answer quotes and cites passages.
- (b) Claude, emulated: the real SDK against tests/emulators/anthropic.py, scripted to
  answer with one verbatim sentence of the gold span and cite the numbered source that
  holds it (read from the request's ``<sources>``). When no source holds a line inside
  the gold window, retrieval missed it: the reply is generic, and the question is
  counted as a retrieval miss, not scored.

An answer of kind "nothing_found" (no hit, or the relevance check said no passage
answers) reaches no answerer: it is counted on its own, with whether the search hits for
the question did overlap a gold window, and is scored as a failure only on (a)'s
all-questions row.

A gold span (utterances a..b) is the window [start of a, end of b]; a question's spans
may be several. A citation is inside when its second (links carry whole seconds) lies
in [floor(start), end] of one of them; its distance is 0 inside, else the distance to
the nearest window; "off start" is |second - start of the nearest window|.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from bench.citation_gold import (
    KB,
    REPO,
    Case,
    Result,
    Script,
    inside,
    load_cases,
    norm,
    overlaps,
    score,
)
from bench.common import KeptIndex, percentile, temp_store
from bot.answer.answer import AnswerConfig
from bot.engine import Engine
from bot.llm import claude_model
from bot.models import Question, ThreadKey
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.links.links import format_timestamp
from retrieval.models import SearchFilters
from retrieval.search.search import SearchService
from retrieval.write.indexer import FileResult, ingest
from tests.emulators.anthropic import AnthropicEmulator

console = Console(width=None if sys.stdout.isatty() else 160)


class IngestProgress:
    """Rich progress for ``retrieval.write.indexer.ingest``."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task: TaskID | None = None

    def started(self, files: int) -> None:
        self.task = self.progress.add_task("ingesting", total=files)

    def file_done(self, result: FileResult) -> None:
        if self.task is not None:
            self.progress.advance(self.task)


@dataclass
class Summary:
    """One path's numbers."""

    path: str
    questions: int
    misses: int
    nothing: int
    nothing_gold_in_hits: int
    scored: int
    cited: int
    first_inside: int
    all_inside: int
    median_off_start_s: float | None
    median_outside_by_s: float | None
    p95_align_ms: float | None
    kinds: dict[str, int] = field(default_factory=dict)
    on_quoted_sentence: int | None = None  # (b): the link opens at the sentence quoted


def summarise(path: str, results: list[Result], exclude_misses: bool) -> Summary:
    """The table row for a path (retrieval misses and "nothing found" answers left out of
    the shares when ``exclude_misses``)."""
    scored = [r for r in results if not (exclude_misses and (r.miss or r.nothing))]
    firsts = [r for r in scored if r.off_start is not None]
    aligns = [r.align_ms for r in results if r.align_ms is not None]
    kinds: dict[str, int] = {}
    for r in results:
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
    on_quote = None
    if any(r.picked for r in results):
        on_quote = sum(
            1 for r in scored if r.picked and r.quotes and norm(r.quotes[0] or "") == r.picked
        )
    return Summary(
        path=path,
        questions=len(results),
        misses=sum(r.miss for r in results),
        nothing=sum(r.nothing for r in results),
        nothing_gold_in_hits=sum(bool(r.gold_in_hits) for r in results),
        scored=len(scored),
        cited=sum(1 for r in scored if r.cited),
        first_inside=sum(r.first_inside for r in scored),
        all_inside=sum(r.all_inside for r in scored),
        median_off_start_s=statistics.median(r.off_start or 0.0 for r in firsts)
        if firsts
        else None,
        median_outside_by_s=statistics.median(r.outside_by or 0.0 for r in firsts)
        if firsts
        else None,
        p95_align_ms=percentile(aligns, 95) if aligns else None,
        kinds=kinds,
        on_quoted_sentence=on_quote,
    )


async def ask_all(
    engine: Engine, cases: list[Case], label: str, progress: Progress, script: Script | None
) -> list[Result]:
    """Every case through ``engine.ask``, one fresh thread each."""
    task = progress.add_task(f"asking ({label})", total=len(cases))
    out: list[Result] = []
    for i, case in enumerate(cases):
        if script is not None:
            script.case, script.picked = case, None
        question = Question(
            text=case.query,
            thread=ThreadKey("bench", "local", label, str(i)),
            user="bench",
            kb=KB,
            filters=SearchFilters(source_ids=(case.meeting,)),
        )
        answer = await engine.ask(question)
        if answer.kind == "nothing_found":
            miss = False
        elif script is not None:
            miss = script.picked is None
        else:
            miss = not overlaps(case, [s.hit.segment for s in answer.sources])
        r = score(case, answer, miss)
        if r.nothing:  # did search find the gold that the answer says is not there?
            hits = await engine.archives(KB).search(
                case.query, question.filters, engine.config.search_k
            )
            r.gold_in_hits = overlaps(case, [h.segment for h in hits])
        if script is not None and script.picked is not None:
            r.picked, r.picked_s = script.picked[1], script.picked[2]
        out.append(r)
        progress.advance(task)
    return out


async def run(
    data: Path,
    paths: list[str],
    limit: int | None,
    index: Path | None = None,
    progress_bar: Progress | None = None,
) -> dict[str, list[Result]]:
    """Ingest the meetings (unless ``index`` already holds them), then ask every case on
    each path (shown on ``progress_bar`` when given, e.g. one that also prints lines)."""
    embedder = SentenceTransformerEmbedder.from_path()
    results: dict[str, list[Result]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = index or Path(tmp)
        kept = KeptIndex(root, "ingested")
        cases = load_cases(data, root / "vtt")
        cases = cases[:limit] if limit is not None else cases
        async with (
            temp_store(root / "weaviate") as store,
            SessionStore.open(Path(tmp) / "sessions.sqlite3") as sessions,
        ):
            service = SearchService(store, embedder)
            with progress_bar or Progress(console=console) as progress:
                t0 = time.perf_counter()
                if not kept.reused(progress.console.print):
                    report = await ingest(
                        store, embedder, KB, [root / "vtt"], progress=IngestProgress(progress)
                    )
                    if report.failed:
                        raise SystemExit(f"ingest failed: {report.failed}")
                    progress.console.print(
                        f"{report.segments:,} windows in {time.perf_counter() - t0:.0f} s"
                    )
                    kept.keep()
                ids = {s.source.id for s in await service.archive(KB).sources()}
                absent = sorted({c.meeting for c in cases} - ids)
                if absent:  # a question scored against an id that never matches
                    raise SystemExit(f"meetings not in the store: {absent}")
                progress.console.print(
                    f"{len(ids)} meetings stored; every question's meeting is among them"
                )
                if "a" in paths:
                    engine = Engine(
                        archives=service.archive,
                        sessions=sessions,
                        llm=None,
                        config=AnswerConfig(),
                        embedder=embedder,
                    )
                    results["a"] = await ask_all(engine, cases, "a", progress, None)
                if "b" in paths:
                    script = Script()
                    async with AnthropicEmulator(default=script) as emu:
                        llm = claude_model(
                            api_key=emu.api_key,
                            base_url=emu.url,
                            model="claude-answer",
                            fast_model="claude-fast",
                        )
                        engine = Engine(
                            archives=service.archive,
                            sessions=sessions,
                            llm=llm,
                            config=AnswerConfig(),
                            embedder=embedder,
                        )
                        try:
                            results["b"] = await ask_all(engine, cases, "b", progress, script)
                        finally:
                            await llm.aclose()
                    console.print(f"{script.revisions} revision requests (claims without support)")
                    if script.mismatched:
                        console.print(
                            f"[red]{script.mismatched} emulator requests were not the "
                            "question being asked[/]"
                        )
    return results


def _share(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.1%})" if n else "-"


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return fmt.format(value) if value is not None else "-"


def table(summaries: list[Summary], title: str) -> Table:
    """The result table, one row per path."""
    t = Table(title=title)
    cols = (
        "path",
        "questions",
        "retrieval misses",
        "nothing found (gold in hits)",
        "scored",
        ">=1 citation",
        "first citation inside",
        "all citations inside",
        "median |cited - gold start| s",
        "median outside-window s",
        "p95 align ms",
    )
    for col in cols:
        t.add_column(col, justify="left" if col == "path" else "right")
    for s in summaries:
        t.add_row(
            s.path,
            str(s.questions),
            str(s.misses),
            f"{s.nothing} ({s.nothing_gold_in_hits})",
            str(s.scored),
            _share(s.cited, s.scored),
            _share(s.first_inside, s.scored),
            _share(s.all_inside, s.scored),
            _num(s.median_off_start_s, "{:.1f}"),
            _num(s.median_outside_by_s, "{:.1f}"),
            _num(s.p95_align_ms, "{:.1f}"),
        )
    return t


def _windows(windows: list[tuple[float, float]]) -> str:
    return ", ".join(f"{format_timestamp(a)}-{format_timestamp(b)}" for a, b in windows)


def show(label: str, results: list[Result], n: int) -> None:
    """The first ``n`` questions by hand: gold windows, cited seconds and quotes."""
    console.rule(f"{label}: first {n} questions")
    for r in results[:n]:
        console.print(f"[bold]{r.meeting}[/] {r.query}")
        exact = " / ".join(f"{a:.1f}-{b:.1f} s" for a, b in r.windows)
        console.print(f"  gold: {_windows(r.windows)}  ({exact})")
        if r.picked is not None:
            console.print(f"  quoted by the emulator @ {r.picked_s:.1f} s: {r.picked!r}")
        if r.miss:
            console.print("  [yellow]retrieval miss[/]")
        if r.nothing:
            console.print(f"  [yellow]nothing found[/] (gold in search hits: {r.gold_in_hits})")
        for second, quote in zip(r.cited, r.quotes, strict=True):
            mark = (
                "[green]inside[/]"
                if second is not None and inside(second, r.windows)
                else "[red]outside[/]"
            )
            at = "-" if second is None else f"{format_timestamp(second)} ({second:.0f} s)"
            console.print(f"  cited {at} {mark}: {quote!r}")
        if not r.cited:
            console.print(f"  [red]no citation[/] (kind {r.kind})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "eval" / "qmsum-val")
    parser.add_argument("--path", choices=("a", "b", "both"), default="both")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N questions.")
    parser.add_argument("--show", type=int, default=0, help="List the first N questions.")
    parser.add_argument("--json", type=Path, default=None, help="Write the numbers here.")
    parser.add_argument(
        "--index",
        type=Path,
        default=None,
        help="Keep the ingested meetings in this folder and reuse them on the next run.",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)
    t0 = time.perf_counter()
    paths = ["a", "b"] if args.path == "both" else [args.path]
    results = asyncio.run(run(args.data, paths, args.limit, args.index))
    names = {"a": "(a) extractive", "b": "(b) Claude, emulated"}
    summaries: list[Summary] = []
    for p, rs in results.items():
        if args.show:
            show(names[p], rs, args.show)
        if p == "a":
            summaries.append(summarise(names[p], rs, exclude_misses=False))
            summaries.append(summarise(f"{names[p]}, answered from gold", rs, exclude_misses=True))
        else:
            summaries.append(summarise(names[p], rs, exclude_misses=True))
    n = max(len(rs) for rs in results.values())
    console.print(table(summaries, f"Citation accuracy, QMSum val: {n} questions, meeting given"))
    for s in summaries:
        extra = ""
        if s.on_quoted_sentence is not None:
            extra = f"; link at the quoted sentence {_share(s.on_quoted_sentence, s.scored)}"
        console.print(f"[dim]{s.path}: answer kinds {s.kinds}{extra}[/]")
    if args.json is not None:
        out = {
            "summaries": [asdict(s) for s in summaries],
            "questions": {p: [asdict(r) for r in rs] for p, rs in results.items()},
        }
        args.json.write_text(json.dumps(out, indent=1))
        console.print(f"wrote {args.json}")
    console.print(f"[dim]{time.perf_counter() - t0:.0f} s[/]")


if __name__ == "__main__":
    main()
