"""Jobs across machines on PostgreSQL, delivered by PgQueuer (asyncpg-native; its own
tables beside ours, installed or upgraded when a worker or the bot starts).

Each queued ``jobs`` row is enqueued as a PgQueuer job of its lane's entrypoint, the
row's id as payload and its dedupe key as PgQueuer's, so handing it over twice is one
PgQueuer job. PgQueuer picks with ``FOR UPDATE SKIP LOCKED``, keeps a heartbeat per
picked job and hands a job whose heartbeat went stale (its worker died) to another
worker; its per-entrypoint concurrency limit is enforced in SQL across every worker
(``QUORUM_JOBS_MAX_TRANSCRIBING``). The handler claims the row by id (the same claim the
SQLite worker makes), so the record and the delivery cannot disagree: a delivery of a job
that is finished or cancelled does nothing; one whose row is still held by a live worker
is retried later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta

import asyncpg
from pgqueuer import QueueManager
from pgqueuer.errors import RetryRequested
from pgqueuer.models import Job as PgJob
from pgqueuer.queries import Queries

from bot.jobs.records import Job, Lane
from bot.jobs.worker import Worker

log = logging.getLogger("quorum.jobs")

LANES: tuple[Lane, ...] = ("transcribe", "write")
RESEND_S = 15.0  # queued rows are handed to PgQueuer again this often (idempotent)


async def install(url: str) -> None:
    """PgQueuer's tables, created or upgraded (under its own advisory lock)."""
    conn = await asyncpg.connect(url)
    try:
        await Queries.from_asyncpg_connection(conn).apply_upgrade()
    finally:
        await conn.close()


class PgDelivery:
    """``Delivery`` over PgQueuer on a pool."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.queries = Queries.from_asyncpg_pool(pool)

    async def send(self, jobs: Sequence[Job]) -> None:
        """Enqueue ``jobs`` in PgQueuer; one already there (its key) is skipped."""
        if not jobs:
            return
        await self.queries.enqueue(
            [j.lane for j in jobs],
            [str(j.id).encode() for j in jobs],
            [0] * len(jobs),
            dedupe_key=[j.dedupe_key for j in jobs],
            on_conflict="skip",
        )


@contextlib.asynccontextmanager
async def delivery(url: str) -> AsyncIterator[PgDelivery]:
    """A PgQueuer delivery on its own small pool, PgQueuer's tables in place."""
    await install(url)
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
    try:
        yield PgDelivery(pool)
    finally:
        await pool.close()


async def run_pg_worker(worker: Worker, url: str, max_transcribing: int) -> None:
    """Run ``worker`` on PgQueuer's deliveries until cancelled."""
    await install(url)
    conn = await asyncpg.connect(url)  # PgQueuer's LISTEN and picks
    pool = await asyncpg.create_pool(url, min_size=1, max_size=2)
    qm = QueueManager(Queries.from_asyncpg_connection(conn))
    send = PgDelivery(pool)
    limits = worker.limits

    async def handle(pg: PgJob) -> None:
        job_id = int((pg.payload or b"0").decode())
        job = await worker.table.get(job_id)
        if job is None or job.state in ("done", "failed", "cancelled"):
            return  # finished here or elsewhere (by a `quorum ingest` that ran it)
        claimed = await worker.table.claim(job.lane, worker.name, limits.timeout_s, job_id=job_id)
        if claimed is None:
            # Still held by a live worker, or not due: PgQueuer offers it again later.
            raise RetryRequested(timedelta(seconds=limits.timeout_s), f"job {job_id} is held")
        again = await worker.take(claimed)
        if again is not None:
            raise RetryRequested(timedelta(seconds=again), f"job {job_id} failed; retrying")

    for lane in LANES:
        limit = max_transcribing if lane == "transcribe" else 0
        qm.entrypoint(lane, concurrency_limit=limit)(handle)

    async def resend() -> None:
        while True:
            try:
                queued = await worker.table.listing(state="queued", limit=500)
                await send.send(queued)
            except Exception:
                log.warning("handing queued jobs to PgQueuer failed", exc_info=True)
            await asyncio.sleep(RESEND_S)

    tasks = [asyncio.create_task(worker.presence()), asyncio.create_task(resend())]
    try:
        await qm.run(
            dequeue_timeout=timedelta(seconds=5),
            batch_size=1,
            max_concurrent_tasks=2,
            heartbeat_timeout=timedelta(seconds=limits.timeout_s),
        )
    finally:
        qm.shutdown.set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await asyncio.shield(worker.table.gone(worker.name))
        await pool.close()
        await conn.close()
