"""The answer without a model against the answer a model writes: does the first quote (the
link a reader clicks) open inside the gold span, and does any quote?

    .venv/bin/python bench/extractive.py [--data ../shared/eval/qmsum-val]
        [--eval examples/eval.jsonl] [--set qmsum|examples|both] [--path a|b|both]
        [--limit N] [--show N] [--index DIR] [--json out.json]

Two sets, both through the user's path (the real readers, chunker, embedded Weaviate,
search service and ``bot.engine.Engine.ask``, MiniLM for meaning and alignment):

- QMSum val: the 35 meetings written as timed WebVTT (bench/qmsum.py's layout), each
  specific query asked with its meeting as the source filter, scored against its gold
  utterance spans in seconds (``bench.citation_gold``).
- examples/eval.jsonl: the sample archive (what ``quorum demo`` ingests), every question
  asked across the whole knowledge base, scored by ``bot.evaluate`` (a window in
  seconds, a page, a lesson or a heading of the gold source).

Two answerers on each:

- (a) no model: the extractive answer (``QUORUM_LLM=none``).
- (b) a model, emulated: the real Anthropic SDK against tests/emulators/anthropic.py,
  scripted to answer with one sentence of the gold that it finds in the numbered
  sources and to cite that source (a model that reads well: the ceiling the quotes are
  measured against). When no source holds the gold, it cites [1] generically.

Every question counts: "nothing found" and a retrieval miss score as misses on both
paths. Columns: first quote inside (the first citation the reader meets opens inside a
gold span), any quote inside (one of the answer's citations does), nothing found.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from adapters.console.app import demo_paths
from bench import citations
from bench.citation_gold import MISS_REPLY, inside, source_lines
from bench.citation_gold import Result as QResult
from bench.common import temp_store
from bot.answer.answer import AnswerConfig
from bot.engine import Engine
from bot.evaluate import Case, Gold, load_cases, run_eval
from bot.evaluate import Result as EvalResult
from bot.llm import claude_model
from bot.models import Answer, Question
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.write.chunking import split_sentences
from retrieval.write.indexer import ingest
from tests.emulators.anthropic import AnthropicEmulator, Reply

REPO = Path(__file__).resolve().parent.parent
EXAMPLES_KB = "bench_extractive"
console = Console(width=None if sys.stdout.isatty() else 140)
_HEAD = re.compile(r"^## (.*) \(([^()]*)\)$")
_SECTION = re.compile(r"^\[(\d+)\] ?(.*)$")


class Ticking(Progress):
    """Rich progress that, off a terminal (a log file, CI), also prints a line per tenth
    of each task, so a long run shows it is moving."""

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        if self.console.is_terminal:
            return
        task = self._tasks[task_id]
        total = int(task.total or 0)
        step = max(1, total // 10)
        done = int(task.completed)
        if done % step == 0 or done == total:
            print(f"{task.description}: {done}/{total}", file=sys.stderr, flush=True)


@dataclass
class Row:
    """One set's figures on one path."""

    label: str
    questions: int
    first: int
    any: int
    nothing: int

    def cells(self) -> list[str]:
        n = max(1, self.questions)
        return [
            self.label,
            str(self.questions),
            f"{self.first / n:.3f} ({self.first})",
            f"{self.any / n:.3f} ({self.any})",
            str(self.nothing),
        ]


def qmsum_rows(results: dict[str, list[QResult]]) -> list[Row]:
    """QMSum's rows: every question counts, "nothing found" and misses included."""
    rows = []
    for path, rs in results.items():
        first = sum(r.first_inside for r in rs)
        anywhere = sum(any(s is not None and inside(s, r.windows) for s in r.cited) for r in rs)
        rows.append(Row(f"QMSum val, {NAMES[path]}", len(rs), first, anywhere, _nothing(rs)))
    return rows


def _nothing(rs: Sequence[QResult]) -> int:
    return sum(r.nothing for r in rs)


NAMES = {"a": "(a) no model, extractive", "b": "(b) model, emulated"}


# --- examples/eval.jsonl ------------------------------------------------------------


def _is_title(gold: Gold, title: str) -> bool:
    return (gold.source or "").casefold().strip() == title.casefold().strip()


def _place(case: Case) -> Callable[[str, str], bool]:
    """Whether a numbered source (its title, its ``[n]`` header) is the gold's place, for
    gold that is not a window: a page, a lesson or a heading."""
    gold = case.gold

    def holds(title: str, head: str) -> bool:
        if not _is_title(gold, title):
            return False
        if gold.page is not None:
            return head.startswith(f"p. {gold.page}")
        if gold.lesson is not None:
            return head.startswith(f"Lesson {gold.lesson}")
        if gold.heading is not None:
            return gold.heading.casefold() in head.casefold()
        return False

    return holds


