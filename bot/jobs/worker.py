"""A worker: runs jobs until stopped. On SQLite (one machine) it picks them from the
``jobs`` table itself, one lane at a time each (a transcription never holds back a
document); on PostgreSQL PgQueuer delivers them (``bot.jobs.pgqueue``). Either way it
writes its presence every few seconds (``quorum doctor`` counts the workers alive) and
fails the jobs whose worker died on their last allowed try."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time

from bot.jobs.queue import worker_id
from bot.jobs.records import Job, Lane
from bot.jobs.runner import Limits, Runner
from bot.jobs.table import JobTable
from bot.write import Writer

log = logging.getLogger("quorum.jobs")

POLL_S = 0.5  # an idle SQLite worker looks for work this often
SEEN_S = 2.0  # a worker writes its presence this often
ALIVE_S = 10.0  # seen within this long: alive


class Worker:
    """Runs jobs through ``writer``; ``run`` until cancelled."""

    def __init__(
        self,
        writer: Writer,
        table: JobTable,
        limits: Limits | None = None,
        *,
        max_transcribing: int = 0,
        name: str | None = None,
    ) -> None:
        self.table = table
        self.name = name or worker_id()
        self.limits = limits or Limits()
        self.runner = Runner(writer, table, self.name, self.limits)
        self.max_transcribing = max_transcribing
        self.started_at = time.time()

    async def presence(self) -> None:
        """Write this worker's presence, and fail jobs that ran out of tries, forever."""
        host, pid = socket.gethostname(), os.getpid()
        while True:
            try:
                await self.table.seen(self.name, host, pid, self.started_at)
                failed = await self.table.fail_exhausted(
                    self.limits.timeout_s, self.limits.attempts
                )
                if failed:
                    log.warning("jobs %s failed: their worker kept dying", failed)
            except Exception:  # the database blinked: the next round tries again
                log.warning("worker %s could not write its presence", self.name, exc_info=True)
            await asyncio.sleep(SEEN_S)

    async def lane(self, lane: Lane) -> None:
        """Pick and run this lane's jobs from the table, forever (SQLite)."""
        limit = self.max_transcribing if lane == "transcribe" else 0
        blinked = self.table.driver.errors
        while True:
            try:
                job = await self.table.claim(lane, self.name, self.limits.timeout_s, limit=limit)
            except blinked as exc:  # locked by another process a while, or restarting
                log.warning("worker %s could not look for jobs (%s); looking again", self.name, exc)
                await asyncio.sleep(SEEN_S)
                continue
            if job is None:
                await asyncio.sleep(POLL_S)
                continue
            try:
                await self.take(job)
            except blinked as exc:
                # Its end could not be written: the heartbeat stops, so the job goes stale
                # and is taken up again (the write path keeps one source however often).
                log.warning("job %s: the database could not be written (%s)", job.id, exc)
                await asyncio.sleep(SEEN_S)

    async def take(self, job: Job) -> float | None:
        """Run one claimed job, saying on the worker's terminal when it starts and how it
        ended; the seconds before it is due again when it was queued for a retry."""
        log.info("job %s (%s %s) started, attempt %d", job.id, job.kind, job.name, job.attempts)
        t0 = time.perf_counter()
        again = await self.runner.run([job])
        took = time.perf_counter() - t0
        ended = await self.table.many([job.id])
        if not ended:  # removed meanwhile (its knowledge base forgotten)
            log.info("job %s is gone after %.0f s", job.id, took)
        elif ended[0].state == "done":
            log.info("job %s %s after %.0f s", job.id, ended[0].result or "done", took)
        elif ended[0].state == "queued":
            log.warning("job %s queued again after %.0f s: %s", job.id, took, ended[0].error)
        else:
            log.warning("job %s %s after %.0f s: %s", job.id, ended[0].state, took, ended[0].error)
        return again

    async def run(self) -> None:
        """Run jobs from the table until cancelled."""
        try:
            await asyncio.gather(self.presence(), self.lane("transcribe"), self.lane("write"))
        finally:
            await asyncio.shield(self.table.gone(self.name))
