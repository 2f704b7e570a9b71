"""``quorum ask`` (one answer, rendered or as JSON) and ``quorum eval`` (an eval file's
questions, where search and citations land)."""

from __future__ import annotations

import getpass
import json
import sys
import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from adapters.cli.app import (
    AfterOpt,
    BeforeOpt,
    KbOpt,
    SourceOpt,
    SpeakerOpt,
    app,
    build_filters,
    err,
    kb_name,
    out,
    run,
)
from adapters.cli.terminal import render_answer
from adapters.shapes import answer_json
from bot.config import Settings
from bot.evaluate import KS, Result, Summary, load_cases, run_eval
from bot.models import Answer, Event, Mode, ProgressEvent, Question, ThreadKey
from bot.wiring import open_core
from retrieval.links.share import load_secret


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
        if settings.public_url:  # the answer's links are signed: an unusable secret is
            secret = settings.link_secret  # one sentence now, not a failed answer
            load_secret(settings.data_dir, secret.get_secret_value() if secret else None)
        question_ = Question(
            text=question,
            thread=ThreadKey("cli", "local", "ask", uuid.uuid4().hex),
            user=getpass.getuser(),
            kb=kb_name(settings, kb),
            mode="deep" if deep else "quick",
            filters=filters,
        )
        async with open_core(settings, one_shot=True) as core:
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
        async with open_core(settings, one_shot=True) as core:
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