class EvalScript:
    """The emulated model on examples/eval.jsonl: quotes a sentence of the gold it finds in
    the request's numbered sources and cites it."""

    def __init__(self) -> None:
        self.case: Case | None = None

    def __call__(self, body: dict[str, Any]) -> Reply:
        asks = [m for m in body["messages"] if "<sources>" in str(m["content"])]
        if not asks or asks[-1] is not body["messages"][-1] or self.case is None:
            return Reply(text=MISS_REPLY)  # a revision request, or not an answer
        content = str(asks[-1]["content"])
        picked = self.pick(self.case, content)
        if picked is None:
            return Reply(text=MISS_REPLY)
        n, sentence = picked
        return Reply(text=f"{sentence.rstrip('.!?')} [{n}].")

    @staticmethod
    def pick(case: Case, content: str) -> tuple[int, str] | None:
        """The source number and sentence of the first line inside the gold."""
        block = re.search(r"<sources>\n(.*)\n</sources>", content, re.S)
        if block is None:
            return None
        gold = case.gold
        if gold.windows:
            titles = _titles_by_number(block.group(1))
            ends = _section_ends(block.group(1))
            # a line is stamped with its turn's whole second, floored (a turn that starts
            # up to a second before the window holds the gold's first words); a sentence
            # later in a long turn is said about its share of the turn's characters in
            early = [(max(0.0, lo - 1), hi) for lo, hi in gold.windows]
            lines = source_lines(content)
            for i, (n, second, text) in enumerate(lines):
                if not _is_title(gold, titles.get(n, "")) or not text:
                    continue
                following = lines[i + 1] if i + 1 < len(lines) else None
                end = following[1] if following and following[0] == n else ends.get(n, second)
                offset = 0
                for sentence in split_sentences(text):
                    pos = text.find(sentence, offset)
                    offset = max(offset, pos)
                    said = second + (end - second) * max(0, pos) / len(text)
                    if inside(said, early):
                        return n, sentence
            return None
        holds = _place(case)
        title, body = "", list[str]()
        at_n: int | None = None
        at = at_n
        for line in block.group(1).split("\n") + ["[0] end"]:
            if head := _HEAD.match(line):
                title = head.group(1)
            elif section := _SECTION.match(line):
                if at is not None and body:
                    return at, split_sentences(" ".join(body))[0]
                at = int(section.group(1)) if holds(title, section.group(2)) else None
                body = []
            elif at is not None and line.strip():
                body.append(line.strip())
        return None


def _section_ends(block: str) -> dict[int, float]:
    """Where each numbered source's time range ends (``[n] 8:46–8:58``), in seconds."""
    out: dict[int, float] = {}
    for line in block.split("\n"):
        found = re.match(r"^\[(\d+)\] [\d:]+\u2013([\d:]+)", line)
        if found:
            parts = [int(x) for x in found.group(2).split(":")]
            out[int(found.group(1))] = float(sum(p * 60**k for k, p in enumerate(reversed(parts))))
    return out


def _titles_by_number(block: str) -> dict[int, str]:
    title, out = "", {}
    for line in block.split("\n"):
        if head := _HEAD.match(line):
            title = head.group(1)
        elif section := _SECTION.match(line):
            out[int(section.group(1))] = title
    return out


def examples_row(label: str, results: Sequence[EvalResult]) -> Row:
    """examples/eval.jsonl's row over its answerable questions."""
    rows = [r for r in results if r.case.gold.answerable]
    return Row(
        label,
        len(rows),
        sum(r.first_inside for r in rows),
        sum(r.inside > 0 for r in rows),
        sum(r.nothing_found for r in rows),
    )


