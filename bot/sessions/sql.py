"""The session store, written once in SQL both databases speak: thread -> session, its
exchanges (the history follow-ups are rewritten from), feedback, the query log, and the
exactly-once claims of redelivered events.

What differs between SQLite and PostgreSQL sits behind ``Driver``, a thin seam: how a
statement reaches the database (one shared connection or a pool), its placeholders (the
store writes ``?``; a driver may renumber them), what a transaction is, the row count of a
write, and which driver errors mean what. ``ON CONFLICT ... DO UPDATE ... WHERE`` and
``RETURNING`` are the same in both, so the store needs no per-dialect conflict clause.

An event claim is one ``INSERT ... ON CONFLICT`` whose row count says who won: the insert,
or the take-over of an expired row, or of this very claim's own row (a claim retried after
its connection dropped as it committed); otherwise nothing changes and the count is 0.
"""

from __future__ import annotations

import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from dataclasses import replace
from functools import update_wrapper
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

import bot.sessions.privacy as privacy
from bot.errors import DatabaseUnavailable, InvalidInput
from bot.models import ThreadKey
from bot.sessions.asked import asked
from bot.sessions.driver import Connection, Driver, Row
from bot.sessions.migrations import LEDGER, MIGRATIONS, statements
from bot.sessions.records import (
    EVENT_TTL_S,
    EXCHANGE_COLUMNS,
    HISTORY_KINDS,
    AuditEntry,
    Exchange,
    ExchangeRecord,
    LoggedAnswer,
    QueryRecord,
    as_json,
    forgotten,
    without_quotes,
)

P = ParamSpec("P")
R = TypeVar("R")


