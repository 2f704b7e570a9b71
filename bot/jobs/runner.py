"""Running jobs: each through the one write path (``bot.write``), with a heartbeat that
keeps the claim, reports progress and hears a cancel.

A job's file that cannot be read fails it at once with the reader's sentence; anything
else that goes wrong (the store down, the worker's own trouble) queues it again after a
backoff until ``QUORUM_JOB_ATTEMPTS`` runs out. A cancel stops a transcription before
anything of it is kept (``retrieval.write.indexer.Stopped``); the upload it was made for goes
too. A job whose write already finished when the cancel came is done: too late to undo,
unless the cancel was its source's removal (``JobTable.stop_writing``): then the job's
end removes what it wrote, whichever of the two came first.
The write path is idempotent (content hash, switch-over), so a job run twice after its
worker died leaves one source.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.errors import FetchError
from bot.jobs.records import Job
from bot.jobs.table import FORGOTTEN, JobTable
from bot.models import Actor, Stage
from bot.write import Unfetchable, Writer
from retrieval.errors import ConfigError
from retrieval.write.indexer import FileResult, Progress, Stopped

log = logging.getLogger("quorum.jobs")

MAX_BACKOFF_S = 300.0


def backoff(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` tries: 5, 10, 20 ... at most 5 min."""
    return float(min(MAX_BACKOFF_S, 5.0 * 2.0 ** max(0, attempts - 1)))


@dataclass(frozen=True)
class Limits:
    """How jobs are kept alive and retried."""

    timeout_s: float = 30.0
    attempts: int = 3

    @property
    def beat_s(self) -> float:
        """How often a running job's heartbeat is written."""
        return max(0.2, self.timeout_s / 4)


class _Beats:
    """An indexer ``Progress`` (and ``MediaProgress``, ``SpeakerProgress``,
    ``WriteProgress``, ``Stoppable``) for a run of jobs: remembers each file's stage and how
    far it is, passes everything on to ``outer``; a new stage wakes the heartbeat."""

    def __init__(self, outer: Progress | None) -> None:
        self.outer = outer
        self.stop = threading.Event()
        self.heard: dict[str, tuple[Stage, float, float]] = {}
        self.names: dict[str, str] = {}  # a downloaded file's path -> its job's URL
        self.moved = asyncio.Event()  # a file entered a new stage: written at once

    def started(self, files: int) -> None:
        if self.outer is not None:
            self.outer.started(files)

    def file_done(self, result: FileResult) -> None:
        if self.outer is not None:
            self.outer.file_done(result)

    def _hear(self, stage: Stage, path: str, done_s: float, total_s: float) -> None:
        name = self.names.get(path, path)
        before = self.heard.get(name)
        if before is None or before[0] != stage:
            self.moved.set()
        self.heard[name] = (stage, done_s, total_s)
        tell = getattr(self.outer, stage, None)
        if tell is not None and stage == "writing":
            tell(path)
        elif tell is not None:
            tell(path, done_s, total_s)

    def transcribing(self, path: str, done_s: float, total_s: float) -> None:
        self._hear("transcribing", path, done_s, total_s)

    def diarizing(self, path: str, done_s: float, total_s: float) -> None:
        self._hear("diarizing", path, done_s, total_s)

    def writing(self, path: str) -> None:
        before = self.heard.get(self.names.get(path, path))
        total_s = before[2] if before else 0.0
        self._hear("writing", path, total_s, total_s)


