"""The session store: thread -> session, its exchanges (the history follow-ups are
rewritten from), feedback, the query log, and the exactly-once claims of events.
``base`` says what a store offers and opens one by URL; ``sql`` is the one store, written
once over a thin driver seam; ``sqlite`` (the default) and ``postgres`` (shared by
replicas) are its two drivers behind ``driver``'s seam, ``migrations`` their one schema,
``records`` what they keep, ``privacy`` the audit trail and what forgetting and retention
do to stored questions."""

from typing import TYPE_CHECKING

from bot.models import Actor
from bot.sessions.base import Sessions, open_sessions
from bot.sessions.migrations import MIGRATIONS
from bot.sessions.records import (
    EVENT_TTL_S,
    AuditEntry,
    Exchange,
    ExchangeRecord,
    QueryRecord,
    clip,
)

if TYPE_CHECKING:
    from bot.sessions.sqlite import SessionStore

__all__ = [
    "EVENT_TTL_S",
    "MIGRATIONS",
    "Actor",
    "AuditEntry",
    "Exchange",
    "ExchangeRecord",
    "QueryRecord",
    "SessionStore",
    "Sessions",
    "clip",
    "open_sessions",
]


def __getattr__(name: str) -> object:
    # The SQLite store loads on first use: the quick path imports this package for its
    # records, and should not pull in a database driver (and its SQL) to do so.
    if name == "SessionStore":
        from bot.sessions.sqlite import SessionStore  # the SQLite driver: on first use (see above)

        return SessionStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
