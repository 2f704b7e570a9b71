"""Citation accuracy on QMSum (validation split, 35 meetings, 237 specific queries): does
each ``[n]`` of an answer open the recording inside the gold span it relies on?

    .venv/bin/python bench/citations.py [--path a|b|both] [--limit N] [--show 5] [--json out.json]

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
import math
import re
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress, TaskID
from rich.table import Table

from bench.common import percentile, temp_store
from bench.qmsum import WORDS_PER_SECOND, write_meetings
from bot.answer import AnswerConfig
from bot.engine import Engine
from bot.llm import ClaudeLLM
from bot.models import Answer, Question, ThreadKey
from bot.sessions import SessionStore
from retrieval.chunking import split_sentences
from retrieval.embed import SentenceTransformerEmbedder
from retrieval.indexer import FileResult, ingest
from retrieval.ingest.metadata import slug
from retrieval.links import format_timestamp
from retrieval.models import SearchFilters
from retrieval.search import SearchService
from tests.emulators.anthropic import AnthropicEmulator, Reply

REPO = Path(__file__).resolve().parent.parent
KB = "qmsum_cite"
MIN_WORDS = 8  # the emulated answer prefers a sentence at least this long
MISS_REPLY = "The sources do not say this directly [1]."
console = Console(width=None if sys.stdout.isatty() else 160)

_SECTION = re.compile(r"^\[(\d+)\] ?(.*)$")
_LINE = re.compile(r"^\((\d+(?::\d{2}){1,2})\) (.*)$")
_NOISE = re.compile(r"\{\w+\}|(?<!\w)[^\w\s]+(?!\w)")


@dataclass(frozen=True)
class Case:
    """One question with its meeting and gold windows (seconds)."""

    meeting: str
    query: str
    windows: tuple[tuple[float, float], ...]
    gold: tuple[str, ...]  # the gold utterances' texts, whitespace-normalised
    gold_starts: tuple[float, ...]  # and where each starts


@dataclass
class Result:
    """What one question's answer cited, and how it scores."""

    meeting: str
    query: str
    windows: list[tuple[float, float]]
    kind: str
    cited: list[float | None]
    quotes: list[str | None]
    align_ms: float | None
    miss: bool
    nothing: bool = False  # answered "nothing found"
    gold_in_hits: bool | None = None  # ... although the search hits overlap a gold window
    picked: str | None = None  # (b): the sentence the emulated Claude quoted
    picked_s: float | None = None  # and when it is said
    first_inside: bool = False
    all_inside: bool = False
    off_start: float | None = None
    outside_by: float | None = None


def _norm(text: str) -> str:
    return " ".join(text.split())


def load_cases(data: Path, out: Path) -> list[Case]:
    """Write the meetings as WebVTT (bench/qmsum.py's way) into ``out``; return the cases."""
    if not any(data.glob("*.json")):
        raise SystemExit(f"no QMSum meetings (*.json) in {data}: pass --data")
    meetings = {m.id: m for m in write_meetings(data, out)}
    cases: list[Case] = []
    for path in sorted(data.glob("*.json")):
        meeting = meetings[slug(path.stem)]
        texts = [
            _norm(str(u["content"])) for u in json.loads(path.read_text())["meeting_transcripts"]
        ]
        # write_meetings' layout: utterance i lasts max(1 s, words / 2.5) from starts[i]
        ends = [
            s + max(1.0, len(t.split()) / WORDS_PER_SECOND)
            for s, t in zip(meeting.starts, texts, strict=True)
        ]
        for query, gold in meeting.queries:
            idx = sorted(gold)
            runs: list[list[int]] = []
            for i in idx:
                if runs and i == runs[-1][-1] + 1:
                    runs[-1].append(i)
                else:
                    runs.append([i])
            windows = tuple((meeting.starts[r[0]], ends[r[-1]]) for r in runs)
            gold_texts = tuple(texts[i] for i in idx)
            starts = tuple(meeting.starts[i] for i in idx)
            cases.append(Case(meeting.id, query, windows, gold_texts, starts))
    return cases


def inside(second: float, windows: Any) -> bool:
    """True when a link second lies in a gold window (links carry whole seconds)."""
    return any(math.floor(a) <= second <= b for a, b in windows)


def outside_by(second: float, windows: Any) -> float:
    """0 inside a window, else the distance to the nearest one."""
    if inside(second, windows):
        return 0.0
    return min(min(abs(second - math.floor(a)), abs(second - b)) for a, b in windows)


def off_start(second: float, windows: Any) -> float:
    """|second - start| of the window nearest to ``second``."""
    nearest = min(windows, key=lambda w: (outside_by(second, [w]), abs(second - w[0])))
    return abs(second - nearest[0])


def _seconds(stamp: str) -> float:
    total = 0
    for part in stamp.split(":"):
        total = total * 60 + int(part)
    return float(total)


def source_lines(content: str) -> list[tuple[int, float, str]]:
    """The ``(m:ss) Speaker: text`` lines of a request's ``<sources>``: (n, second, text
    without the speaker), read the way Claude reads them."""
    block = re.search(r"<sources>\n(.*)\n</sources>", content, re.S)
    if block is None:
        return []
    out: list[tuple[int, float, str]] = []
    n: int | None = None
    speakers: list[str] = []
    for line in block.group(1).split("\n"):
        if head := _SECTION.match(line):
            n = int(head.group(1))
            names = head.group(2).split(" \u00b7 ", 1)[-1]
            speakers = sorted(names.split(", "), key=len, reverse=True)
        elif n is not None and (timed := _LINE.match(line)):
            text = timed.group(2)
            for name in speakers:
                if name and text.startswith(f"{name}: "):
                    text = text[len(name) + 2 :]
                    break
            out.append((n, _seconds(timed.group(1)), text))
    return out