async def run_examples(
    eval_file: Path, paths: list[str], limit: int | None, progress: Progress, tmp: Path
) -> dict[str, list[EvalResult]]:
    """The sample archive ingested, every eval question asked on each path."""
    embedder = SentenceTransformerEmbedder.from_path()
    cases = load_cases(eval_file)[:limit]
    out: dict[str, list[EvalResult]] = {}
    async with (
        temp_store(tmp / "weaviate-examples") as store,
        SessionStore.open(tmp / "sessions-examples.sqlite3") as sessions,
    ):
        report = await ingest(store, embedder, EXAMPLES_KB, demo_paths())
        if report.failed:
            raise SystemExit(f"ingest failed: {report.failed}")
        service = SearchService(store, embedder)
        archive = service.archive(EXAMPLES_KB)
        for path in paths:
            task = progress.add_task(f"examples ({path})", total=len(cases))
            script = EvalScript()
            by_question = {c.question: c for c in cases}

            def done(_: EvalResult, task: Any = task) -> None:
                progress.advance(task)

            async with AnthropicEmulator(default=script) as emu:
                llm = (
                    claude_model(api_key=emu.api_key, base_url=emu.url, model="m", fast_model="f")
                    if path == "b"
                    else None
                )
                engine = Engine(
                    archives=service.archive,
                    sessions=sessions,
                    llm=llm,
                    config=AnswerConfig(),
                    embedder=embedder,
                )

                async def ask(
                    q: Question,
                    engine: Engine = engine,
                    script: EvalScript = script,
                    by_question: dict[str, Case] = by_question,
                ) -> Answer:
                    script.case = by_question[q.text]
                    return await engine.ask(q)

                try:
                    summary = await run_eval(cases, archive, ask, EXAMPLES_KB, on_result=done)
                finally:
                    if llm is not None:
                        await llm.aclose()
            out[path] = summary.results
    return out


def show_examples(label: str, results: Sequence[EvalResult], n: int) -> None:
    """The first ``n`` answerable questions by hand: gold, first citation, verdict."""
    console.rule(f"examples, {label}: first {n}")
    for r in [r for r in results if r.case.gold.answerable][:n]:
        g = r.case.gold
        where = g.windows or g.page or g.lesson or g.heading
        first = r.first
        cited = "-" if first is None else f"{first.label[:24]} @ {first.start_s}"
        verdict = "[green]inside[/]" if r.first_inside else "[red]outside[/]"
        console.print(
            f"[bold]{r.case.id}[/] ({r.kind}) gold {(g.source or '')[:24]} {where}: "
            f"first {cited} {verdict}"
        )


def table(rows: Sequence[Row], title: str) -> Table:
    """The result table."""
    t = Table(title=title)
    for col in (
        "set, answerer",
        "questions",
        "first quote inside",
        "any quote inside",
        "nothing found",
    ):
        t.add_column(col, justify="left" if col.startswith("set") else "right")
    for row in rows:
        t.add_row(*row.cells())
    return t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "eval" / "qmsum-val")
    parser.add_argument("--eval", type=Path, default=REPO / "examples" / "eval.jsonl")
    parser.add_argument("--set", choices=("qmsum", "examples", "both"), default="both")
    parser.add_argument("--path", choices=("a", "b", "both"), default="both")
    parser.add_argument("--limit", type=int, default=None, help="Only the first N questions.")
    parser.add_argument("--show", type=int, default=0, help="List the first N questions.")
    parser.add_argument("--json", type=Path, default=None, help="Write every result here.")
    parser.add_argument(
        "--index", type=Path, default=None, help="Keep QMSum's ingest here for the next run."
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)
    t0 = time.perf_counter()
    paths = ["a", "b"] if args.path == "both" else [args.path]
    if args.set != "examples" and not any(args.data.glob("*.json")):
        raise SystemExit(f"no QMSum meetings (*.json) in {args.data}: pass --data")
    rows: list[Row] = []
    dump: dict[str, Any] = {}
    if args.set in ("examples", "both"):
        with tempfile.TemporaryDirectory() as tmp, Ticking(console=console) as progress:
            found = asyncio.run(run_examples(args.eval, paths, args.limit, progress, Path(tmp)))
        for path, rs in found.items():
            rows.append(examples_row(f"examples/eval.jsonl, {NAMES[path]}", rs))
            if args.show:
                show_examples(NAMES[path], rs, args.show)
            dump[f"examples-{path}"] = [r.json() for r in rs]
    if args.set in ("qmsum", "both"):
        with Ticking(console=console) as bar:
            results = asyncio.run(citations.run(args.data, paths, args.limit, args.index, bar))
        for path, answers in results.items():
            if args.show:
                citations.show(NAMES[path], answers, args.show)
            dump[f"qmsum-{path}"] = [vars(r) for r in answers]
        rows = qmsum_rows(results) + rows
    console.print(table(rows, "First quote and any quote inside the gold span"))
    if args.json is not None:
        args.json.write_text(json.dumps(dump, indent=1, default=str))
        console.print(f"wrote {args.json}")
    console.print(f"[dim]{time.perf_counter() - t0:.0f} s[/]")


if __name__ == "__main__":
    main()
