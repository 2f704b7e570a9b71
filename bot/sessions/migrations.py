"""The session store's schema, as numbered migrations applied once each, in order, and
recorded in ``_migrations``. Add a migration at the end; never edit one that shipped."""

from __future__ import annotations

M001_INITIAL = """
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    platform TEXT NOT NULL,
    workspace TEXT NOT NULL,
    channel TEXT NOT NULL,
    thread TEXT NOT NULL,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    UNIQUE (platform, workspace, channel, thread)
);
CREATE TABLE exchanges (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    user TEXT NOT NULL,
    question TEXT NOT NULL,
    standalone_query TEXT,
    answer TEXT NOT NULL,
    kind TEXT NOT NULL,
    mode TEXT NOT NULL,
    sources_json TEXT NOT NULL DEFAULT '[]',
    citations_json TEXT NOT NULL DEFAULT '[]',
    timings_json TEXT NOT NULL DEFAULT '{}',
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    research_trace_json TEXT,
    in_history INTEGER NOT NULL DEFAULT 1,
    created_at REAL NOT NULL
);
CREATE INDEX exchanges_by_session ON exchanges (session_id, id);
CREATE TABLE processed_events (
    platform TEXT NOT NULL,
    event_id TEXT NOT NULL,
    seen_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (platform, event_id)
);
CREATE INDEX processed_events_expiry ON processed_events (expires_at);
CREATE TABLE feedback (
    exchange_id INTEGER NOT NULL REFERENCES exchanges(id) ON DELETE CASCADE,
    user TEXT NOT NULL,
    value INTEGER NOT NULL CHECK (value IN (-1, 1)),
    created_at REAL NOT NULL,
    PRIMARY KEY (exchange_id, user)
);
"""

M002_QUERY_LOG = """
CREATE TABLE query_log (
    id INTEGER PRIMARY KEY,
    kb TEXT NOT NULL,
    query TEXT NOT NULL,
    filters_json TEXT NOT NULL DEFAULT '{}',
    hits INTEGER NOT NULL,
    hit_ids_json TEXT NOT NULL DEFAULT '[]',
    retrieval_ms REAL NOT NULL,
    exchange_id INTEGER REFERENCES exchanges(id) ON DELETE SET NULL,
    created_at REAL NOT NULL
);
CREATE INDEX query_log_by_time ON query_log (created_at);
"""

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("m001_initial", M001_INITIAL),
    ("m002_query_log", M002_QUERY_LOG),
)
