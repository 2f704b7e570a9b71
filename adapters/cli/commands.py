"""The ``quorum`` archive commands: ingest, search, summary, sources, remove.

The typer app and the options they share are in ``app``; ``ask`` holds ask and eval, and
``main`` adds the platform commands (serve, chat, demo, and each chat platform's), so the
arrows keep pointing ``adapters -> bot``. Every command turns a QuorumError into one red
sentence and a non-zero exit.
"""

from __future__ import annotations

import getpass
import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from adapters.cli.app import (
    AfterOpt,
    BeforeOpt,
    JsonOpt,
    KbOpt,
    LevelOpt,
    SourceOpt,
    SpeakerOpt,
    app,
    build_filters,
    err,
    fail,
    kb_name,
    out,
    parse_levels,
    run,
)
from adapters.cli.terminal import failure_line, plain, summary_table
from adapters.shapes import held_json, hit_json
from bot.answer.understand import choice_note
from bot.config import Settings
from bot.holdings import Held
from bot.jobs import Job
from bot.models import Actor
from bot.wiring import (
    open_holdings,
    open_job_queue,
    open_jobs,
    open_retrieval,
    open_session_store,
)
from retrieval.errors import InvalidInput
from retrieval.links.links import locator
from retrieval.models import Hit
from retrieval.search.search import MAX_K

if TYPE_CHECKING:
    from retrieval.write.indexer import IngestReport


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


def cli_actor() -> Actor:
    """This terminal's user, for the audit trail."""
    try:
        return Actor("cli", getpass.getuser())
    except (KeyError, OSError):  # no login name (a container without a passwd entry)
        return Actor("cli")


@app.command("ingest")
def ingest_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Files or folders to ingest.")],
    kb: KbOpt = None,
    force: Annotated[bool, typer.Option(help="Re-ingest files even when unchanged.")] = False,
    no_wait: Annotated[
        bool, typer.Option("--no-wait", help="Queue the files and print the job ids at once.")
    ] = False,
    speakers: Annotated[
        int | None,
        typer.Option(
            "--speakers",
            min=1,
            max=20,
            help="How many people speak in the recordings (else Quorum counts them).",
        ),
    ] = None,
) -> None:
    """Ingest recordings (audio and video are transcribed), transcripts, PDFs, Markdown and
    course files: a job per file, run by a worker (`quorum serve`, `quorum worker`), or
    here while none is running."""

    async def go(settings: Settings) -> IngestReport | None:
        # Here, not at the top: the readers (PDF, media) and the announcements cost a
        # one-shot `quorum search` over a second on two cores.
        from adapters.chat.announce import announcer, targets
        from adapters.cli.ingest_progress import IngestProgress
        from adapters.cli.speakers import suggested
        from bot.jobs.queue import file_result
        from retrieval.write.indexer import FileResult, IngestReport

        name = kb_name(settings, kb)
        targets(settings.post_summaries)  # a malformed target fails before any work
        if no_wait:  # queued in the database alone: neither the store nor the model
            async with (
                open_session_store(settings) as sessions,
                open_job_queue(settings, sessions, None) as queue,
            ):
                jobs, missing = await queue.add(
                    name, paths, cli_actor(), force=force, speakers=speakers
                )
                idle = bool(jobs) and not await queue.workers_alive(30)
            # Plain lines (id, a tab, the file), for scripts: `cut -f1` gives the ids.
            sys.stdout.write("".join(f"{job.id}\t{job.name}\n" for job in jobs))
            if idle:
                err.print("No worker is running: `quorum serve` or `quorum worker` runs them.")
            for path in missing:
                err.print(failure_line(str(path), "no such file or folder"), highlight=False)
            return None
        async with open_jobs(settings, one_shot=True) as (writer, queue, _):
            writer.add_announcer(announcer(settings, writer.search))
            jobs, missing = await queue.add(
                name, paths, cli_actor(), force=force, speakers=speakers
            )
            t0 = time.perf_counter()
            with IngestProgress(err) as progress:
                ended = await queue.settle(jobs, progress)
            elapsed = time.perf_counter() - t0
            written = {
                j.source_id for j in ended if j.result in ("added", "updated") and j.source_id
            }
            heard_like = await suggested(settings, writer, name, written)
        report = IngestReport([file_result(j) for j in ended])
        report.results += [
            FileResult(str(p), "failed", reason="no such file or folder") for p in missing
        ]
        out.print(_report_table(report, elapsed))
        for f in report.failed:
            err.print(failure_line(f.path, f.reason), highlight=False)
        for line in heard_like:  # remembered voices: suggested, never applied
            out.print(plain(line))
        return report

    report = run(go)
    if report is not None and report.failed:
        raise fail(f"{len(report.failed)} file(s) could not be ingested (listed above).")


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
        async with open_retrieval(settings, warm=True, one_shot=True) as r:
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
        async with open_retrieval(settings, one_shot=True) as r:
            return await r.search.archive(kb_name(settings, kb)).summary(source)

    hit = run(go)
    if as_json:
        sys.stdout.write(json.dumps(hit_json(hit), indent=2) + "\n")
        return
    out.print(summary_table(hit))


@app.command("sources")
def sources_cmd(kb: KbOpt = None, as_json: JsonOpt = False) -> None:
    """List the sources in a knowledge base."""

    async def go(settings: Settings) -> list[Held]:
        async with open_holdings(settings, one_shot=True) as holdings:
            return await holdings.held(kb_name(settings, kb))

    held = run(go)
    infos = [h.info for h in held]
    if as_json:
        rows = [held_json(h) | {"path": h.info.source.path} for h in held]
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
    """Remove a source from a knowledge base: its passages at every level, its summary, its
    kept transcript and uploaded file, and its words in stored answers."""

    async def go(settings: Settings) -> Job:
        async with open_jobs(settings, one_shot=True, warm=False) as (_, queue, _):
            job = await queue.remove(kb_name(settings, kb), source_id, cli_actor())
            [ended] = await queue.settle([job])
            return ended

    job = run(go)
    if job.state != "done":
        if job.error and job.error.startswith("there is no source"):
            raise fail(f"No source {source_id!r} in that knowledge base (see `quorum sources`).")
        raise fail(f"Could not remove {source_id}: {job.error or job.state}.")
    what = json.loads(job.detail or "{}")
    files = f", {what['files']} kept file(s)" if what.get("files") else ""
    answers = f", its words in {what['answers']} stored answer(s)" if what.get("answers") else ""
    out.print(plain(f"Removed {source_id} ({job.segments} passages{files}{answers})."))
    if what.get("shared"):
        out.print("Its transcript is kept: another source was made from the same recording.")