class Runner:
    """Runs claimed jobs through the write path, beating their heartbeats."""

    def __init__(
        self, writer: Writer, table: JobTable, worker: str, limits: Limits | None = None
    ) -> None:
        self.writer, self.table, self.worker = writer, table, worker
        self.limits = limits or Limits()
        # The last wrong setting a job met: whoever runs jobs in front of a person (``quorum
        # ingest`` with no worker alive) stops at it instead of failing every file alike.
        self.setting_error: ConfigError | None = None

    async def run(self, jobs: Sequence[Job], progress: Progress | None = None) -> float | None:
        """Run ``jobs`` (claimed by this worker; additions of one knowledge base, or one
        removal) to their end; the seconds to wait before they are due again when they
        were queued for a retry, else None."""
        if not jobs:
            return None
        beats = _Beats(progress)
        beating = asyncio.create_task(self._beat(jobs, beats))
        try:
            if jobs[0].kind == "remove":
                await self._remove(jobs[0])
            else:
                await self._add(jobs, beats)
            return None
        except Stopped:
            await self._cancelled(jobs)
            return None
        except asyncio.CancelledError:  # the worker is stopping: hand the jobs back at once
            with contextlib.suppress(Exception):
                await asyncio.shield(self._release(jobs))
            raise
        except MemoryError:  # the worker's process decides (``quorum worker`` exits)
            raise
        except ConfigError as exc:  # a setting is wrong: no retry mends it
            for job in jobs:
                await self.table.finish(job.id, self.worker, "failed", error=str(exc))
            self.setting_error = exc
            return None
        except Exception as exc:
            log.warning("jobs %s failed (%s); trying again", [j.id for j in jobs], exc)
            return await self._again(jobs, exc)
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating

    async def _add(self, jobs: Sequence[Job], beats: _Beats) -> None:
        if not any("://" in j.file for j in jobs):  # files on this machine: written as named
            await self._write(jobs, {}, beats)
            return
        async with contextlib.AsyncExitStack() as stack:
            local: dict[str, Path] = {}  # a URL's job: the file it was downloaded to
            for job in jobs:
                if "://" not in job.file:
                    continue
                try:
                    local[job.file] = await stack.enter_async_context(self._fetch(job.file))
                    beats.names[str(local[job.file])] = job.file  # its progress, by its URL
                except Unfetchable as exc:
                    await self._end(job, "failed", error=str(exc))
            runnable = [j for j in jobs if "://" not in j.file or j.file in local]
            if runnable:
                await self._write(runnable, local, beats)

    async def _write(self, jobs: Sequence[Job], local: dict[str, Path], beats: _Beats) -> None:
        """Write ``jobs``' files (``local``: where a URL's was downloaded) and end each job."""
        first = jobs[0]
        paths = [local.get(j.file, Path(j.file)) for j in jobs]
        roots = {Path(j.file): Path(j.root) for j in jobs if j.root and j.file not in local}
        roots |= {p: p.parent for p in local.values()}  # manifests: its own folder only
        speakers = {local.get(j.file, Path(j.file)): j.speakers for j in jobs if j.speakers}
        by = Actor(first.via, first.actor)
        force = any(j.force for j in jobs)
        origins = {p: url for url, p in local.items()}  # a download shows where it came from
        ids = {p: j.source_id for j, p in zip(jobs, paths, strict=True) if j.source_id}
        written = await self.writer.add(
            first.kb,
            paths,
            by,
            progress=beats,
            force=force,
            roots=roots,
            speakers=speakers,
            origins=origins,
            ids=ids,
        )
        by_path = {r.path: r for r in written.report.results}
        for job, path in zip(jobs, paths, strict=True):
            r = by_path.get(str(path))
            if r is None or r.status == "failed":
                why = r.reason if r is not None and r.reason else "it could not be read"
                await self._end(job, "failed", error=why)
            else:
                result = "unchanged" if r.status == "skipped" else r.status
                kind = "update" if r.status == "updated" else None
                await self._end(
                    job, "done", result=result, sid=r.source_id, segs=r.segments, kind=kind
                )

    def _fetch(self, url: str) -> contextlib.AbstractAsyncContextManager[Path]:
        scheme = url.partition("://")[0]
        fetcher = self.writer.fetchers.get(scheme)
        if fetcher is None:
            raise ConfigError(
                f"{scheme}:// files are downloaded only where their connector is set up "
                f"(QUORUM_{scheme.upper()}_URL and its credentials, on every worker)."
            )
        return fetcher(url)

    async def _remove(self, job: Job) -> None:
        gone = await self.writer.remove(job.kb, job.file, Actor(job.via, job.actor))
        if gone.passages == 0:
            await self._end(job, "failed", error=f"there is no source {job.file!r} in {job.kb}")
            return
        what = {"files": len(gone.files), "answers": gone.answers, "shared": gone.shared_transcript}
        await self._end(
            job, "done", result="removed", sid=job.file, segs=gone.passages, detail=json.dumps(what)
        )

    async def _end(
        self,
        job: Job,
        state: str,
        *,
        error: str | None = None,
        result: str | None = None,
        sid: str | None = None,
        segs: int = 0,
        kind: str | None = None,
        detail: str | None = None,
    ) -> None:
        # A cancel that came after the write finished is too late: the job is done. Not
        # when its source was forgotten meanwhile: what it wrote is removed again.
        if state == "done":
            await self.table.driver.execute(
                "UPDATE jobs SET state = 'running' WHERE id = ? AND worker = ? "
                "AND state = 'cancelled' AND file <> ?",
                job.id,
                self.worker,
                FORGOTTEN,
            )
        ended = await self.table.finish(
            job.id,
            self.worker,
            state,  # type: ignore[arg-type]
            error=error,
            result=result,
            source_id=sid,
            segments=segs,
            kind=kind,  # type: ignore[arg-type]
            detail=detail,
        )
        if not ended and state == "done" and sid and job.kind != "remove":
            now = await self.table.get(job.id)
            if now is not None and now.state == "cancelled" and now.file == FORGOTTEN:
                log.info("job %s wrote a source forgotten meanwhile; removing it", job.id)
                await self.writer.remove(job.kb, sid, Actor(job.via, job.actor))

    async def _again(self, jobs: Sequence[Job], exc: Exception) -> float | None:
        why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        if isinstance(exc, FetchError):
            why = str(exc)  # a download's failure, already one sentence for a person
        delays: list[float] = []
        for job in jobs:
            if job.attempts >= self.limits.attempts:
                await self.table.finish(
                    job.id,
                    self.worker,
                    "failed",
                    error=f"{job.name}: {why} (tried {job.attempts} times)",
                )
            else:
                delay = backoff(job.attempts)
                if await self.table.later(job.id, self.worker, delay, why):
                    delays.append(delay)
        return min(delays) if delays else None

    async def _release(self, jobs: Sequence[Job]) -> None:
        """Queue ``jobs`` again for the next worker (this one stops before they end)."""
        for job in jobs:
            await self.table.later(job.id, self.worker, 0.0, "its worker stopped; queued again")

    async def _cancelled(self, jobs: Sequence[Job]) -> None:
        """A cancelled run leaves nothing: no source was written, no transcript kept;
        the upload it was made for is deleted (a user's own file never)."""
        uploads = self.writer.uploads_dir
        for job in jobs:
            log.info("job %s was cancelled while running", job.id)
            path = Path(job.file)
            if uploads is None or job.kind == "remove":
                continue
            held = {i.source.path for i in await self.writer.store.list_sources(job.kb)}
            inside = await asyncio.to_thread(_inside, path, uploads)
            if inside and job.file not in held:
                await asyncio.to_thread(path.unlink, missing_ok=True)

    async def _beat(self, jobs: Sequence[Job], beats: _Beats) -> None:
        """Every ``beat_s``: the claim kept alive, stage and progress written, a cancel
        heard; a job whose file enters a new stage is written at once."""
        lengths: set[int] = set()
        written: dict[int, Stage | None] = {}  # the stage each job's row shows
        last = time.monotonic()
        while True:
            with contextlib.suppress(TimeoutError):
                wait = max(0.0, last + self.limits.beat_s - time.monotonic())
                await asyncio.wait_for(beats.moved.wait(), wait)
            beats.moved.clear()
            due = time.monotonic() >= last + self.limits.beat_s
            if due:
                last = time.monotonic()
            for job in jobs:
                stage, done_s, total_s = beats.heard.get(job.file, (None, 0.0, 0.0))
                if not due and written.get(job.id) == stage:
                    continue
                written[job.id] = stage
                fraction = done_s / total_s if total_s else None
                if total_s and job.id not in lengths:
                    await self.table.length(job.id, self.worker, total_s)
                    lengths.add(job.id)
                try:
                    state = await self.table.beat(job.id, self.worker, fraction, stage)
                except Exception:  # the database blinked: the next beat tries again
                    log.warning("heartbeat of job %s failed", job.id, exc_info=True)
                    continue
                if state != "running":  # cancelled, or taken over by another worker
                    beats.stop.set()


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except (OSError, ValueError):
        return False
