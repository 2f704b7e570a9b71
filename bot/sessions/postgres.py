"""The session store on PostgreSQL (asyncpg, a connection pool): the SQL store of
``bot.sessions.sql``, shared by every replica that points ``QUORUM_DATABASE_URL`` at the
same database.

Replicas starting together take a transaction-scoped advisory lock before each migration,
so each runs once. PostgreSQL makes the second inserter of a key wait for the first to
commit and then see its row, so two processes never both win an event claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Iterator
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from bot.errors import ConfigError, DatabaseUnavailable
from bot.sessions.driver import Errors, Row
from bot.sessions.migrations import Dialect
from bot.sessions.sql import SqlSessions

CONNECT_TIMEOUT_S = 10.0
COMMAND_TIMEOUT_S = 30.0
MIGRATION_LOCK = 0x51_55_4F_52  # "QUOR": one advisory lock id for every replica's migrations

# Everything asyncpg or the network can raise about the server, the URL or the login.
DRIVER_ERRORS: Errors = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,
    OSError,
    TimeoutError,
    ValueError,  # a URL asyncpg cannot parse (a port that is not a number, ...)
)

# A connection the server closed (restart, failover, idle cut) shows up as one of these on
# its next use; the pool replaces it, so the call is worth one more try.
DROPPED: Errors = (
    asyncpg.ConnectionDoesNotExistError,
    asyncpg.AdminShutdownError,
    asyncpg.InternalClientError,
    asyncpg.InterfaceError,
)


# A server that cannot answer for now: down, restarting, full, too slow, or a lock another
# session holds past ``lock_timeout`` (settable in the URL: ``?lock_timeout=5000``).
UNREACHABLE: Errors = (
    asyncpg.LockNotAvailableError,
    asyncpg.PostgresConnectionError,
    asyncpg.OperatorInterventionError,
    asyncpg.TooManyConnectionsError,
    OSError,
    TimeoutError,
)


class Dropped(DatabaseUnavailable):
    """A connection the server closed (``DROPPED``): the store's call is worth one more try."""


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


def out_of_reach(url: str, exc: BaseException) -> DatabaseUnavailable:
    """The one sentence for a server that cannot answer for now (worth trying again, where
    ``unusable`` is a setting to fix)."""
    cls = Dropped if isinstance(exc, DROPPED) else DatabaseUnavailable
    return cls(
        f"The session database {redacted(url)} is busy or out of reach right now "
        f"({_reason(exc)}); try again in a moment, and check that the server is up and "
        "QUORUM_DATABASE_URL points at it."
    )


@contextlib.contextmanager
def translated(url: str) -> Iterator[None]:
    """A server down, restarting or too slow, or a connection it closed, as
    ``DatabaseUnavailable``; a statement's own errors (a constraint) are left as they are."""
    try:
        yield
    except (*DROPPED, *UNREACHABLE) as exc:
        raise out_of_reach(url, exc) from exc


@lru_cache(maxsize=256)
def numbered(sql: str) -> str:
    """``sql`` with its ``?`` placeholders as PostgreSQL's ``$1``, ``$2``, ..."""
    count = iter(range(1, sql.count("?") + 1))
    return re.sub(r"\?", lambda _: f"${next(count)}", sql)


def row_count(status: str) -> int:
    """The row count at the end of a command status such as ``INSERT 0 1``."""
    last = status.rsplit(" ", 1)[-1]
    return int(last) if last.isdigit() else 0


class _Statements:
    """Statements on a pool or one of its connections (both offer fetch and execute)."""

    def __init__(self, via: asyncpg.Pool | asyncpg.Connection, url: str) -> None:
        self._via = via
        self.url = url

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        with translated(self.url):
            return [dict(row) for row in await self._via.fetch(numbered(sql), *args)]

    async def execute(self, sql: str, *args: Any) -> int:
        with translated(self.url):
            return row_count(await self._via.execute(numbered(sql), *args))


class PostgresDriver(_Statements):
    """A PostgreSQL database behind an asyncpg pool."""

    dialect: Dialect = "postgresql"
    dropped: Errors = (Dropped,)
    errors: Errors = (*DRIVER_ERRORS, DatabaseUnavailable)
    missing_row: Errors = (asyncpg.ForeignKeyViolationError,)
    migration_lock: str | None = f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"

    def __init__(self, pool: asyncpg.Pool, url: str) -> None:
        super().__init__(pool, url)
        self._pool = pool

    @property
    def where(self) -> str:
        """The database URL without its password."""
        return redacted(self.url)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Statements]:
        """A pooled connection inside one transaction."""
        with translated(self.url):  # taking a connection, beginning, committing
            async with self._pool.acquire() as conn, conn.transaction():
                yield _Statements(conn, self.url)

    async def ping(self) -> None:
        with translated(self.url):
            await self._pool.fetchval("SELECT 1", timeout=CONNECT_TIMEOUT_S)

    def unusable(self, exc: BaseException) -> ConfigError:
        return unusable(self.url, exc)

    async def purge(self) -> None:
        """VACUUM the tables a removal rewrites (answers, searches, jobs, connectors'
        items and errors, kept Zoom events): their dead row versions (the words before a
        scrub) are pruned from the tables' pages. The server's own WAL and free space are
        its operator's (see README)."""
        with translated(self.url):
            await self._pool.execute(
                "VACUUM exchanges, query_log, jobs, connector_items, connectors, zoom_recordings"
            )

    @staticmethod
    @contextlib.asynccontextmanager
    async def connect(url: str) -> AsyncIterator[PostgresDriver]:
        """A pool on ``url``, closed on exit (terminated if closing hangs)."""
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
            yield PostgresDriver(pool, url)
        finally:
            try:
                await asyncio.wait_for(pool.close(), CONNECT_TIMEOUT_S)
            except DRIVER_ERRORS:
                pool.terminate()


class PostgresSessionStore(SqlSessions):
    """The session store in PostgreSQL, shared by replicas: ``open(url)`` connects a pool,
    migrates, and closes the pool on exit."""

    @classmethod
    def open(
        cls, url: str, keep_answers: bool = True
    ) -> contextlib.AbstractAsyncContextManager[PostgresSessionStore]:
        return cls.on(PostgresDriver.connect(url), keep_answers)
