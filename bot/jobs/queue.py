"""``JobQueue``: what every door calls to add, update or remove a source as a job, wait
for it, cancel it or try it again.

The ``jobs`` row is the truth (``bot.jobs.table``). On PostgreSQL each queued row is also
handed to PgQueuer (``bot.jobs.pgqueue``), which wakes a worker on any machine; the hand-
over is idempotent (PgQueuer's dedupe key is the row's), and every worker re-hands the
queued rows now and then, so a process that died between the two writes loses nothing.
"""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Protocol

from bot.jobs.records import FINISHED, Job, Lane, dedupe_key, file_hash
from bot.jobs.runner import Limits, Runner
from bot.jobs.table import JobTable
from bot.models import Actor, Stage
from bot.write import Writer
from retrieval.ingest import discover, transcribed_beside
from retrieval.ingest.media import MEDIA_SUFFIXES
from retrieval.write.indexer import FileResult, Progress, Status

Watch = Callable[[list[Job]], Awaitable[None]]


class Delivery(Protocol):
    """Hands queued jobs to workers elsewhere (PgQueuer on PostgreSQL)."""

    async def send(self, jobs: Sequence[Job]) -> None:
        """Make ``jobs`` (queued) known to the workers; sending one twice is harmless."""
        ...


def worker_id() -> str:
    """This process, as ``quorum jobs`` names its worker: host, pid and a nonce."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:4]}"


def lane_of(path: Path) -> Lane:
    """Recordings are transcribed (minutes each); everything else is written at once."""
    return "transcribe" if path.suffix.lower() in MEDIA_SUFFIXES else "write"


def _files(paths: Sequence[Path]) -> tuple[list[tuple[Path, Path | None, str]], list[Path]]:
    """Each file under ``paths`` with its manifest root (a folder given) and its hash;
    the paths that do not exist."""
    found: list[tuple[Path, Path | None, str]] = []
    missing: list[Path] = []
    for given in paths:
        path = given.absolute()
        if not path.exists():
            missing.append(given)
            continue
        root = path if path.is_dir() else None
        for f in discover([path]) if root else [path]:
            found.append((f, root, file_hash(f)))
    # A recording named beside its named transcript is that transcript's media (kept with
    # it), not a second source to transcribe: as the indexer's own discovery has it.
    named = {f for f, _, _ in found}
    return [row for row in found if not transcribed_beside(row[0], named)], missing


ALIVE_S = 10.0  # a worker seen within this long is alive


class JobQueue:
    """Jobs queued, watched, cancelled and retried. With ``writer`` and ``inline``, a
    door whose jobs no live worker would take runs them itself (``settle``): `quorum
    ingest` on a machine where nothing serves is as fast as before jobs."""

    def __init__(
        self,
        table: JobTable,
        delivery: Delivery | None = None,
        *,
        writer: Writer | None = None,
        limits: Limits | None = None,
        inline: bool = True,
    ) -> None:
        self.table, self.delivery = table, delivery
        self.writer, self.limits, self.inline = writer, limits or Limits(), inline

    async def add(
        self,
        kb: str,
        paths: Sequence[Path],
        by: Actor,
        *,
        force: bool = False,
        speakers: int | None = None,
    ) -> tuple[list[Job], list[Path]]:
        """A job per file under ``paths`` (one already queued for the same content is
        reused); and the paths that do not exist. ``speakers``: how many people speak in
        the recordings, when the user said."""
        files, missing = await asyncio.to_thread(_files, paths)
        jobs: list[Job] = []
        for path, root, digest in files:
            job, _ = await self.table.insert(
                "add",
                lane_of(path),
                kb,
                by.via,
                by.who,
                str(path),
                dedupe_key(kb, "add", f"{path}\0{digest}" + (f"\0{speakers}" if speakers else "")),
                root=str(root) if root else None,
                force=force,
                speakers=speakers,
            )
            jobs.append(job)
        await self._send(jobs)
        return jobs, missing

    async def add_one(
        self,
        kb: str,
        file: str,
        digest: str,
        by: Actor,
        *,
        root: str | None = None,
        source_id: str | None = None,
    ) -> Job:
        """The job adding one file whose content hash is known already: a path (``root``,
        the folder its manifest lookups stop at), or a URL a fetcher downloads in the job
        (``s3://bucket/key``, ``bot.write.Fetcher``); ``source_id``: the source it becomes
        unless its metadata names one (a connector's item's own)."""
        job, _ = await self.table.insert(
            "add",
            lane_of(Path(file)),
            kb,
            by.via,
            by.who,
            file,
            dedupe_key(kb, "add", f"{file}\0{digest}"),
            root=root,
            source_id=source_id,
        )
        await self._send([job])
        return job

    async def remove(self, kb: str, source_id: str, by: Actor) -> Job:
        """The job removing ``source_id`` from ``kb``."""
        key = dedupe_key(kb, "remove", source_id)
        job, _ = await self.table.insert("remove", "write", kb, by.via, by.who, source_id, key)
        await self._send([job])
        return job

    async def _send(self, jobs: Sequence[Job]) -> None:
        if self.delivery is not None and (queued := [j for j in jobs if j.state == "queued"]):
            await self.delivery.send(queued)

    async def wait(
        self, ids: Sequence[int], watch: Watch | None = None, poll_s: float = 0.25
    ) -> list[Job]:
        """Wait until every job in ``ids`` is finished, telling ``watch`` each time one
        changes; the jobs as they ended."""
        seen: dict[int, tuple[object, ...]] = {}
        while True:
            jobs = await self.table.many(ids)
            changed = [j for j in jobs if seen.get(j.id) != (j.state, j.progress, j.attempts)]
            seen = {j.id: (j.state, j.progress, j.attempts) for j in jobs}
            if changed and watch is not None:
                await watch(jobs)
            if all(j.state in FINISHED for j in jobs):
                return jobs
            await asyncio.sleep(poll_s)

    async def settle(
        self, jobs: Sequence[Job], progress: Progress | None = None, watch: Watch | None = None
    ) -> list[Job]:
        """Wait for ``jobs`` to finish, showing ``progress`` (files done, transcription)
        and telling ``watch``; when no worker is alive (and ``inline``), run the due ones
        here. The jobs as they ended."""
        ids = [j.id for j in jobs]
        shown = _Shown(progress, len(ids))
        here = worker_id()
        runner = Runner(self.writer, self.table, here, self.limits) if self.writer else None
        while True:
            now = await self.table.many(ids)
            shown.update(now)
            if watch is not None:
                await watch(now)
            if all(j.state in FINISHED for j in now):
                return now
            if runner is not None and self.inline and not await self.workers_alive(ALIVE_S):
                claimed = [
                    c
                    for j in now
                    if j.state in ("queued", "running")
                    and (
                        c := await self.table.claim(
                            j.lane, here, self.limits.timeout_s, job_id=j.id
                        )
                    )
                ]
                adds = [c for c in claimed if c.kind != "remove"]
                for kb in sorted({c.kb for c in adds}):
                    await runner.run([c for c in adds if c.kb == kb], shown)
                for c in claimed:
                    if c.kind == "remove":
                        await runner.run([c], shown)
                if runner.setting_error is not None:  # the jobs say it too, as failed
                    raise runner.setting_error
                if claimed:
                    continue
            await asyncio.sleep(0.25)

    async def cancel(self, job_id: int, kb: str | None = None) -> Job | None:
        """Cancel a queued or running job (``kb``: only one of that knowledge base)."""
        return await self.table.cancel(job_id, kb)

    async def retry(self, job_id: int) -> Job | None:
        """Queue a failed or cancelled job again."""
        job = await self.table.retry(job_id)
        if job is not None:
            await self._send([job])
        return job

    async def ahead(self, job: Job) -> int:
        """Jobs of the same lane queued before ``job``."""
        rows = await self.table.driver.fetch(
            "SELECT COUNT(*) AS n FROM jobs WHERE lane = ? AND state = 'queued' AND id < ?",
            job.lane,
            job.id,
        )
        return int(rows[0]["n"]) if rows else 0

    async def workers_alive(self, within_s: float) -> int:
        """Workers seen within ``within_s``."""
        return len(await self.table.alive(within_s))


def file_result(job: Job) -> FileResult:
    """A finished job as the indexer reports a file."""
    if job.state == "done":
        status: Status = "skipped" if job.result == "unchanged" else "updated"
        if job.result == "added":
            status = "added"
        if job.result in ("added", "updated", "unchanged"):
            return FileResult(job.file, status, job.source_id, job.segments)
    reason = job.error or ("cancelled" if job.state == "cancelled" else "it could not be read")
    return FileResult(job.file, "failed", job.source_id, reason=reason)


class _Shown:
    """Jobs' progress on an indexer ``Progress``, whoever runs them: what a worker
    elsewhere wrote to the table, or what this process hears running them itself."""

    def __init__(self, outer: Progress | None, files: int) -> None:
        self.outer = outer
        self.done: set[str] = set()
        self.here: set[str] = set()  # files this process transcribes (heard directly)
        if outer is not None:
            outer.started(files)

    def started(self, files: int) -> None:
        pass  # the whole set was announced once

    def file_done(self, result: FileResult) -> None:
        if self.outer is not None and result.path not in self.done:
            self.done.add(result.path)
            self.outer.file_done(result)

    def transcribing(self, path: str, done_s: float, total_s: float) -> None:
        self._tell("transcribing", path, done_s, total_s)

    def diarizing(self, path: str, done_s: float, total_s: float) -> None:
        self._tell("diarizing", path, done_s, total_s)

    def writing(self, path: str) -> None:
        self._tell("writing", path)

    def _tell(self, stage: Stage, path: str, done_s: float = 0.0, total_s: float = 0.0) -> None:
        self.here.add(path)  # heard directly from now on, not from the table
        self._pass(stage, path, done_s, total_s)

    def _pass(self, stage: Stage, path: str, done_s: float, total_s: float) -> None:
        hear = getattr(self.outer, stage, None)
        if hear is not None and stage == "writing":
            hear(path)
        elif hear is not None:
            hear(path, done_s, total_s)

    def update(self, jobs: Sequence[Job]) -> None:
        """Show what the table says of ``jobs``: each one's stage and how far it is."""
        for job in jobs:
            if job.state in FINISHED:
                self.file_done(file_result(job))
            elif job.state == "running" and job.file not in self.here:
                stage = job.stage or "transcribing"
                if stage == "writing" or job.total_s:
                    total_s = job.total_s or 0.0
                    self._pass(stage, job.file, job.progress * total_s, total_s)
