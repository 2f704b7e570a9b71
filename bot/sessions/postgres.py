"""The PostgreSQL session store (asyncpg, a connection pool): the same sessions, history,
feedback, query log and exactly-once event claims as the SQLite store, shared by every
replica that points ``QUORUM_DATABASE_URL`` at the same database.

The schema comes from the same numbered migrations (``bot.sessions.migrations``). Replicas
starting together take a transaction-scoped advisory lock before migrating, so each
migration runs once. An event claim is one ``INSERT ... ON CONFLICT`` whose row count
says who won: PostgreSQL makes the second inserter of a key wait for the first to commit
and then see its row, so two processes never both get True.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from functools import update_wrapper
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg

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

CONNECT_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 30.0
MIGRATION_LOCK = 0x51_55_4F_52  # "QUOR": one advisory lock id for every replica's migrations

# Everything asyncpg or the network can raise about the server, the URL or the login.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
    ValueError,  # a URL asyncpg cannot parse (a port that is not a number, ...)
)


def redacted(url: str) -> str:
    """``url`` without its password, for messages and logs."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        if parts.username:
            netloc = f"{parts.username}@{netloc}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    except ValueError:
        return "QUORUM_DATABASE_URL"


def _reason(exc: BaseException) -> str:
    if isinstance(exc, asyncpg.InvalidAuthorizationSpecificationError):  # bad password too
        return f"the login was refused: {exc}"
    if isinstance(exc, asyncpg.InvalidCatalogNameError):
        return f"no such database: {exc}"
    if isinstance(exc, TimeoutError):
        return "the server did not answer in time"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused: is PostgreSQL running there?"
    if isinstance(exc, ValueError):
        return f"not a valid URL: {exc}"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def unusable(url: str, exc: BaseException) -> ConfigError:
    """The one sentence for a PostgreSQL store that cannot be reached or used."""
    return ConfigError(
        f"The session database {redacted(url)} cannot be used ({_reason(exc)}). "
        "Check QUORUM_DATABASE_URL (postgresql://user:password@host:5432/database) and "
        "that the server is up."
    )


P = ParamSpec("P")
R = TypeVar("R")


# A connection the server closed (restart, failover, idle cut) shows up as one of these on
# its next use; the pool replaces it, so the call is worth one more try.
DROPPED: tuple[type[BaseException], ...] = (
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.AdminShutdownError,
    asyncpg.InternalClientError,
    asyncpg.InterfaceError,
)


