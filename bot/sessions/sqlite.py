"""The session store on SQLite (aiosqlite, one file, WAL), the default: the SQL store of
``bot.sessions.sql`` over one shared connection. Questions and answers live here, never
in the logs."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiosqlite

from bot.errors import ConfigError, DatabaseUnavailable
from bot.sessions.driver import Errors, Row
from bot.sessions.migrations import Dialect
from bot.sessions.sql import SqlSessions

log = logging.getLogger(__name__)


def unusable(path: Path, exc: BaseException) -> ConfigError:
    """The one sentence for a session database that cannot be opened or is damaged."""
    reason = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return ConfigError(
        f"The session database {path} cannot be used ({reason}). Move it aside to start "
        "afresh, or point QUORUM_DATA_DIR at a writable folder."
    )


BUSY = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)  # primary codes; extended ones add high bits


def busy(path: Path) -> DatabaseUnavailable:
    """The one sentence for a session database another process holds past the timeout."""
    return DatabaseUnavailable(
        f"The session database {path} is busy (another process holds it); try again in a moment."
    )


@contextlib.contextmanager
def translated(path: Path) -> Iterator[None]:
    """SQLite's "database is locked" (the busy timeout ran out) as ``DatabaseUnavailable``;
    its other errors (a constraint, a damaged file) are left as they are."""
    try:
        yield
    except sqlite3.OperationalError as exc:
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF in BUSY:
            raise busy(path) from exc
        raise


# secure_delete: a deleted or rewritten row's bytes are overwritten, not left in free
# space, so a forgotten source's words in a stored answer are gone from the file.
PRAGMAS = (
    "journal_mode=WAL",
    "synchronous=NORMAL",
    "foreign_keys=ON",
    "busy_timeout=5000",
    "secure_delete=ON",
)


PURGE_TRIES = 8


class _Statements:
    """Statements on the one connection (``?`` is SQLite's own placeholder)."""

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        self._db = db
        self.path = path

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        with translated(self.path):
            async with self._db.execute(sql, args) as cur:
                return [dict(row) for row in await cur.fetchall()]

    async def execute(self, sql: str, *args: Any) -> int:
        with translated(self.path):
            async with self._db.execute(sql, args) as cur:
                return cur.rowcount


class SqliteDriver(_Statements):
    """One SQLite file behind one connection shared by every coroutine: a lock keeps a
    write or a transaction from interleaving with another's."""

    dialect: Dialect = "sqlite"
    dropped: Errors = ()
    errors: Errors = (sqlite3.Error, DatabaseUnavailable)
    missing_row: Errors = (sqlite3.IntegrityError,)
    migration_lock: str | None = None  # BEGIN IMMEDIATE already serialises writers across processes

    def __init__(self, db: aiosqlite.Connection, path: Path) -> None:
        super().__init__(db, path)
        self._lock = asyncio.Lock()

    @property
    def where(self) -> str:
        """The database file."""
        return str(self.path)

    async def ping(self) -> None:
        await self.fetch("SELECT 1")

    def unusable(self, exc: BaseException) -> ConfigError:
        return unusable(self.path, exc)

    async def execute(self, sql: str, *args: Any) -> int:
        async with self._lock:
            return await super().execute(sql, *args)

    async def purge(self) -> None:
        """Copy the WAL into the database file and truncate it: a scrubbed answer's old
        page, still in the WAL until a checkpoint, is gone from every file (freed space in
        the database file itself is zeroed by ``secure_delete``). Another process reading
        at that moment keeps the WAL busy: tried again for a few seconds."""
        for attempt in range(PURGE_TRIES):
            async with self._lock:
                (done,) = await self.fetch("PRAGMA wal_checkpoint(TRUNCATE)")
            if not done["busy"]:
                return
            await asyncio.sleep(0.2 * (attempt + 1))
        log.warning("the session database's WAL stayed busy; it is truncated at the next removal")

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[_Statements]:
        """The connection inside ``BEGIN IMMEDIATE`` ... ``COMMIT``, under the lock."""
        async with self._lock:
            with translated(self.path):  # the lock another process holds is taken here
                await self._db.execute("BEGIN IMMEDIATE")
            try:
                yield _Statements(self._db, self.path)
            except BaseException:
                await self._db.execute("ROLLBACK")
                raise
            with translated(self.path):
                await self._db.execute("COMMIT")

    @staticmethod
    @contextlib.asynccontextmanager
    async def connect(path: Path) -> AsyncIterator[SqliteDriver]:
        """Open (creating) the file at ``path`` in WAL mode; close it on exit."""
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
                for pragma in PRAGMAS:
                    await db.execute(f"PRAGMA {pragma}")
            except sqlite3.Error as exc:
                raise unusable(path, exc) from exc
            yield SqliteDriver(db, path)
        finally:
            await db.close()


class SessionStore(SqlSessions):
    """The session store in one SQLite file: ``open(path)`` creates it if need be, migrates
    it, and closes it on exit."""

    @classmethod
    def open(
        cls, path: Path, keep_answers: bool = True
    ) -> contextlib.AbstractAsyncContextManager[SessionStore]:
        return cls.on(SqliteDriver.connect(path), keep_answers)
