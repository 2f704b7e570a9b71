"""The ``quorum`` core commands (typer + rich): ingest, search, sources, remove, ask.

Platform commands (``serve``, ``chat``, ``demo``) are added by ``adapters.cli``, which is
the console-script entry point, so the arrows keep pointing ``adapters -> bot``.
Every command turns a QuorumError into one red sentence and a non-zero exit.
"""

from __future__ import annotations

import asyncio
import getpass
import json
import logging
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from adapters.chat.announce import Poster, announce, targets
from adapters.cli.ingest_progress import IngestProgress
from adapters.cli.terminal import answer_json, failure_line, plain, render_answer, summary_table
from bot.config import Settings, load_settings
from bot.evaluate import KS, Result, Summary, load_cases, run_eval
from bot.models import Answer, Event, Mode, ProgressEvent, Question, ThreadKey
from bot.summaries import claude_summarizer
from bot.understand import choice_note
from bot.wiring import open_core, open_retrieval
from retrieval.errors import InvalidInput, QuorumError
from retrieval.indexer import IngestReport, ingest
from retrieval.links import locator
from retrieval.models import KINDS, LEVELS, Hit, Kind, Level, SearchFilters
from retrieval.schema import check_kb
from retrieval.search import MAX_K

app = typer.Typer(
    name="quorum",
    help="Answers from your team's recordings and documents, with links to the second.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)
T = TypeVar("T")

KbOpt = Annotated[
    str | None, typer.Option("--kb", help="Knowledge base (default: QUORUM_DEFAULT_KB).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one clear sentence to stderr and return the exit to raise."""
    # The message may quote a file, an argument or a title: never read it as markup.
    err.print(Text.assemble(("Error:", "bold red"), " ", message), highlight=False)
    return typer.Exit(code)


def run(coro_fn: Callable[[Settings], Coroutine[Any, Any, T]]) -> T:
    """Load settings and run an async command, translating Quorum errors into exits."""
    try:
        settings = load_settings()
        return asyncio.run(coro_fn(settings))
    except QuorumError as exc:
        logging.getLogger("quorum").debug("command failed", exc_info=True)
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise fail("interrupted.", 130) from None


def parse_date(value: str | None, option: str) -> date | None:
    """``2024-01-31`` -> date; anything else is a clear InvalidInput."""
    if value is None or value == "":
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{option} {value!r} is not a date; use YYYY-MM-DD.") from None


def parse_kind(value: str | None) -> Kind | None:
    """Validate a ``--kind`` value."""
    if value is None:
        return None
    for kind in KINDS:
        if kind == value.lower():
            return kind
    raise InvalidInput(f"--kind {value!r} is not one of {', '.join(KINDS)}.")


def kb_name(settings: Settings, kb: str | None) -> str:
    """The knowledge base to use, validated."""
    return check_kb(kb or settings.default_kb)


def _report_table(report: IngestReport, elapsed: float) -> Table:
    table = Table(title="Ingest summary", show_edge=False)
    for col in ("added", "updated", "skipped", "failed", "segments written", "seconds"):
        table.add_column(col, justify="right")
    table.add_row(
        str(report.count("added")),
        str(report.count("updated")),
        str(report.count("skipped")),
        f"[red]{report.count('failed')}[/]" if report.failed else "0",
        f"{report.segments:,}",
        f"{elapsed:.1f}",
    )
    return table


async def _post_slack(settings: Settings, channel: str, text: str) -> None:
    from adapters.slack.post import post_to_slack  # the SDK loads only when posting

    await post_to_slack(settings, channel, text)


async def _post_discord(settings: Settings, channel: str, text: str) -> None:
    from adapters.discord.post import post_to_discord

    await post_to_discord(settings, channel, text)


POSTERS: dict[str, Poster] = {"slack": _post_slack, "discord": _post_discord}


@app.command("ingest")
def ingest_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to ingest.")],
    kb: KbOpt = None,
    force: Annotated[bool, typer.Option(help="Re-ingest files even when unchanged.")] = False,
) -> None:
    """Ingest recordings (audio and video are transcribed), transcripts, PDFs, Markdown and
    course files."""

    async def go(settings: Settings) -> IngestReport:
        name = kb_name(settings, kb)
        targets(settings.post_summaries)  # a malformed target fails before any work
        async with open_retrieval(settings, warm=True) as r, claude_summarizer(settings) as summ:
            t0 = time.perf_counter()
            with IngestProgress(err) as progress:
                report = await ingest(
                    r.store,
                    r.embedder,
                    name,
                    paths,
                    chunking=r.chunking,
                    progress=progress,
                    force=force,
                    transcriber=r.transcriber,
                    summarizer=summ,
                )
            r.search.forget_sources(name)
            elapsed = time.perf_counter() - t0
            posted = await announce(settings, r.search.archive(name), report.results, POSTERS)
        out.print(_report_table(report, elapsed))
        for f in report.failed:
            err.print(failure_line(f.path, f.reason), highlight=False)
        for line in posted:
            err.print(f"[yellow]{escape(line)}[/]", highlight=False)
        return report

    report = run(go)
    if report.failed:
        raise fail(f"{len(report.failed)} file(s) could not be ingested (listed above).")


def hit_json(hit: Hit) -> dict[str, Any]:
    """The JSON shape of a hit, as printed by ``quorum search --json``."""
    s = hit.source
    return {
        "id": hit.id,
        "text": hit.segment.text,
        "score": round(hit.score, 4),
        "speaker": hit.segment.speaker,
        "speakers": list(hit.segment.speakers),
        "start_s": hit.segment.start_s,
        "end_s": hit.segment.end_s,
        "page": hit.segment.page,
        "heading": hit.segment.heading,
        "lesson": hit.segment.lesson,
        "level": hit.segment.level,
        "link": hit.link,
        "source": {
            "id": s.id,
            "title": s.title,
            "url": s.url,
            "kind": s.kind,
            "recorded_at": s.recorded_at.isoformat() if s.recorded_at else None,
        },
    }


def build_filters(
    speaker: str | None,
    source: str | None,
    after: str | None,
    before: str | None,
    kind: str | None = None,
    lesson: int | None = None,
    source_ids: list[str] | None = None,
) -> SearchFilters:
    """SearchFilters from command-line options, validated."""
    return SearchFilters(
        speaker=speaker or None,
        source=source or None,
        source_ids=tuple(source_ids or ()),
        after=parse_date(after, "--after"),
        before=parse_date(before, "--before"),
        kind=parse_kind(kind),
        lesson=lesson,
    )


LevelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--level",
        help="Search only this resolution: turn, window, topic or summary (repeatable; "
        "default: chosen from the question).",
    ),
]


