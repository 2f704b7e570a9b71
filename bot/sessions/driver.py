"""The seam between the one SQL session store (``bot.sessions.sql``) and a database:
what a driver must offer. Statements are written with ``?`` placeholders; a driver may
renumber them for its database."""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

from bot.errors import ConfigError
from bot.sessions.migrations import Dialect

Row = dict[str, Any]
Errors = tuple[type[BaseException], ...]


class Connection(Protocol):
    """Runs statements written with ``?`` placeholders."""

    async def fetch(self, sql: str, *args: Any) -> list[Row]:
        """The rows a query (or a write's ``RETURNING``) gives, as dicts by column name."""
        ...

    async def execute(self, sql: str, *args: Any) -> int:
        """Run a write; returns how many rows it changed."""
        ...


class Driver(Connection, Protocol):
    """One database as the store sees it."""

    dialect: Dialect
    dropped: Errors
    """Errors of a connection the server closed: the call is worth one more try."""
    errors: Errors
    """Every error the driver raises about the database itself (turned into ``unusable``)."""
    missing_row: Errors
    """The error of a foreign key that names no row."""
    migration_lock: str | None
    """A statement run first in each migration's transaction so processes starting
    together migrate one at a time (None when the transaction already does)."""

    @property
    def where(self) -> str:
        """Where the database lives, without a password."""
        ...

    def transaction(self) -> contextlib.AbstractAsyncContextManager[Connection]:
        """A connection inside one transaction, committed on exit, rolled back on error."""
        ...

    async def ping(self) -> None:
        """Raise a driver error when the database cannot answer now."""
        ...

    async def purge(self) -> None:
        """Leave no deleted or rewritten row's words in the database's files (a WAL
        checkpointed, dead rows vacuumed), as far as the database lets a client."""
        ...

    def unusable(self, exc: BaseException) -> ConfigError:
        """The one sentence for a database that cannot be reached or used."""
        ...