def _translated(
    method: Callable[Concatenate[SqlSessions, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[SqlSessions, P], Coroutine[Any, Any, R]]:
    """Tried again once on a dropped connection; a database locked or out of reach for now
    stays ``DatabaseUnavailable`` (worth trying again); the driver's other errors (a
    damaged file, a login refused) become the driver's ``unusable`` sentence instead of
    escaping as tracebacks."""

    async def wrapper(self: SqlSessions, /, *args: P.args, **kwargs: P.kwargs) -> R:
        driver = self.driver
        try:
            try:
                return await method(self, *args, **kwargs)
            except driver.dropped:
                return await method(self, *args, **kwargs)
        except DatabaseUnavailable:
            raise
        except driver.errors as exc:
            raise driver.unusable(exc) from exc

    update_wrapper(wrapper, method)  # the method's name and docstring
    return wrapper


def _decoded(row: Row, *columns: str) -> Row:
    """``row`` with each ``<name>_json`` column in ``columns`` decoded as ``<name>``."""
    out = dict(row)
    for col in columns:
        raw = out.pop(col)
        out[col.removesuffix("_json")] = None if raw is None else json.loads(raw)
    return out


THREAD_IS = "platform = ? AND workspace = ? AND channel = ? AND thread = ?"


async def _log_query(db: Connection, record: QueryRecord, exchange_id: int | None) -> None:
    await db.execute(
        "INSERT INTO query_log (kb, query, filters_json, hits, hit_ids_json,"
        " retrieval_ms, exchange_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        record.kb,
        record.query,
        as_json(record.filters),
        len(record.hit_ids),
        as_json(list(record.hit_ids)),
        record.retrieval_ms,
        exchange_id,
        time.time(),
    )


def _thread(thread: ThreadKey) -> tuple[str, str, str, str]:
    return (thread.platform, thread.workspace, thread.channel, thread.thread)


class SqlSessions:
    """Sessions, history, feedback, processed events and the query log, on any ``Driver``."""

    def __init__(self, driver: Driver, keep_answers: bool = True) -> None:
        self.driver = driver
        self.keep_answers = keep_answers
        self._last_prune = 0.0

    @property
    def where(self) -> str:
        """Where the store lives (a path, or a URL without its password)."""
        return self.driver.where

    @classmethod
    @contextlib.asynccontextmanager
    async def on(
        cls, connect: contextlib.AbstractAsyncContextManager[Driver], keep_answers: bool = True
    ) -> AsyncIterator[Self]:
        """The store on the driver ``connect`` opens, migrated; the driver closes on exit.
        Without ``keep_answers`` an exchange is stored without its answer's words."""
        async with connect as driver:
            store = cls(driver, keep_answers)
            try:
                await store.migrate()
            except DatabaseUnavailable:
                raise
            except driver.errors as exc:
                raise driver.unusable(exc) from exc
            yield store

    async def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded, each in its own transaction (under the
        driver's migration lock); returns the names applied."""
        driver = self.driver
        # Read first: with nothing pending (every open but the first after an upgrade) no
        # write lock is taken, so a command that only reads (`quorum jobs` in a loop) never
        # holds back a worker's or the bot's writes.
        with contextlib.suppress(*driver.errors):  # no ledger yet: a new database
            done = {r["name"] for r in await driver.fetch("SELECT name FROM _migrations")}
            if all(name in done for name, _ in MIGRATIONS):
                return []
        async with driver.transaction() as tx:
            await self._lock_migrations(tx)
            for statement in statements(LEDGER, driver.dialect):
                await tx.execute(statement)
        applied: list[str] = []
        for name, sql in MIGRATIONS:
            async with driver.transaction() as tx:
                await self._lock_migrations(tx)
                if await tx.fetch("SELECT 1 FROM _migrations WHERE name = ?", name):
                    continue
                for statement in statements(sql, driver.dialect):
                    await tx.execute(statement)
                await tx.execute(
                    "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", name, time.time()
                )
            applied.append(name)
        return applied

    async def _lock_migrations(self, tx: Connection) -> None:
        if self.driver.migration_lock:
            await tx.execute(self.driver.migration_lock)

    @_translated
    async def applied_migrations(self) -> list[str]:
        """Names of the migrations applied, in order."""
        rows = await self.driver.fetch("SELECT name FROM _migrations ORDER BY name")
        return [row["name"] for row in rows]

    @_translated
    async def ping(self) -> None:
        """Raise ConfigError (or DatabaseUnavailable) when the store cannot answer a query now."""
        await self.driver.ping()

    @_translated
    async def add_exchange(
        self, thread: ThreadKey, record: ExchangeRecord, queries: Sequence[QueryRecord] = ()
    ) -> int:
        """Store an exchange in the thread's session (created on first use) with the
        searches it made, in one transaction; returns its id. An exchange drawing on a
        source removed since it was asked is stored without its words (the removal's
        scrub ran before it existed)."""
        now = time.time()
        if not self.keep_answers:
            record = without_quotes(record)
        async with self.driver.transaction() as tx:
            if record.asked_at is not None:
                cited = privacy.cited_ids(list(record.sources), record.research_trace)
                if await privacy.removed_since(tx, record.kb, cited, record.asked_at):
                    record = forgotten(record)
                    queries = [replace(q, query="") for q in queries]
            (session,) = await tx.fetch(
                "INSERT INTO sessions (platform, workspace, channel, thread, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (platform, workspace, channel, thread)"
                " DO UPDATE SET updated_at = excluded.updated_at RETURNING id",
                *_thread(thread),
                now,
                now,
            )
            row = record.row(int(session["id"]), now)
            (inserted,) = await tx.fetch(
                f"INSERT INTO exchanges ({EXCHANGE_COLUMNS})"
                f" VALUES ({', '.join('?' * len(row))}) RETURNING id",
                *row,
            )
            for query in queries:
                await _log_query(tx, query, int(inserted["id"]))
        return int(inserted["id"])

    @_translated
    async def history(self, thread: ThreadKey, turns: int = 5) -> list[Exchange]:
        """The thread's last ``turns`` answered exchanges, oldest first."""
        if turns <= 0:
            return []
        marks = ", ".join("?" for _ in HISTORY_KINDS)
        rows = await self.driver.fetch(
            "SELECT e.id, e.question, e.standalone_query, e.answer, e.kind, e.mode, e.created_at"
            " FROM exchanges e JOIN sessions s ON s.id = e.session_id"
            " WHERE s.platform = ? AND s.workspace = ? AND s.channel = ? AND s.thread = ?"
            f" AND e.in_history = 1 AND e.kind IN ({marks})"
            " ORDER BY e.id DESC LIMIT ?",
            *_thread(thread),
            *HISTORY_KINDS,
            turns,
        )
        return [
            Exchange(
                id=int(r["id"]),
                question=r["question"],
                standalone_query=r["standalone_query"],
                answer=r["answer"],
                kind=r["kind"],
                mode=r["mode"],
                created_at=float(r["created_at"]),
            )
            for r in reversed(rows)
        ]

    @_translated
    async def exchange(self, exchange_id: int) -> dict[str, Any] | None:
        """One stored exchange with its JSON columns decoded (None when unknown)."""
        rows = await self.driver.fetch("SELECT * FROM exchanges WHERE id = ?", exchange_id)
        if not rows:
            return None
        return _decoded(
            rows[0], "sources_json", "citations_json", "timings_json", "research_trace_json"
        )

    @_translated
    async def is_active(self, thread: ThreadKey) -> bool:
        """True when Quorum has answered in this thread."""
        rows = await self.driver.fetch(
            "SELECT 1 FROM exchanges WHERE session_id IN"
            f" (SELECT id FROM sessions WHERE {THREAD_IS}) LIMIT 1",
            *_thread(thread),
        )
        return bool(rows)

    @_translated
    async def reset(self, thread: ThreadKey) -> None:
        """Forget the thread's history (the exchanges stay, for feedback and the log)."""
        await self.driver.execute(
            "UPDATE exchanges SET in_history = 0 WHERE session_id IN"
            f" (SELECT id FROM sessions WHERE {THREAD_IS})",
            *_thread(thread),
        )

    async def claim_event(self, platform: str, event_id: str, ttl_s: float = EVENT_TTL_S) -> bool:
        """True the first time ``(platform, event_id)`` is seen within ``ttl_s``, in any
        process sharing the store; else False."""
        return await self._claim(platform, event_id, ttl_s, uuid.uuid4().hex)

    @_translated
    async def _claim(self, platform: str, event_id: str, ttl_s: float, claimant: str) -> bool:
        # ``claimant`` is fixed before a retry, so a claim that committed just as its
        # connection dropped is recognised as this call's own row and still wins.
        now = time.time()
        changed = await self.driver.execute(
            "INSERT INTO processed_events (platform, event_id, seen_at, expires_at, claimant)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (platform, event_id) DO UPDATE"
            " SET seen_at = excluded.seen_at, expires_at = excluded.expires_at,"
            " claimant = excluded.claimant"
            " WHERE processed_events.expires_at <= excluded.seen_at"
            " OR processed_events.claimant = excluded.claimant",
            platform,
            event_id,
            now,
            now + ttl_s,
            claimant,
        )
        if now - self._last_prune > 60:
            self._last_prune = now
            await self.driver.execute("DELETE FROM processed_events WHERE expires_at <= ?", now)
        return changed == 1

    @_translated
    async def record_feedback(self, exchange_id: int, user: str, value: int) -> None:
        """Store +1/-1 from ``user`` for an exchange; a second click replaces the first."""
        if value not in (-1, 1):
            raise InvalidInput(f"Feedback is +1 or -1, not {value}.")
        try:
            await self.driver.execute(
                'INSERT INTO feedback (exchange_id, "user", value, created_at)'
                ' VALUES (?, ?, ?, ?) ON CONFLICT (exchange_id, "user")'
                " DO UPDATE SET value = excluded.value, created_at = excluded.created_at",
                exchange_id,
                user,
                value,
                time.time(),
            )
        except self.driver.missing_row:
            raise InvalidInput("That answer is no longer known, so it can't be rated.") from None

    @_translated
    async def feedback(self, exchange_id: int) -> dict[str, int]:
        """Each user's vote on an exchange."""
        rows = await self.driver.fetch(
            'SELECT "user", value FROM feedback WHERE exchange_id = ? ORDER BY "user"',
            exchange_id,
        )
        return {r["user"]: int(r["value"]) for r in rows}

    @_translated
    async def log_query(self, record: QueryRecord, exchange_id: int | None = None) -> None:
        """Add a search to the query log."""
        await _log_query(self.driver, record, exchange_id)

    @_translated
    async def recent_queries(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest query-log rows, newest first."""
        rows = await self.driver.fetch("SELECT * FROM query_log ORDER BY id DESC LIMIT ?", limit)
        return [_decoded(row, "filters_json", "hit_ids_json") for row in rows]

    @_translated
    async def record_audit(self, entry: AuditEntry) -> None:
        """Add an entry to the audit trail."""
        await privacy.record(self.driver, entry)

    @_translated
    async def audit(
        self, kb: str | None = None, source_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """The latest audit entries, newest first."""
        return await privacy.entries(self.driver, kb, source_id, limit)

    @_translated
    async def added(self, kb: str) -> dict[str, AuditEntry]:
        """Per source of ``kb``, the audit entry that added it."""
        return await privacy.first_added(self.driver, kb)

    @_translated
    async def old_questions(self, before: float, apply: bool = False) -> dict[str, int]:
        """Questions and searches made before ``before`` (deleted when ``apply``)."""
        async with self.driver.transaction() as tx:
            return await privacy.old_questions(tx, before, apply)

    @_translated
    async def scrub_answers(self, kb: str, source_id: str) -> int:
        """Stored answers that cited a forgotten source lose its words; how many."""
        async with self.driver.transaction() as tx:
            return await privacy.scrub_answers(tx, kb, source_id)

    @_translated
    async def removed_since(self, kb: str | None, source_ids: set[str], since: float) -> set[str]:
        """Which of ``source_ids`` were removed from ``kb`` at or after ``since``."""
        return await privacy.removed_since(self.driver, kb, source_ids, since)

    @_translated
    async def last_removal(self, kb: str) -> float:
        """When a source of ``kb`` was last removed or expired (0 when never)."""
        return await privacy.last_removal(self.driver, kb)

    @_translated
    async def purge(self) -> None:
        """Leave no deleted or scrubbed words in the database's own files (``Driver``)."""
        await self.driver.purge()

    @_translated
    async def asked(
        self, kb: str, since: float, until: float, limit: int = 1_000_000
    ) -> list[LoggedAnswer]:
        """The exchanges of ``kb`` in ``[since, until)`` with platform and 👍/👎, oldest first."""
        return await asked(self.driver, kb, since, until, limit)