def pick(case: Case, content: str) -> tuple[int, str, float] | None:
    """The numbered source and sentence an ideal answer quotes: a sentence of a line said
    inside a gold window that belongs to a gold utterance (a turn's line can run on past
    the window), at least ``MIN_WORDS`` words when there is one; and when it is said."""
    found: list[tuple[int, str, float]] = []
    for n, second, text in source_lines(content):
        if not inside(second, case.windows):
            continue
        for sentence in split_sentences(text):
            s = _norm(sentence)
            for utt, start in zip(case.gold, case.gold_starts, strict=True):
                at = utt.find(s)
                if at >= 0:
                    duration = max(1.0, len(utt.split()) / WORDS_PER_SECOND)
                    found.append((n, s, start + duration * at / max(1, len(utt))))
                    break
    if not found:
        return None
    # QMSum's {disfmarker}, {vocalsound} ... are not words
    long = [f for f in found if len(_NOISE.sub(" ", f[1]).split()) >= MIN_WORDS]
    return long[0] if long else max(found, key=lambda f: len(f[1]))


class Script:
    """The emulated Claude: answers the question being asked from its gold span."""

    def __init__(self) -> None:
        self.case: Case | None = None
        self.picked: tuple[int, str, float] | None = None
        self.mismatched = 0
        self.revisions = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        asks = [m for m in body["messages"] if "<sources>" in str(m["content"])]
        content = str(asks[-1]["content"]) if asks else ""
        if asks and asks[-1] is not body["messages"][-1]:
            # the engine asking once to revise claims their sources do not support: only
            # the generic reply of a retrieval miss should ever be sent back
            self.revisions += 1
            return Reply(text=MISS_REPLY)
        case = self.case
        asked = re.search(r"\nQuestion: (.*)\n", content)
        if case is None or asked is None or _norm(asked.group(1)) != _norm(case.query):
            self.mismatched += 1  # not the question we are asking: never expected
            return Reply(text=MISS_REPLY)
        self.picked = pick(case, content)
        if self.picked is None:
            return Reply(text=MISS_REPLY)
        n, sentence, _ = self.picked
        return Reply(text=f"{sentence.rstrip('.!?')} [{n}].")


def score(case: Case, answer: Answer, miss: bool) -> Result:
    """One answer's citations against the case's gold windows."""
    cited = [c.start_s for c in answer.citations]
    r = Result(
        meeting=case.meeting,
        query=case.query,
        windows=list(case.windows),
        kind=answer.kind,
        cited=cited,
        quotes=[c.quote for c in answer.citations],
        align_ms=answer.timings.get("align"),
        miss=miss,
        nothing=answer.kind == "nothing_found",
    )
    seconds = [s for s in cited if s is not None]
    if cited and cited[0] is not None:
        r.first_inside = inside(cited[0], case.windows)
        r.off_start = off_start(cited[0], case.windows)
        r.outside_by = outside_by(cited[0], case.windows)
    r.all_inside = bool(cited) and len(seconds) == len(cited)
    r.all_inside = r.all_inside and all(inside(s, case.windows) for s in seconds)
    return r


def overlaps(case: Case, segments: Any) -> bool:
    """True when one of ``segments`` overlaps a gold window in time."""
    for seg in segments:
        if seg.start_s is None or seg.end_s is None:
            continue
        if any(seg.start_s <= b and math.floor(a) <= seg.end_s for a, b in case.windows):
            return True
    return False


class IngestProgress:
    """Rich progress for ``retrieval.indexer.ingest``."""

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
            1 for r in scored if r.picked and r.quotes and _norm(r.quotes[0] or "") == r.picked
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


async def run(data: Path, paths: list[str], limit: int | None) -> dict[str, list[Result]]:
    """Ingest the meetings, then ask every case on each path."""
    embedder = SentenceTransformerEmbedder.from_path()
    results: dict[str, list[Result]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        cases = load_cases(data, Path(tmp) / "vtt")
        cases = cases[:limit] if limit is not None else cases
        async with (
            temp_store(Path(tmp) / "weaviate") as store,
            SessionStore.open(Path(tmp) / "sessions.sqlite3") as sessions,
        ):
            service = SearchService(store, embedder)
            with Progress(console=console) as progress:
                t0 = time.perf_counter()
                report = await ingest(
                    store, embedder, KB, [Path(tmp) / "vtt"], progress=IngestProgress(progress)
                )
                if report.failed:
                    raise SystemExit(f"ingest failed: {report.failed}")
                ids = {s.source.id for s in await service.archive(KB).sources()}
                absent = sorted({c.meeting for c in cases} - ids)
                if absent:  # a question scored against an id that never matches
                    raise SystemExit(f"meetings not in the store: {absent}")
                progress.console.print(
                    f"{report.segments:,} windows from {len(ids)} meetings in "
                    f"{time.perf_counter() - t0:.0f} s; every question's meeting is stored"
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
                        llm = ClaudeLLM(
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
    args = parser.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)
    t0 = time.perf_counter()
    paths = ["a", "b"] if args.path == "both" else [args.path]
    results = asyncio.run(run(args.data, paths, args.limit))
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
