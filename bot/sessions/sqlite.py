"""The SQLite session store (aiosqlite, one file, WAL): thread -> session, its exchanges (the
history follow-ups are rewritten from), feedback, the query log, and the processed event
ids that give the adapters exactly-once handling of redelivered events.

The schema is built by numbered migrations (``m001_initial``, ...) recorded in the
``_migrations`` table, each applied once in its own transaction, like llm's
``migrations.py``. Questions and answers live here, never in the logs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from functools import update_wrapper
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import aiosqlite

from bot.errors import ConfigError, InvalidInput
from bot.models import ThreadKey
from bot.sessions.migrations import LEDGER, MIGRATIONS, statements
from bot.sessions.records import (
    EXCHANGE_COLUMNS,
    HISTORY_KINDS,
    Exchange,
    ExchangeRecord,
    QueryRecord,
    as_json,
)
from bot.sessions.store import EVENT_TTL_S


def unusable(path: Path, exc: BaseException) -> ConfigError:
    """The one sentence for a session database that cannot be opened or is damaged."""
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return ConfigError(
        f"The session database {path} cannot be used ({reason}). Move it aside to start "
        "afresh, or point QUORUM_DATA_DIR at a writable folder."
    )


P = ParamSpec("P")
R = TypeVar("R")


def _translated(
    method: Callable[Concatenate[SessionStore, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[SessionStore, P], Coroutine[Any, Any, R]]:
    """SQLite's errors (a damaged, read-only or vanished file) become the one sentence of
    ``unusable`` instead of escaping as tracebacks."""

    async def wrapper(self: SessionStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return await method(self, *args, **kwargs)
        except sqlite3.Error as exc:
            raise unusable(self.path, exc) from exc

    update_wrapper(wrapper, method)  # the method's name and docstring
    return wrapper


class SessionStore:
    """Sessions, history, feedback, processed events and the query log in one SQLite file."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path
        # One connection is shared by every coroutine: a lock keeps multi-statement
        # transactions from interleaving.
        self._lock = asyncio.Lock()
        self._last_prune = 0.0

    @property
    def where(self) -> str:
        """The database file."""
        return str(self.path)

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, path: Path) -> AsyncIterator[SessionStore]:
        """Open (creating and migrating) the store at ``path``; close it on exit."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Opened once with the stdlib first: when aiosqlite's own connect fails, its
            # worker thread can outlive the event loop and die with a stray traceback.
            await asyncio.to_thread(lambda: sqlite3.connect(path).close())
            db = await aiosqlite.connect(path, isolation_level=None)
        except (OSError, sqlite3.Error) as exc:
            raise unusable(path, exc) from exc
        try:
            try:
                db.row_factory = sqlite3.Row
                await db.execute("PRAGMA journal_mode=WAL")
                await db.execute("PRAGMA synchronous=NORMAL")
                await db.execute("PRAGMA foreign_keys=ON")
                await db.execute("PRAGMA busy_timeout=5000")
                store = cls(db, path)
                await store.migrate()
            except sqlite3.Error as exc:
                raise unusable(path, exc) from exc
            yield store
        finally:
            await db.close()

    async def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded; returns the names applied."""
        async with self._lock:
            for statement in statements(LEDGER, "sqlite"):
                await self._db.execute(statement)
            async with self._db.execute("SELECT name FROM _migrations") as cur:
                done = {row[0] for row in await cur.fetchall()}
            applied: list[str] = []
            for name, sql in MIGRATIONS:
                if name in done:
                    continue
                await self._db.execute("BEGIN IMMEDIATE")
                try:
                    for statement in statements(sql, "sqlite"):
                        await self._db.execute(statement)
                    await self._db.execute(
                        "INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                        (name, time.time()),
                    )
                    await self._db.execute("COMMIT")
                except BaseException:
                    await self._db.execute("ROLLBACK")
                    raise
                applied.append(name)
            return applied

    @_translated
    async def applied_migrations(self) -> list[str]:
        """Names of the migrations applied, in order."""
        async with self._db.execute("SELECT name FROM _migrations ORDER BY name") as cur:
            return [row[0] for row in await cur.fetchall()]

    @_translated
    async def ping(self) -> None:
        """Raise ConfigError when the file cannot answer a query now."""
        async with self._db.execute("SELECT 1") as cur:
            await cur.fetchone()

    async def _session_id(self, thread: ThreadKey, create: bool) -> int | None:
        key = (thread.platform, thread.workspace, thread.channel, thread.thread)
        now = time.time()
        if create:
            await self._db.execute(
                "INSERT INTO sessions (platform, workspace, channel, thread, created_at,"
                " updated_at) VALUES (?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (platform, workspace, channel, thread)"
                " DO UPDATE SET updated_at = excluded.updated_at",
                (*key, now, now),
            )
        async with self._db.execute(
            "SELECT id FROM sessions WHERE platform = ? AND workspace = ? AND channel = ?"
            " AND thread = ?",
            key,
        ) as cur:
            row = await cur.fetchone()
        return None if row is None else int(row[0])

    @_translated
    async def add_exchange(self, thread: ThreadKey, record: ExchangeRecord) -> int:
        """Store an exchange in the thread's session (created on first use); returns its id."""
        async with self._lock:
            await self._db.execute("BEGIN IMMEDIATE")
            try:
                session_id = await self._session_id(thread, create=True)
                assert session_id is not None  # just inserted or updated, in this transaction
                row = record.row(session_id, time.time())
                cur = await self._db.execute(
                    f"INSERT INTO exchanges ({EXCHANGE_COLUMNS})"
                    f" VALUES ({', '.join('?' * len(row))})",
                    row,
                )
                await self._db.execute("COMMIT")
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise
        assert cur.lastrowid is not None
        return int(cur.lastrowid)

    @_translated
    async def history(self, thread: ThreadKey, turns: int = 5) -> list[Exchange]:
        """The thread's last ``turns`` answered exchanges, oldest first."""
        if turns <= 0:
            return []
        marks = ", ".join("?" for _ in HISTORY_KINDS)
        async with self._db.execute(
            "SELECT e.id, e.question, e.standalone_query, e.answer, e.kind, e.mode, e.created_at"
            " FROM exchanges e JOIN sessions s ON s.id = e.session_id"
            " WHERE s.platform = ? AND s.workspace = ? AND s.channel = ? AND s.thread = ?"
            f" AND e.in_history = 1 AND e.kind IN ({marks})"
            " ORDER BY e.id DESC LIMIT ?",
            (
                thread.platform,
                thread.workspace,
                thread.channel,
                thread.thread,
                *HISTORY_KINDS,
                turns,
            ),
        ) as cur:
            rows = await cur.fetchall()
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
            for r in reversed(list(rows))
        ]

    @_translated
    async def exchange(self, exchange_id: int) -> dict[str, Any] | None:
        """One stored exchange with its JSON columns decoded (None when unknown)."""
        async with self._db.execute("SELECT * FROM exchanges WHERE id = ?", (exchange_id,)) as cur:
            row = await cur.fetchone()
        if row is None:
            return None
        out = dict(row)
        for col in ("sources_json", "citations_json", "timings_json", "research_trace_json"):
            raw = out.pop(col)
            out[col.removesuffix("_json")] = None if raw is None else json.loads(raw)
        return out

    @_translated
    async def is_active(self, thread: ThreadKey) -> bool:
        """True when Quorum has answered in this thread."""
        async with self._db.execute(
            "SELECT 1 FROM exchanges e JOIN sessions s ON s.id = e.session_id"
            " WHERE s.platform = ? AND s.workspace = ? AND s.channel = ? AND s.thread = ? LIMIT 1",
            (thread.platform, thread.workspace, thread.channel, thread.thread),
        ) as cur:
            return await cur.fetchone() is not None

    @_translated
    async def reset(self, thread: ThreadKey) -> None:
        """Forget the thread's history (the exchanges stay, for feedback and the log)."""
        async with self._lock:
            session_id = await self._session_id(thread, create=False)
            if session_id is not None:
                await self._db.execute(
                    "UPDATE exchanges SET in_history = 0 WHERE session_id = ?", (session_id,)
                )

    @_translated
    async def claim_event(self, platform: str, event_id: str, ttl_s: float = EVENT_TTL_S) -> bool:
        """True the first time ``(platform, event_id)`` is seen within ``ttl_s``, else False.

        One statement does the claim, so two deliveries racing (even from two processes)
        cannot both win: the insert succeeds, or an expired row is taken over, or nothing
        changes and the rowcount is 0.
        """
        now = time.time()
        async with self._lock:
            cur = await self._db.execute(
                "INSERT INTO processed_events (platform, event_id, seen_at, expires_at)"
                " VALUES (?, ?, ?, ?) ON CONFLICT (platform, event_id) DO UPDATE"
                " SET seen_at = excluded.seen_at, expires_at = excluded.expires_at"
                " WHERE processed_events.expires_at <= excluded.seen_at",
                (platform, event_id, now, now + ttl_s),
            )
            claimed = cur.rowcount == 1
            if now - self._last_prune > 60:
                self._last_prune = now
                await self._db.execute("DELETE FROM processed_events WHERE expires_at <= ?", (now,))
        return claimed

    @_translated
    async def record_feedback(self, exchange_id: int, user: str, value: int) -> None:
        """Store +1/-1 from ``user`` for an exchange; a second click replaces the first."""
        if value not in (-1, 1):
            raise InvalidInput(f"Feedback is +1 or -1, not {value}.")
        async with self._lock:
            try:
                await self._db.execute(
                    "INSERT INTO feedback (exchange_id, user, value, created_at)"
                    " VALUES (?, ?, ?, ?) ON CONFLICT (exchange_id, user)"
                    " DO UPDATE SET value = excluded.value, created_at = excluded.created_at",
                    (exchange_id, user, value, time.time()),
                )
            except sqlite3.IntegrityError:
                raise InvalidInput(
                    "That answer is no longer known, so it can't be rated."
                ) from None

    @_translated
    async def feedback(self, exchange_id: int) -> dict[str, int]:
        """Each user's vote on an exchange."""
        async with self._db.execute(
            "SELECT user, value FROM feedback WHERE exchange_id = ? ORDER BY user", (exchange_id,)
        ) as cur:
            return {r["user"]: int(r["value"]) for r in await cur.fetchall()}

    @_translated
    async def log_query(self, record: QueryRecord, exchange_id: int | None = None) -> None:
        """Add a search to the query log."""
        async with self._lock:
            await self._db.execute(
                "INSERT INTO query_log (kb, query, filters_json, hits, hit_ids_json,"
                " retrieval_ms, exchange_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.kb,
                    record.query,
                    as_json(record.filters),
                    len(record.hit_ids),
                    as_json(list(record.hit_ids)),
                    record.retrieval_ms,
                    exchange_id,
                    time.time(),
                ),
            )

    @_translated
    async def recent_queries(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest query-log rows, newest first."""
        async with self._db.execute(
            "SELECT * FROM query_log ORDER BY id DESC LIMIT ?", (limit,)
        ) as cur:
            rows = await cur.fetchall()
        out = []
        for row in rows:
            item = dict(row)
            item["filters"] = json.loads(item.pop("filters_json"))
            item["hit_ids"] = json.loads(item.pop("hit_ids_json"))
            out.append(item)
        return out
