"""``quorum jobs`` (what every recording is doing: a table, ``--json``, ``--watch``;
``cancel ID``, ``retry ID``) and ``quorum worker`` (runs jobs on this machine until
stopped: on SQLite beside ``quorum serve``, on PostgreSQL on any machine that reaches the
database and the store)."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import resource
import signal
import sys
import threading
import time
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.table import Table

from adapters.chat.announce import announcer
from adapters.cli.app import JsonOpt, app, err, fail, out, run
from adapters.cli.terminal import plain
from bot.config import Settings
from bot.connectors import ConnectorStatus, statuses_of
from bot.jobs import Job, JobTable
from bot.jobs.records import ACTIVE
from bot.jobs.table import FORGOTTEN
from bot.sessions.sql import SqlSessions
from bot.wiring import job_limits, open_job_queue, open_jobs, open_session_store
from retrieval.errors import InvalidInput

log = logging.getLogger("quorum.worker")

jobs_app = typer.Typer(
    help="Ingest jobs: what every recording is doing; cancel or retry one.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(jobs_app, name="jobs")

COLOURS = {"queued": "yellow", "running": "cyan", "done": "green", "failed": "red"}


def jobs_table(jobs: list[Job]) -> Table:
    """Jobs as a terminal table, newest first."""
    table = Table(show_edge=False)
    columns = ("id", "kind", "kb", "file", "state", "stage", "progress", "tries", "worker", "error")
    for col in columns:
        table.add_column(col, overflow="fold")
    for j in jobs:
        colour = COLOURS.get(j.state, "dim")
        table.add_row(
            str(j.id),
            j.kind,
            plain(j.kb),
            plain(j.name),
            f"[{colour}]{j.state}[/]",
            (j.stage or "") if j.state == "running" else "",
            f"{100 * j.progress:.0f} %" if j.state == "running" and j.stage != "writing" else "",
            str(j.attempts),
            plain(j.worker or ""),
            plain(j.error or ""),
        )
    return table


def connectors_table(statuses: list[ConnectorStatus]) -> Table:
    """Connectors as a terminal table: last and next run, counts, the problem if any."""
    table = Table(title="connectors", show_edge=False)
    for col in ("connector", "kb", "last run", "next run", "seen", "queued", "failed"):
        table.add_column(col, overflow="fold")
    table.add_column("forgotten")
    table.add_column("problem", overflow="fold")
    now = time.time()
    for s in statuses:
        c = s.counts
        table.add_row(
            plain(s.name),
            plain(s.kb),
            f"{now - s.last_run:.0f} s ago" if s.last_run else "never",
            f"in {max(0.0, s.next_run - now):.0f} s" if s.next_run else "",
            str(c.seen),
            str(c.queued),
            str(c.failed),
            str(c.forgotten),
            f"[red]{plain(' '.join(s.problems(now)))}[/]",
        )
    return table


async def _listing(
    settings: Settings, kb: str | None, limit: int
) -> tuple[list[Job], list[ConnectorStatus]]:
    async with open_session_store(settings) as sessions:
        assert isinstance(sessions, SqlSessions)
        jobs = await JobTable(sessions.driver).listing(kb, limit)
        statuses = await statuses_of(sessions).all()
    return jobs, [s for s in statuses if kb is None or s.kb == kb]


def _view(jobs: list[Job], statuses: list[ConnectorStatus]) -> Group:
    parts: list[Table] = [jobs_table(jobs)]
    return Group(*parts, *([connectors_table(statuses)] if statuses else []))


@jobs_app.callback()
def jobs_cmd(
    ctx: typer.Context,
    kb: Annotated[str | None, typer.Option(help="Only this knowledge base's jobs.")] = None,
    limit: Annotated[int, typer.Option(help="The newest this many jobs.")] = 50,
    as_json: JsonOpt = False,
    watch: Annotated[bool, typer.Option("--watch", help="Keep the table up to date.")] = False,
    connectors: Annotated[
        bool, typer.Option("--connectors", help="With --json: an object of jobs and connectors.")
    ] = False,
) -> None:
    """The latest jobs: kind, knowledge base, file, state, stage, progress, tries, worker,
    error."""
    if ctx.invoked_subcommand is not None:
        return
    if not 1 <= limit <= 10_000:
        raise fail(f"--limit must be between 1 and 10000, not {limit}.")

    async def go(settings: Settings) -> tuple[list[Job], list[ConnectorStatus]]:
        if not watch:
            return await _listing(settings, kb, limit)
        with Live(jobs_table([]), console=out, auto_refresh=False) as live:
            while True:
                live.update(_view(*await _listing(settings, kb, limit)), refresh=True)
                await asyncio.sleep(1.0)

    jobs, statuses = run(go)
    if as_json:
        # A list of jobs, as before; connectors are in `quorum jobs --json --connectors`.
        shown: Any = [j.json() for j in jobs]
        if connectors:
            shown = {"jobs": shown, "connectors": [s.json() for s in statuses]}
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
        return
    if not jobs:
        out.print("No jobs yet. `quorum ingest PATH` queues one per file.")
    else:
        out.print(jobs_table(jobs))
    if statuses:
        out.print(connectors_table(statuses))


@jobs_app.command("cancel")
def cancel_cmd(job_id: Annotated[int, typer.Argument(help="The job's id.")]) -> None:
    """Cancel a queued or running job: a cancelled transcription leaves nothing behind."""

    async def go(settings: Settings) -> tuple[Job, bool]:
        async with open_session_store(settings) as sessions:
            async with open_job_queue(settings, sessions, None) as queue:
                before = await queue.table.get(job_id)
                job = await queue.cancel(job_id)
        if job is None or before is None:
            raise InvalidInput(f"There is no job {job_id} (see `quorum jobs`).")
        return job, before.state in ACTIVE

    job, was_active = run(go)
    if not was_active or job.state != "cancelled":
        raise fail(f"Job {job_id} had already ended ({job.state}).")
    out.print(f"Cancelled job {job_id} ({plain(job.name)}).", highlight=False)


@jobs_app.command("retry")
def retry_cmd(job_id: Annotated[int, typer.Argument(help="The job's id.")]) -> None:
    """Queue a failed or cancelled job again."""

    async def go(settings: Settings) -> Job:
        async with open_session_store(settings) as sessions:
            async with open_job_queue(settings, sessions, None) as queue:
                job = await queue.retry(job_id)
        if job is None:
            raise InvalidInput(f"There is no job {job_id} (see `quorum jobs`).")
        return job

    job = run(go)
    if job.state != "queued" and job.file == FORGOTTEN:
        raise fail(f"Job {job_id}'s file was forgotten with its source: add the file again.")
    if job.state != "queued":
        raise fail(f"Job {job_id} is {job.state}: only a failed or cancelled job is retried.")
    out.print(f"Job {job_id} ({plain(job.name)}) is queued again.", highlight=False)


OUT_OF_MEMORY = 137  # a worker's exit code when it ran out of memory (as if OOM-killed)
NICENESS = 10  # a worker yields the CPU to the bot beside it: answers first, ingest after


def _die_of(exc: BaseException | None) -> None:
    """A worker that ran out of memory anywhere (a decoder's thread, a socket's read)
    exits at once: its state is unknown, and a wedged worker would hold its job forever.
    Its job goes to the next worker when the heartbeat goes stale."""
    if isinstance(exc, MemoryError):
        os.write(2, b"quorum worker: out of memory; exiting\n")
        os._exit(OUT_OF_MEMORY)


def limit_memory(mb: int | None) -> None:
    """QUORUM_WORKER_MEMORY_MB: this process's address space, bounded; running out of it
    anywhere ends the process (``_die_of``)."""
    if mb is None:
        return
    size = mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (size, size))
    previous_thread, previous_unraisable = threading.excepthook, sys.unraisablehook

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        _die_of(args.exc_value)
        previous_thread(args)

    def unraisable_hook(args: sys.UnraisableHookArgs) -> None:
        _die_of(args.exc_value)
        previous_unraisable(args)

    threading.excepthook, sys.unraisablehook = thread_hook, unraisable_hook
    loop = asyncio.get_running_loop()

    def loop_hook(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        _die_of(context.get("exception"))
        loop.default_exception_handler(context)

    loop.set_exception_handler(loop_hook)


PARENT_CHECK_S = 1.0  # how often a serve-started worker looks for its serve


async def _outlived(parent: int, task: asyncio.Task[Any]) -> None:
    """Stop ``task`` (as SIGTERM does: the running job handed back) once process ``parent``
    is gone, however it ended: this worker is then no longer its child."""
    while os.getppid() == parent:  # noqa: ASYNC110 (nothing to wait on but the kernel's answer)
        await asyncio.sleep(PARENT_CHECK_S)
    log.warning("quorum serve (pid %d) is gone; this worker stops too", parent)
    task.cancel()


@app.command("worker")
def worker_cmd(
    parent: Annotated[
        int | None,
        typer.Option(
            "--parent",
            hidden=True,
            help="Stop when process PID (the quorum serve that started this worker) is gone.",
        ),
    ] = None,
) -> None:
    """Run ingest jobs on this machine until stopped (SIGTERM, Ctrl-C): beside `quorum
    serve` on SQLite, on any machine with QUORUM_DATABASE_URL (PostgreSQL)."""

    async def go(settings: Settings) -> None:
        from bot.jobs.worker import Worker

        os.nice(NICENESS)  # inherited by the decoder's and the encoder's threads
        logging.getLogger("quorum.jobs").setLevel(logging.INFO)  # each job's start and end
        # The model loads with the first job: an idle worker costs little.
        async with open_jobs(settings, warm=False) as (writer, queue, _):
            writer.add_announcer(announcer(settings, writer.search))
            limit_memory(settings.worker_memory_mb)  # after the model is loaded
            worker = Worker(
                writer,
                queue.table,
                job_limits(settings),
                max_transcribing=settings.jobs_max_transcribing,
            )
            url = settings.database_url.get_secret_value() if settings.database_url else None
            loop = asyncio.get_running_loop()
            task = asyncio.current_task()
            assert task is not None
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, task.cancel)
            watching = asyncio.create_task(_outlived(parent, task)) if parent else None
            log.warning("worker %s is running jobs", worker.name)
            t0 = time.perf_counter()
            try:
                if url is None:
                    await worker.run()
                else:
                    from bot.jobs.pgqueue import run_pg_worker

                    await run_pg_worker(worker, url, settings.jobs_max_transcribing)
            except asyncio.CancelledError:
                err.print(f"Worker stopped after {time.perf_counter() - t0:.0f} s.")
            except MemoryError as exc:
                _die_of(exc)
            finally:
                if watching is not None:
                    watching.cancel()

    run(go)
