"""Each connector's status row (``connectors``, migration ``m007_connectors``), in SQL both
databases speak over the sessions' ``Driver``: what `quorum doctor`, `quorum jobs` and
``/metrics`` show, written by whichever process runs the connector.

The same row holds the connector's lease (``holder``, ``lease_until``): a poller takes it
with one conditional ``UPDATE`` whose row count says who won, so with several `quorum
serve` replicas (or workers) one process polls a connector at a time, and another takes
over once the holder stops renewing it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from bot.sessions.driver import Driver

Event = Literal["seen", "queued", "failed", "forgotten"]
"""What a connector counts: files, objects or events it ``seen`` (new or changed), jobs it
``queued``, items that ``failed`` (unreadable, a download or a job that failed), sources it
``forgotten`` (following a delete)."""

EVENTS: tuple[Event, ...] = ("seen", "queued", "failed", "forgotten")
LATE_S = 120.0  # a poll this late (past its next run) is a problem doctor names
MAX_ERROR = 300  # one sentence, whatever an exception put in its message
MIN_WORD = 3  # a forgotten source's name this short is not looked for in last errors

COLUMNS = (
    "name, kind, kb, last_run, next_run, seen, queued, failed, forgotten, last_error, "
    "error_at, cursor, holder, lease_until, updated_at"
)


def _sentence(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= MAX_ERROR else line[: MAX_ERROR - 3] + "..."


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class Counts:
    """How many items a connector has seen, queued, failed and forgotten (ever)."""

    seen: int = 0
    queued: int = 0
    failed: int = 0
    forgotten: int = 0

    def as_dict(self) -> dict[str, int]:
        """The counts by event name."""
        return {e: getattr(self, e) for e in EVENTS}


@dataclass(frozen=True)
class ConnectorStatus:
    """One connector as its status row has it."""

    name: str  # unique: "folder:/srv/recordings", "s3:bucket/prefix", "zoom"
    kind: str  # "folder", "s3", "zoom"
    kb: str  # the knowledge base it feeds (a connector feeding several: its default)
    last_run: float | None  # when it last polled (or handled an event)
    next_run: float | None  # when it polls next (None: it waits for events)
    counts: Counts
    last_error: str | None  # one sentence; cleared by the next run that goes well
    error_at: float | None
    cursor: str | None  # where a listing stands (an S3 pass's start, no key), its own
    holder: str | None  # the process holding its lease
    lease_until: float | None

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> ConnectorStatus:
        """A status from its row."""
        counts = Counts(*(int(row[e]) for e in EVENTS))
        keep = {k: v for k, v in row.items() if k not in EVENTS and k != "updated_at"}
        return cls(counts=counts, **keep)

    def problems(self, now: float | None = None) -> list[str]:
        """What is wrong, one sentence each (empty: nothing)."""
        now = time.time() if now is None else now
        found: list[str] = []
        if self.last_error:
            at = f" (at {_when(self.error_at)})" if self.error_at else ""
            found.append(f"{self.last_error}{at}")
        if self.next_run is not None and now - self.next_run > LATE_S:
            found.append(
                f"It has not polled since {_when(self.last_run or self.next_run)}: "
                "is `quorum serve` running?"
            )
        return found

    def json(self) -> dict[str, Any]:
        """The status as ``quorum jobs --json`` shows it."""
        iso = {
            k: datetime.fromtimestamp(v, UTC).isoformat(timespec="seconds") if v else None
            for k, v in (("last_run", self.last_run), ("next_run", self.next_run))
        }
        return {
            "name": self.name,
            "kind": self.kind,
            "kb": self.kb,
            **iso,
            "counts": self.counts.as_dict(),
            "last_error": self.last_error,
            "cursor": self.cursor,
            "problems": self.problems(),
        }


class ConnectorStatuses:
    """Every connector's status row, and its lease."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    async def register(self, name: str, kind: str, kb: str) -> None:
        """The connector ``name`` exists (its row made, or its kind and kb brought up to
        date); call it once when the connector starts."""
        await self.driver.execute(
            "INSERT INTO connectors (name, kind, kb, updated_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, kb = excluded.kb, "
            "updated_at = excluded.updated_at",
            name,
            kind,
            kb,
            time.time(),
        )

    async def ran(
        self,
        name: str,
        *,
        next_run: float | None = None,
        cursor: str | None = None,
        error: str | None = None,
    ) -> None:
        """A run (a poll, an event handled) ended now: ``next_run`` when the next is due,
        ``cursor`` where the listing resumes (None keeps the old one), ``error`` what went
        wrong in one sentence (None: it went well, and the last error is cleared)."""
        now = time.time()
        await self.driver.execute(
            "UPDATE connectors SET last_run = ?, next_run = ?, cursor = COALESCE(?, cursor), "
            "last_error = ?, error_at = ?, updated_at = ? WHERE name = ?",
            now,
            next_run,
            cursor,
            _sentence(error) if error else None,
            now if error else None,
            now,
            name,
        )

    async def count(self, name: str, event: Event, n: int = 1) -> None:
        """Add ``n`` to one of the connector's counts."""
        if event not in EVENTS:
            raise ValueError(f"unknown event {event!r}")
        await self.driver.execute(
            f"UPDATE connectors SET {event} = {event} + ?, updated_at = ? WHERE name = ?",
            n,
            time.time(),
            name,
        )

    async def error(self, name: str, error: str) -> None:
        """Something went wrong between runs (an event that could not be handled): the
        connector's last error, until a run goes well."""
        now = time.time()
        await self.driver.execute(
            "UPDATE connectors SET last_error = ?, error_at = ?, updated_at = ? WHERE name = ?",
            _sentence(error),
            now,
            now,
            name,
        )

    async def forget(self, words: Iterable[str]) -> int:
        """Clear each last error, and each listing's cursor (one saved with an S3 key, before
        cursors held none), that quotes any of ``words`` (a forgotten source's key, file or
        title): the error spoke of what is gone (the next run says what still fails), and a
        cleared cursor starts the listing's pass again. How many were cleared."""
        said = [w for w in words if len(w) >= MIN_WORD]
        rows = await self.driver.fetch(
            "SELECT name, last_error, cursor FROM connectors "
            "WHERE last_error IS NOT NULL OR cursor IS NOT NULL"
        )
        changed = 0
        for r in rows:
            for column in ("last_error", "cursor"):
                if r[column] and any(w in r[column] for w in said):
                    also = ", error_at = NULL" if column == "last_error" else ""
                    await self.driver.execute(
                        f"UPDATE connectors SET {column} = NULL{also} WHERE name = ?", r["name"]
                    )
                    changed += 1
        return changed

    async def get(self, name: str) -> ConnectorStatus | None:
        """One connector's status, or None."""
        rows = await self.driver.fetch(f"SELECT {COLUMNS} FROM connectors WHERE name = ?", name)
        return ConnectorStatus.from_row(rows[0]) if rows else None

    async def all(self) -> list[ConnectorStatus]:
        """Every connector's status, by name."""
        rows = await self.driver.fetch(f"SELECT {COLUMNS} FROM connectors ORDER BY name")
        return [ConnectorStatus.from_row(r) for r in rows]

    async def lease(self, name: str, holder: str, ttl_s: float) -> bool:
        """Take (or renew) the connector's lease for ``ttl_s``: True when ``holder`` has it
        now, False when another process holds an unexpired one."""
        now = time.time()
        changed = await self.driver.execute(
            "UPDATE connectors SET holder = ?, lease_until = ? WHERE name = ? "
            "AND (holder IS NULL OR holder = ? OR lease_until IS NULL OR lease_until < ?)",
            holder,
            now + ttl_s,
            name,
            holder,
            now,
        )
        return changed > 0

    async def release(self, name: str, holder: str) -> None:
        """Give the lease up (a clean stop), so another process takes over at once."""
        await self.driver.execute(
            "UPDATE connectors SET holder = NULL, lease_until = NULL WHERE name = ? AND holder = ?",
            name,
            holder,
        )
