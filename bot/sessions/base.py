"""What every session store offers (``Sessions``) and ``open_sessions``, which picks the
database from ``QUORUM_DATABASE_URL``: none means the SQLite file in the data folder,
``postgresql://`` the shared PostgreSQL store several replicas can use."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from bot.errors import ConfigError
from bot.models import ThreadKey
from bot.sessions.records import (
    EVENT_TTL_S,
    AuditEntry,
    Exchange,
    ExchangeRecord,
    LoggedAnswer,
    QueryRecord,
)

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class Sessions(Protocol):
    """Sessions, history, feedback, processed events and the query log."""

    @property
    def where(self) -> str:
        """Where the store lives (a path, or a URL without its password)."""
        ...

    async def migrate(self) -> list[str]:
        """Apply the migrations not yet recorded; returns the names applied."""
        ...

    async def applied_migrations(self) -> list[str]:
        """Names of the migrations applied, in order."""
        ...

    async def ping(self) -> None:
        """Raise ConfigError when the store cannot answer a query now."""
        ...

    async def add_exchange(
        self, thread: ThreadKey, record: ExchangeRecord, queries: Sequence[QueryRecord] = ()
    ) -> int:
        """Store an exchange in the thread's session (created on first use) with the
        searches it made; returns its id. One drawing on a source removed since
        ``record.asked_at`` is stored without its words."""
        ...

    async def history(self, thread: ThreadKey, turns: int = 5) -> list[Exchange]:
        """The thread's last ``turns`` answered exchanges, oldest first."""
        ...

    async def exchange(self, exchange_id: int) -> dict[str, Any] | None:
        """One stored exchange with its JSON columns decoded (None when unknown)."""
        ...

    async def is_active(self, thread: ThreadKey) -> bool:
        """True when Quorum has answered in this thread."""
        ...

    async def reset(self, thread: ThreadKey) -> None:
        """Forget the thread's history (the exchanges stay, for feedback and the log)."""
        ...

    async def claim_event(self, platform: str, event_id: str, ttl_s: float = EVENT_TTL_S) -> bool:
        """True the first time ``(platform, event_id)`` is seen within ``ttl_s``, in any
        process sharing the store; else False."""
        ...

    async def record_feedback(self, exchange_id: int, user: str, value: int) -> None:
        """Store +1/-1 from ``user`` for an exchange; a second click replaces the first."""
        ...

    async def feedback(self, exchange_id: int) -> dict[str, int]:
        """Each user's vote on an exchange."""
        ...

    async def log_query(self, record: QueryRecord, exchange_id: int | None = None) -> None:
        """Add a search to the query log."""
        ...

    async def recent_queries(self, limit: int = 50) -> list[dict[str, Any]]:
        """The latest query-log rows, newest first."""
        ...

    async def record_audit(self, entry: AuditEntry) -> None:
        """Add an entry to the audit trail (kept beyond the sources it speaks of)."""
        ...

    async def audit(
        self, kb: str | None = None, source_id: str | None = None, limit: int = 100
    ) -> list[AuditEntry]:
        """The latest audit entries (of one knowledge base, one source), newest first."""
        ...

    async def added(self, kb: str) -> dict[str, AuditEntry]:
        """Per source of ``kb``, the audit entry that added it (since its last removal)."""
        ...

    async def old_questions(self, before: float, apply: bool = False) -> dict[str, int]:
        """How many questions (``questions``, with answers and feedback) and searches
        (``searches``) were made before ``before``; deleted too when ``apply``."""
        ...

    async def scrub_answers(self, kb: str, source_id: str) -> int:
        """Stored answers of ``kb`` that cited ``source_id`` keep their question but lose
        the answer, its sources, citations and research trace; returns how many."""
        ...

    async def removed_since(self, kb: str | None, source_ids: set[str], since: float) -> set[str]:
        """Which of ``source_ids`` were removed from ``kb`` (or expired) at or after ``since``."""
        ...

    async def last_removal(self, kb: str) -> float:
        """When a source of ``kb`` was last removed or expired (0 when never)."""
        ...

    async def purge(self) -> None:
        """Leave no scrubbed or deleted words in the database's own files."""
        ...

    async def asked(
        self, kb: str, since: float, until: float, limit: int = 1_000_000
    ) -> list[LoggedAnswer]:
        """The exchanges of ``kb`` in ``[since, until)`` with platform and 👍/👎, oldest first."""
        ...


def check_url(url: str) -> str:
    """``url`` when it names a PostgreSQL database, else the one sentence saying what to set."""
    if not url.startswith(POSTGRES_SCHEMES):
        raise ConfigError(
            "QUORUM_DATABASE_URL must be a postgresql://user:password@host:5432/database URL "
            "(or unset, for the SQLite file in QUORUM_DATA_DIR)."
        )
    return url


@contextlib.asynccontextmanager
async def open_sessions(
    url: str | None, sqlite_path: Path, keep_answers: bool = True
) -> AsyncIterator[Sessions]:
    """The PostgreSQL store at ``url``, or without one the SQLite store at ``sqlite_path``;
    opened, migrated, and closed on exit. Without ``keep_answers`` exchanges are stored
    without their answers' words."""
    if url:
        # Imported here so a SQLite install never loads asyncpg and vice versa.
        from bot.sessions.postgres import PostgresSessionStore

        async with PostgresSessionStore.open(check_url(url), keep_answers) as pg:
            yield pg
    else:
        from bot.sessions.sqlite import SessionStore  # aiosqlite: not for PostgreSQL

        async with SessionStore.open(sqlite_path, keep_answers) as lite:
            yield lite