def _translated(
    method: Callable[Concatenate[PostgresSessionStore, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[PostgresSessionStore, P], Coroutine[Any, Any, R]]:
    """Tried again once on a dropped connection; the driver's other errors (server gone,
    login refused) become ``unusable``'s sentence."""

    async def wrapper(self: PostgresSessionStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            try:
                return await method(self, *args, **kwargs)
            except DROPPED:
                return await method(self, *args, **kwargs)
        except DRIVER_ERRORS as exc:
            raise unusable(self.url, exc) from exc

    update_wrapper(wrapper, method)
    return wrapper


def _row_count(status: str) -> int:
    """The row count at the end of a command status such as ``INSERT 0 1``."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class PostgresSessionStore:
    """Sessions, history, feedback, processed events and the query log in PostgreSQL."""

    def __init__(self, pool: asyncpg.Pool, url: str) -> None:
        self._pool = pool
        self.url = url
        self._last_prune = 0.0

    @property
    def where(self) -> str:
        """The database URL without its password."""
        return redacted(self.url)

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, url: str) -> AsyncIterator[PostgresSessionStore]:
        """Connect to ``url``, migrate, and close the pool on exit."""
        try:
            pool = await asyncpg.create_pool(
                url,
                min_size=1,
                max_size=10,
                timeout=CONNECT_TIMEOUT_S,
                command_timeout=COMMAND_TIMEOUT_S,
            )
        except DRIVER_ERRORS as exc:
            raise unusable(url, exc) from exc
        try:
            store = cls(pool, url)
            try:
                await store.migrate()
            except DRIVER_ERRORS as exc:
                raise unusable(url, exc) from exc
            yield store
        finally:
            try:
                await asyncio.wait_for(pool.close(), CONNECT_TIMEOUT_S)
            except DRIVER_ERRORS:
                pool.terminate()

    async def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded, each in its own transaction under an
        advisory lock (replicas starting together wait for each other); returns the names
        applied."""
        applied: list[str] = []
        async with self._pool.acquire() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
                for statement in statements(LEDGER, "postgresql"):
                    await conn.execute(statement)
            for name, sql in MIGRATIONS:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
                    if await conn.fetchval("SELECT 1 FROM _migrations WHERE name = $1", name):
                        continue
                    for statement in statements(sql, "postgresql"):
                        await conn.execute(statement)
                    await conn.execute(
                        "INSERT INTO _migrations (name, applied_at) VALUES ($1, $2)",
                        name,
                        time.time(),
                    )
                applied.append(name)
        return applied

    @_translated
    async def applied_migrations(self) -> list[str]:
        """Names of the migrations applied, in order."""
        rows = await self._pool.fetch("SELECT name FROM _migrations ORDER BY name")
        return [row["name"] for row in rows]

    @_translated
    async def ping(self) -> None:
        """Raise ConfigError when the server cannot answer a query now."""
        await self._pool.fetchval("SELECT 1", timeout=CONNECT_TIMEOUT_S)

    @_translated
    async def add_exchange(self, thread: ThreadKey, record: ExchangeRecord) -> int:
        """Store an exchange in the thread's session (created on first use); returns its id."""
        now = time.time()
        async with self._pool.acquire() as conn, conn.transaction():
            session_id = await conn.fetchval(
                "INSERT INTO sessions (platform, workspace, channel, thread, created_at,"
                " updated_at) VALUES ($1, $2, $3, $4, $5, $5)"
                " ON CONFLICT (platform, workspace, channel, thread)"
                " DO UPDATE SET updated_at = excluded.updated_at RETURNING id",
                thread.platform,
                thread.workspace,
                thread.channel,
                thread.thread,
                now,
            )
            row = record.row(session_id, now)
            places = ", ".join(f"${n}" for n in range(1, len(row) + 1))
            exchange_id = await conn.fetchval(
                f"INSERT INTO exchanges ({EXCHANGE_COLUMNS}) VALUES ({places}) RETURNING id",
                *row,
            )
        return int(exchange_id)

    @_translated
    async def history(self, thread: ThreadKey, turns: int = 5) -> list[Exchange]:
        """The thread's last ``turns`` answered exchanges, oldest first."""
        if turns <= 0:
            return []
        rows = await self._pool.fetch(
            "SELECT e.id, e.question, e.standalone_query, e.answer, e.kind, e.mode, e.created_at"
            " FROM exchanges e JOIN sessions s ON s.id = e.session_id"
            " WHERE s.platform = $1 AND s.workspace = $2 AND s.channel = $3 AND s.thread = $4"
            " AND e.in_history = 1 AND e.kind = ANY($5::text[])"
            " ORDER BY e.id DESC LIMIT $6",
            thread.platform,
            thread.workspace,
            thread.channel,
            thread.thread,
            list(HISTORY_KINDS),
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
        row = await self._pool.fetchrow("SELECT * FROM exchanges WHERE id = $1", exchange_id)
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
        found = await self._pool.fetchval(
            "SELECT 1 FROM exchanges e JOIN sessions s ON s.id = e.session_id"
            " WHERE s.platform = $1 AND s.workspace = $2 AND s.channel = $3 AND s.thread = $4"
            " LIMIT 1",
            thread.platform,
            thread.workspace,
            thread.channel,
            thread.thread,
        )
        return found is not None

    @_translated
    async def reset(self, thread: ThreadKey) -> None:
        """Forget the thread's history (the exchanges stay, for feedback and the log)."""
        await self._pool.execute(
            "UPDATE exchanges SET in_history = 0 WHERE session_id IN (SELECT id FROM sessions"
            " WHERE platform = $1 AND workspace = $2 AND channel = $3 AND thread = $4)",
            thread.platform,
            thread.workspace,
            thread.channel,
            thread.thread,
        )

    async def claim_event(self, platform: str, event_id: str, ttl_s: float = EVENT_TTL_S) -> bool:
        """True the first time ``(platform, event_id)`` is seen within ``ttl_s`` by any
        replica, else False: the insert wins, or an expired row is taken over, or the row
        count is 0."""
        return await self._claim(platform, event_id, ttl_s, uuid.uuid4().hex)

    @_translated
    async def _claim(self, platform: str, event_id: str, ttl_s: float, claimant: str) -> bool:
        # ``claimant`` is fixed before a retry, so a claim that committed just as its
        # connection dropped is recognised as this call's own row and still wins.
        now = time.time()
        status = await self._pool.execute(
            "INSERT INTO processed_events (platform, event_id, seen_at, expires_at, claimant)"
            " VALUES ($1, $2, $3, $4, $5) ON CONFLICT (platform, event_id) DO UPDATE"
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
            await self._pool.execute("DELETE FROM processed_events WHERE expires_at <= $1", now)
        return _row_count(status) == 1

    @_translated
    async def record_feedback(self, exchange_id: int, user: str, value: int) -> None:
        """Store +1/-1 from ``user`` for an exchange; a second click replaces the first."""
        if value not in (-1, 1):
            raise InvalidInput(f"Feedback is +1 or -1, not {value}.")
        try:
            await self._pool.execute(
                'INSERT INTO feedback (exchange_id, "user", value, created_at)'
                ' VALUES ($1, $2, $3, $4) ON CONFLICT (exchange_id, "user")'
                " DO UPDATE SET value = excluded.value, created_at = excluded.created_at",
                exchange_id,
                user,
                value,
                time.time(),
            )
        except asyncpg.ForeignKeyViolationError:
            raise InvalidInput("That answer is no longer known, so it can't be rated.") from None

    @_translated
    async def feedback(self, exchange_id: int) -> dict[str, int]:
        """Each user's vote on an exchange."""
        rows = await self._pool.fetch(
            'SELECT "user", value FROM feedback WHERE exchange_id = $1 ORDER BY "user"',
            exchange_id,
        )
        return {r["user"]: int(r["value"]) for r in rows}

    @_translated
    async def log_query(self, record: QueryRecord, exchange_id: int | None = None) -> None:
        """Add a search to the query log."""
        await self._pool.execute(
            "INSERT INTO query_log (kb, query, filters_json, hits, hit_ids_json,"
            " retrieval_ms, exchange_id, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            record.kb,
            record.query,
            as_json(record.filters),
            len(record.hit_ids),
            as_json(list(record.hit_ids)),
            record.retrieval_ms,
            exchange_id,
            time.time(),
        )

    @_translated
    async def recent_queries(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest query-log rows, newest first."""
        rows = await self._pool.fetch("SELECT * FROM query_log ORDER BY id DESC LIMIT $1", limit)
        out = []
        for row in rows:
            item = dict(row)
            item["filters"] = json.loads(item.pop("filters_json"))
            item["hit_ids"] = json.loads(item.pop("hit_ids_json"))
            out.append(item)
        return out
