"""The ``jobs`` and ``workers`` tables, in SQL both databases speak (over the sessions'
``Driver``): the durable record every door writes and ``quorum jobs`` reads.

A claim is one conditional ``UPDATE``: a job is taken when it is queued and due, or
running with a heartbeat older than the timeout (its worker died); the row count says
who won, so two workers never run one attempt. On SQLite that is how jobs are picked
(one machine); on PostgreSQL PgQueuer picks and delivers them (``bot.jobs.pgqueue``) and
the same claim, by id, makes the record agree.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import PurePosixPath
from typing import Any

from bot.jobs.records import ACTIVE, STATES, Job, Kind, Lane, State
from bot.models import Stage
from bot.sessions.driver import Driver
from retrieval.ingest.metadata import slug
from retrieval.models import Source

COLUMNS = (
    "id, kind, lane, kb, via, actor, file, root, force, dedupe_key, state, progress, total_s, "
    "attempts, worker, error, result, source_id, segments, detail, created_at, run_after, "
    "started_at, "
    "heartbeat_at, finished_at, speakers, stage"
)
MAX_ERROR = 300  # one sentence, whatever an exception put in its message
FORGOTTEN = "(forgotten)"  # the file of a job whose source was forgotten
STOPPED = "cancelled: its source was forgotten"  # the error of a job that would have added it


def sentence(text: str) -> str:
    """An error on one line, at most ``MAX_ERROR`` characters."""
    line = " ".join(text.split())
    return line if len(line) <= MAX_ERROR else line[: MAX_ERROR - 3] + "..."


class JobTable:
    """Jobs and workers in the session database."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    async def insert(
        self,
        kind: Kind,
        lane: Lane,
        kb: str,
        via: str,
        actor: str,
        file: str,
        key: str,
        *,
        root: str | None = None,
        force: bool = False,
        speakers: int | None = None,
        source_id: str | None = None,
    ) -> tuple[Job, bool]:
        """The job for ``key``: a new one queued (True), or the one already queued or
        running for it (False): the same recording queued twice is one job. ``source_id``:
        the source an add writes, unless the file's metadata names one."""
        now = time.time()
        for _ in range(3):  # the active one may finish between the insert and the read
            async with self.driver.transaction() as tx:
                rows = await tx.fetch(
                    "INSERT INTO jobs (kind, lane, kb, via, actor, file, root, force, "
                    "dedupe_key, state, created_at, run_after, speakers, source_id) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?) "
                    "ON CONFLICT (dedupe_key) WHERE state IN ('queued', 'running') DO NOTHING "
                    f"RETURNING {COLUMNS}",
                    kind,
                    lane,
                    kb,
                    via,
                    actor,
                    file,
                    root,
                    int(force),
                    key,
                    now,
                    now,
                    speakers,
                    source_id,
                )
                if rows:
                    return Job.from_row(rows[0]), True
                rows = await tx.fetch(
                    f"SELECT {COLUMNS} FROM jobs WHERE dedupe_key = ? "
                    "AND state IN ('queued', 'running')",
                    key,
                )
                if rows:
                    return Job.from_row(rows[0]), False
        raise RuntimeError(f"could not queue job {key}")  # pragma: no cover

    async def get(self, job_id: int) -> Job | None:
        """One job, or None."""
        rows = await self.driver.fetch(f"SELECT {COLUMNS} FROM jobs WHERE id = ?", job_id)
        return Job.from_row(rows[0]) if rows else None

    async def many(self, ids: Sequence[int]) -> list[Job]:
        """The jobs with ``ids``, in id order."""
        if not ids:
            return []
        marks = ", ".join("?" for _ in ids)
        rows = await self.driver.fetch(
            f"SELECT {COLUMNS} FROM jobs WHERE id IN ({marks}) ORDER BY id", *ids
        )
        return [Job.from_row(r) for r in rows]

    async def listing(
        self, kb: str | None = None, limit: int = 100, state: State | None = None
    ) -> list[Job]:
        """The latest jobs (of one knowledge base, in one state), newest first."""
        where, args = [], []
        if kb is not None:
            where.append("kb = ?")
            args.append(kb)
        if state is not None:
            where.append("state = ?")
            args.append(state)
        clause = f"WHERE {' AND '.join(where)} " if where else ""
        rows = await self.driver.fetch(
            f"SELECT {COLUMNS} FROM jobs {clause}ORDER BY id DESC LIMIT ?", *args, limit
        )
        return [Job.from_row(r) for r in rows]

    async def claim(
        self,
        lane: Lane,
        worker: str,
        timeout_s: float,
        *,
        job_id: int | None = None,
        limit: int = 0,
    ) -> Job | None:
        """Take the next due job of ``lane`` (or job ``job_id``): queued, or running with a
        stale heartbeat. ``limit``: at most that many of the lane running at once (0: no
        limit). None when there is none to take."""
        now = time.time()
        stale = now - timeout_s
        takeable = (
            "(state = 'queued' AND run_after <= ?) OR (state = 'running' AND heartbeat_at < ?)"
        )
        pick = (
            "?"
            if job_id is not None
            else f"(SELECT id FROM jobs WHERE lane = ? AND ({takeable}) ORDER BY id LIMIT 1)"
        )
        pick_args: list[Any] = [job_id] if job_id is not None else [lane, now, stale]
        room, room_args = "", []
        if limit > 0:
            room = (
                " AND (SELECT COUNT(*) FROM jobs WHERE lane = ? AND state = 'running' "
                "AND heartbeat_at >= ?) < ?"
            )
            room_args = [lane, stale, limit]
        async with self.driver.transaction() as tx:
            rows = await tx.fetch(
                "UPDATE jobs SET state = 'running', attempts = attempts + 1, worker = ?, "
                "started_at = ?, heartbeat_at = ?, error = NULL, progress = 0, stage = NULL "
                f"WHERE id = {pick} AND ({takeable}){room} RETURNING {COLUMNS}",
                worker,
                now,
                now,
                *pick_args,
                now,
                stale,
                *room_args,
            )
        return Job.from_row(rows[0]) if rows else None

    async def beat(
        self, job_id: int, worker: str, progress: float | None = None, stage: Stage | None = None
    ) -> State | None:
        """This worker still runs the job (and how far it is: ``progress`` of ``stage``); the
        job's state now (a cancel shows here), None when another worker has taken it over."""
        await self.driver.execute(
            "UPDATE jobs SET heartbeat_at = ?, progress = COALESCE(?, progress), "
            "stage = COALESCE(?, stage) WHERE id = ? AND worker = ? AND state = 'running'",
            time.time(),
            progress,
            stage,
            job_id,
            worker,
        )
        rows = await self.driver.fetch("SELECT state, worker FROM jobs WHERE id = ?", job_id)
        if not rows or rows[0]["worker"] != worker:
            return None
        state: State = rows[0]["state"]
        return state

    async def length(self, job_id: int, worker: str, total_s: float) -> None:
        """A recording's length, once its decoder knows it."""
        await self.driver.execute(
            "UPDATE jobs SET total_s = ? WHERE id = ? AND worker = ?", total_s, job_id, worker
        )

    async def finish(
        self,
        job_id: int,
        worker: str,
        state: State,
        *,
        error: str | None = None,
        result: str | None = None,
        source_id: str | None = None,
        segments: int = 0,
        kind: Kind | None = None,
        detail: str | None = None,
    ) -> bool:
        """End this worker's run of a job (done, failed or cancelled); False when the job is
        no longer this worker's (taken over) or was cancelled meanwhile."""
        rows = await self.driver.fetch(
            "UPDATE jobs SET state = ?, error = ?, result = ?, source_id = ?, segments = ?, "
            "detail = ?, kind = COALESCE(?, kind), finished_at = ?, "
            "progress = CASE WHEN ? = 'done' THEN 1 ELSE progress END, "
            "stage = CASE WHEN ? = 'done' THEN NULL ELSE stage END "
            "WHERE id = ? AND worker = ? AND state = 'running' "
            "RETURNING id",
            state,
            sentence(error) if error else None,
            result,
            source_id,
            segments,
            detail,
            kind,
            time.time(),
            state,
            state,
            job_id,
            worker,
        )
        return bool(rows)

    async def later(self, job_id: int, worker: str, delay_s: float, error: str) -> bool:
        """Queue this worker's run of a job again after ``delay_s`` (a retry with backoff)."""
        rows = await self.driver.fetch(
            "UPDATE jobs SET state = 'queued', run_after = ?, error = ?, worker = NULL "
            "WHERE id = ? AND worker = ? AND state = 'running' RETURNING id",
            time.time() + delay_s,
            sentence(error),
            job_id,
            worker,
        )
        return bool(rows)

    async def fail_exhausted(self, timeout_s: float, attempts: int) -> list[int]:
        """Fail the jobs whose worker died on their last allowed attempt."""
        rows = await self.driver.fetch(
            "UPDATE jobs SET state = 'failed', finished_at = ?, error = ? "
            "WHERE state = 'running' AND heartbeat_at < ? AND attempts >= ? RETURNING id",
            time.time(),
            f"its worker stopped {attempts} times while running it (out of memory, or killed); "
            "`quorum jobs retry ID` tries again",
            time.time() - timeout_s,
            attempts,
        )
        return [int(r["id"]) for r in rows]

    async def cancel(self, job_id: int, kb: str | None = None) -> Job | None:
        """Cancel a queued or running job (a running one stops at its next heartbeat);
        the job as it now stands, None when there is no such job."""
        scope, args = ("AND kb = ? ", [kb]) if kb is not None else ("", [])
        await self.driver.execute(
            "UPDATE jobs SET state = 'cancelled', finished_at = ? "
            f"WHERE id = ? {scope}AND state IN ('queued', 'running')",
            time.time(),
            job_id,
            *args,
        )
        job = await self.get(job_id)
        return job if job is not None and (kb is None or job.kb == kb) else None

    async def retry(self, job_id: int) -> Job | None:
        """Queue a failed or cancelled job again, its attempts counted afresh; the job as
        it now stands (still finished when another job holds its key, or its source was
        forgotten: its file is no longer known), None if unknown."""
        async with self.driver.transaction() as tx:
            rows = await tx.fetch(
                "SELECT dedupe_key FROM jobs WHERE id = ? AND state IN ('failed', 'cancelled') "
                "AND file <> ?",
                job_id,
                FORGOTTEN,
            )
            busy = rows and await tx.fetch(
                "SELECT id FROM jobs WHERE dedupe_key = ? AND state IN ('queued', 'running')",
                rows[0]["dedupe_key"],
            )
            if rows and not busy:
                await tx.execute(
                    "UPDATE jobs SET state = 'queued', attempts = 0, error = NULL, worker = NULL, "
                    "progress = 0, stage = NULL, run_after = ?, finished_at = NULL WHERE id = ?",
                    time.time(),
                    job_id,
                )
        return await self.get(job_id)

    async def forget(self, kb: str, source: Source) -> None:
        """A ``ForgetHook``: the finished jobs that added or updated ``source`` in ``kb``
        (and the other finished jobs of the same files) keep that a file was added and
        when, by whom, and forget which: its path, folder, source, error, and the dedupe
        key that hashed its path (a fresh upload of the file is a job of its own). A
        removal's record keeps the source id it was asked for (the removal's audit)."""
        rows = await self.driver.fetch(
            "SELECT DISTINCT file FROM jobs WHERE kb = ? AND source_id = ? AND kind <> 'remove'",
            kb,
            source.id,
        )
        files = [r["file"] for r in rows]
        marks = ", ".join("?" for _ in files) or "NULL"
        await self.driver.execute(
            "UPDATE jobs SET file = ?, root = NULL, source_id = NULL, error = NULL, "
            "dedupe_key = 'forgotten:' || CAST(id AS TEXT) "
            "WHERE kb = ? AND kind <> 'remove' AND state NOT IN ('queued', 'running') "
            f"AND (source_id = ? OR file IN ({marks}))",
            FORGOTTEN,
            kb,
            source.id,
            *files,
        )

    async def stop_writing(self, kb: str, source: Source) -> None:
        """A ``Holdings`` stop: cancel the queued and running jobs of ``kb`` that would write
        ``source`` (by the source id they carry, by a file that wrote it, or by the id the
        indexer gives a file by default, its name's slug), their rows forgetting the file as
        ``forget``'s do. A running one stops at its next heartbeat; one whose write lands
        anyway removes it again (``bot.jobs.runner``)."""
        wrote = await self.driver.fetch(
            "SELECT DISTINCT file FROM jobs WHERE kb = ? AND source_id = ? AND kind <> 'remove'",
            kb,
            source.id,
        )
        files = {source.path, *(r["file"] for r in wrote)}
        rows = await self.driver.fetch(
            "SELECT id, file, source_id FROM jobs WHERE kb = ? AND kind <> 'remove' "
            "AND state IN ('queued', 'running')",
            kb,
        )
        ids = [
            r["id"]
            for r in rows
            if r["source_id"] == source.id
            or r["file"] in files
            # A job that names its source (a connector's, `team-a/notes.md` -> `team-a-notes`)
            # writes that one, whatever its file's name says.
            or (r["source_id"] is None and _named(r["file"]) == source.id)
        ]
        marks = ", ".join("?" for _ in ids) or "NULL"
        await self.driver.execute(
            "UPDATE jobs SET state = 'cancelled', finished_at = ?, error = ?, file = ?, "
            "root = NULL, source_id = NULL, dedupe_key = 'forgotten:' || CAST(id AS TEXT) "
            f"WHERE id IN ({marks}) AND state IN ('queued', 'running')",
            time.time(),
            STOPPED,
            FORGOTTEN,
            *ids,
        )

    async def counts(self) -> dict[State, int]:
        """Jobs by state."""
        rows = await self.driver.fetch("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state")
        found = {r["state"]: int(r["n"]) for r in rows}
        return {s: found.get(s, 0) for s in STATES}

    async def oldest_queued(self) -> Job | None:
        """The job waiting longest, or None."""
        rows = await self.driver.fetch(
            f"SELECT {COLUMNS} FROM jobs WHERE state = 'queued' ORDER BY created_at LIMIT 1"
        )
        return Job.from_row(rows[0]) if rows else None

    async def seconds_by_kind(self, since: float) -> dict[str, list[float]]:
        """Seconds each finished job of a kind ran, since ``since``."""
        rows = await self.driver.fetch(
            "SELECT kind, finished_at - started_at AS s FROM jobs WHERE state = 'done' "
            "AND finished_at > ? AND started_at IS NOT NULL",
            since,
        )
        out: dict[str, list[float]] = {}
        for r in rows:
            out.setdefault(r["kind"], []).append(float(r["s"]))
        return out

    async def seen(self, worker: str, host: str, pid: int, started_at: float) -> None:
        """A worker is alive now."""
        await self.driver.execute(
            "INSERT INTO workers (id, host, pid, started_at, seen_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET seen_at = excluded.seen_at",
            worker,
            host,
            pid,
            started_at,
            time.time(),
        )

    async def gone(self, worker: str) -> None:
        """A worker stopped cleanly."""
        await self.driver.execute("DELETE FROM workers WHERE id = ?", worker)

    async def alive(self, within_s: float) -> list[dict[str, Any]]:
        """The workers seen within ``within_s``: id, host, pid, started_at, seen_at."""
        return await self.driver.fetch(
            "SELECT id, host, pid, started_at, seen_at FROM workers WHERE seen_at >= ? "
            "ORDER BY started_at",
            time.time() - within_s,
        )


def _named(file: str) -> str:
    """The source id the indexer gives ``file`` when its metadata names none."""
    return slug(PurePosixPath(file).stem)[:200].strip("-")


__all__ = ["ACTIVE", "FORGOTTEN", "STOPPED", "JobTable", "sentence"]
