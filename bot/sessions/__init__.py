"""The session store: thread -> session, its exchanges (the history follow-ups are
rewritten from), feedback, the query log, and the exactly-once claims of events.
``sqlite`` is the store, ``migrations`` its schema, ``records`` what it keeps."""

from bot.sessions.migrations import MIGRATIONS
from bot.sessions.records import Exchange, ExchangeRecord, QueryRecord, clip
from bot.sessions.sqlite import EVENT_TTL_S, SessionStore

__all__ = [
    "EVENT_TTL_S",
    "MIGRATIONS",
    "Exchange",
    "ExchangeRecord",
    "QueryRecord",
    "SessionStore",
    "clip",
]