def parse_levels(values: list[str] | None) -> tuple[Level, ...]:
    """Levels from ``--level`` options, validated."""
    levels: list[Level] = []
    for value in values or ():
        if value not in LEVELS:
            raise InvalidInput(f"Unknown level {value!r}; use one of {', '.join(LEVELS)}.")
        levels.append(value)
    return tuple(levels)


SpeakerOpt = Annotated[str | None, typer.Option(help="Only passages by this speaker.")]
SourceOpt = Annotated[str | None, typer.Option(help="Only sources whose title matches.")]
AfterOpt = Annotated[str | None, typer.Option(help="Recorded on or after (YYYY-MM-DD).")]
BeforeOpt = Annotated[str | None, typer.Option(help="Recorded on or before (YYYY-MM-DD).")]


@app.command("search")
def search_cmd(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    kb: KbOpt = None,
    speaker: SpeakerOpt = None,
    source: SourceOpt = None,
    after: AfterOpt = None,
    before: BeforeOpt = None,
    kind: Annotated[str | None, typer.Option(help="video, audio, document or course.")] = None,
    lesson: Annotated[int | None, typer.Option(help="Only this course lesson.")] = None,
    k: Annotated[int, typer.Option("-k", help=f"How many results (1-{MAX_K}).")] = 8,
    level: LevelOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Hybrid search (keywords + meaning) over a knowledge base."""

    async def go(settings: Settings) -> list[Hit]:
        filters = build_filters(speaker, source, after, before, kind, lesson)
        filters = replace(filters, levels=parse_levels(level))
        if not query.strip():
            raise InvalidInput("The query is empty: say what to search for.")
        if not 1 <= k <= MAX_K:
            raise InvalidInput(f"-k must be between 1 and {MAX_K}, not {k}.")
        async with open_retrieval(settings, warm=True) as r:
            name = kb_name(settings, kb)
            if source:
                choice = await r.search.choose_sources(name, source)
                known = [i.source for i in await r.search.sources(name)]
                if note := choice_note(source, choice, known):
                    err.print(plain(note.replace("*", "")))
            return await r.search.search(name, query, filters, k)

    hits = run(go)
    if as_json:
        sys.stdout.write(json.dumps([hit_json(h) for h in hits], indent=2) + "\n")
        return
    if not hits:
        out.print("Nothing found. Try other words, or fewer filters.")
        return
    table = Table(show_lines=True)
    for col in ("score", "source", "where", "speaker", "excerpt", "link"):
        table.add_column(col, overflow="fold")
    for h in hits:
        excerpt = h.segment.text if len(h.segment.text) < 220 else h.segment.text[:217] + "..."
        table.add_row(
            f"{h.score:.3f}",
            plain(h.source.title),
            locator(h.segment) or "",
            plain(h.segment.speaker or ""),
            plain(excerpt),
            plain(h.link or "", h.link),
        )
    out.print(table)


@app.command("summary")
def summary_cmd(
    source: Annotated[str, typer.Argument(help="Source id or title.")],
    kb: KbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A source's summary: topics, decisions and action items, each at its moment."""

    async def go(settings: Settings) -> Hit:
        async with open_retrieval(settings) as r:
            return await r.search.archive(kb_name(settings, kb)).summary(source)

    hit = run(go)
    if as_json:
        sys.stdout.write(json.dumps(hit_json(hit), indent=2) + "\n")
        return
    out.print(summary_table(hit))


@app.command("sources")
def sources_cmd(kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """List the sources in a knowledge base."""

    async def go(settings: Settings) -> list[Any]:
        async with open_retrieval(settings) as r:
            return await r.store.list_sources(kb_name(settings, kb))

    infos = run(go)
    if as_json:
        rows = [
            {
                "id": i.source.id,
                "title": i.source.title,
                "kind": i.source.kind,
                "url": i.source.url,
                "recorded_at": i.source.recorded_at.isoformat() if i.source.recorded_at else None,
                "speakers": list(i.source.speakers),
                "segments": i.segments,
                "path": i.source.path,
            }
            for i in infos
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not infos:
        out.print("This knowledge base is empty. Add files with `quorum ingest PATH`.")
        return
    table = Table()
    for col in ("id", "title", "kind", "date", "speakers", "segments"):
        table.add_column(col)
    for i in infos:
        s = i.source
        table.add_row(
            plain(s.id),
            plain(s.title, s.url),
            s.kind,
            s.recorded_at.isoformat() if s.recorded_at else "",
            plain(", ".join(s.speakers[:4]) + (" ..." if len(s.speakers) > 4 else "")),
            str(i.segments),
        )
    out.print(table)


@app.command("remove")
def remove_cmd(
    source_id: Annotated[str, typer.Argument(help="The source id (see `quorum sources`).")],
    kb: KbOpt = None,
) -> None:
    """Remove a source and its passages from a knowledge base."""

    async def go(settings: Settings) -> int:
        async with open_retrieval(settings) as r:
            return await r.store.delete_source(kb_name(settings, kb), source_id)

    removed = run(go)
    if removed == 0:
        raise fail(f"No source {source_id!r} in that knowledge base (see `quorum sources`).")
    out.print(plain(f"Removed {source_id} ({removed} passages)."))


@app.command("ask")
def ask_cmd(
    question: Annotated[str, typer.Argument(help="Your question, in quotes.")],
    kb: KbOpt = None,
    speaker: SpeakerOpt = None,
    source: SourceOpt = None,
    after: AfterOpt = None,
    before: BeforeOpt = None,
    deep: Annotated[bool, typer.Option("--deep", help="Ask for deep research.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
) -> None:
    """Answer a question from the archive, citing the moments and pages it came from."""

    async def go(settings: Settings) -> Answer:
        filters = build_filters(speaker, source, after, before)
        question_ = Question(
            text=question,
            thread=ThreadKey("cli", "local", "ask", uuid.uuid4().hex),
            user=getpass.getuser(),
            kb=kb_name(settings, kb),
            mode="deep" if deep else "quick",
            filters=filters,
        )
        async with open_core(settings) as core:
            if as_json:
                return await core.engine.ask(question_)
            with err.status("Thinking...", spinner="dots") as status:

                async def on_event(event: Event) -> None:
                    if isinstance(event, ProgressEvent):
                        status.update(escape(event.text))

                return await core.engine.ask(question_, on_event)

    answer = run(go)
    if as_json:
        sys.stdout.write(json.dumps(answer_json(answer), indent=2, ensure_ascii=False) + "\n")
    else:
        render_answer(out, answer)
    if answer.kind == "error":
        raise typer.Exit(1)


@app.command("eval")
def eval_cmd(
    file: Annotated[Path, typer.Argument(help="Questions with gold answers, one JSON per line.")],
    kb: KbOpt = None,
    deep: Annotated[bool, typer.Option("--deep", help="Ask every question in deep mode.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the results as JSON.")] = False,
) -> None:
    """Ask an eval file's questions and report where search and citations land."""

    async def go(settings: Settings) -> Summary:
        cases = load_cases(file)
        name = kb_name(settings, kb)
        async with open_core(settings) as core:
            archive = core.retrieval.search.archive(name)
            progress = Progress(
                TextColumn("[bold]Asking"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[last]}"),
                TimeElapsedColumn(),
                console=err,
                disable=as_json and not err.is_terminal,
            )
            with progress:
                task = progress.add_task("eval", total=len(cases), last="")

                def done(result: Result) -> None:
                    mark = "ok" if result.correct else "miss"
                    progress.update(task, advance=1, last=escape(f"{result.case.id}: {mark}"))

                mode: Mode = "deep" if deep else "quick"
                return await run_eval(cases, archive, core.engine.ask, name, mode, done)

    summary = run(go)
    if as_json:
        sys.stdout.write(json.dumps(summary.json(), indent=2, ensure_ascii=False) + "\n")
    else:
        out.print(_eval_table(summary))
        out.print(_eval_summary(summary))


def _eval_table(summary: Summary) -> Table:
    table = Table(title="Per question", title_justify="left")
    for col in ("id", "type", "moment", "answer", "first citation", "inside", "offset s"):
        table.add_column(col, overflow="fold")
    for r in summary.results:
        first = r.first.label if r.first else "-"
        answerable = r.case.gold.answerable
        table.add_row(
            escape(r.case.id),
            escape(r.case.type or "-"),
            "-" if not answerable else (f"@{r.rank}" if r.rank else "miss"),
            r.kind,
            escape(first),
            ("yes" if r.first_inside else "no") if answerable else ("-" if r.correct else "no"),
            "-" if r.offset_s is None else f"{r.offset_s:.0f}",
        )
    return table


def _eval_summary(summary: Summary) -> Table:
    table = Table(title="Overall", title_justify="left")
    table.add_column("measure")
    table.add_column("value", justify="right")
    answerable = summary.json()["answerable"]
    table.add_row("questions (answerable)", f"{len(summary.results)} ({answerable})")
    for k in KS:
        table.add_row(f"retrieval moment@{k}", f"{summary.moment_at(k):.3f}")
    table.add_row("first citation inside gold", f"{summary.first_citation:.3f}")
    table.add_row("all citations inside gold", f"{summary.all_citations:.3f}")
    median = summary.median_offset_s
    table.add_row("median offset to gold start (s)", "-" if median is None else f"{median:.1f}")
    found, total = summary.unanswerable
    table.add_row("unanswerable -> nothing found", f"{found}/{total}")
    return table


def main() -> int:
    """Entry point for the core commands alone."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()
    return 0
