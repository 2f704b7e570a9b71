"""The session stores, SQLite and PostgreSQL (a real server), through the same tests:
schema from numbered migrations, history that survives a restart, threads kept apart,
atomic event claims (two stores on one database stand for two replicas), feedback, the
query log; and PostgreSQL's failures as one sentence."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest

from bot.errors import ConfigError, DatabaseUnavailable, InvalidInput
from bot.models import ThreadKey
from bot.sessions import MIGRATIONS, ExchangeRecord, QueryRecord, Sessions, SessionStore
from bot.sessions.postgres import PostgresSessionStore
from tests.postgres_server import PASSWORD, Postgres, free_port, running_postgres

Opener = Callable[[], contextlib.AbstractAsyncContextManager[Sessions]]

T1 = ThreadKey("slack", "T1", "C1", "1700000000.000100")
T2 = ThreadKey("slack", "T1", "C1", "1700000000.000200")


def record(question: str, answer: str = "An answer [1].", kind: str = "answer") -> ExchangeRecord:
    return ExchangeRecord(
        user="U1",
        question=question,
        answer=answer,
        kind=kind,
        mode="quick",
        standalone_query=f"standalone {question}",
        sources=[{"n": 1, "title": "Auth kickoff", "link": "https://x?t=5s"}],
        citations=[{"n": 1}],
        timings={"total": 12.5},
        input_tokens=100,
        output_tokens=20,
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens a store on one database (the same one each call, as after a restart)."""
    if request.param == "sqlite":
        path = tmp_path / "s.sqlite3"
        return lambda: SessionStore.open(path)
    url: str = request.getfixturevalue("postgres_url")
    return lambda: PostgresSessionStore.open(url)


async def test_schema_from_numbered_migrations(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite3"
    async with SessionStore.open(path) as store:
        assert await store.applied_migrations() == [name for name, _ in MIGRATIONS]
        assert await store.migrate() == []  # nothing left to apply
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert tables >= {
            "_migrations",
            "sessions",
            "exchanges",
            "processed_events",
            "feedback",
            "query_log",
        }

        def cols(table: str) -> set[str]:
            return {r[1] for r in db.execute(f"PRAGMA table_info({table})")}

        assert cols("sessions") >= {"platform", "workspace", "channel", "thread"}
        assert cols("exchanges") >= {
            "question",
            "standalone_query",
            "answer",
            "sources_json",
            "mode",
            "timings_json",
            "input_tokens",
            "output_tokens",
            "research_trace_json",
        }
        assert cols("processed_events") >= {"platform", "event_id", "expires_at"}
        assert cols("feedback") >= {"exchange_id", "user", "value"}
        assert cols("query_log") >= {"query", "filters_json", "hits", "retrieval_ms"}
        uniques = [r for r in db.execute("PRAGMA index_list(sessions)") if r[2]]
        assert uniques, "a thread key maps to one session"


async def test_history_survives_a_restart(open_store: Opener) -> None:
    async with open_store() as store:
        first = await store.add_exchange(T1, record("What did John say about Auth0?"))
        await store.add_exchange(T1, record("What problems did he mention?"))
    async with open_store() as store:
        history = await store.history(T1)
        assert [h.question for h in history] == [
            "What did John say about Auth0?",
            "What problems did he mention?",
        ]
        assert history[0].id == first
        assert history[0].standalone_query == "standalone What did John say about Auth0?"
        stored = await store.exchange(first)
        assert stored is not None
        assert stored["sources"][0]["title"] == "Auth kickoff"
        assert stored["timings"] == {"total": 12.5}
        assert stored["input_tokens"] == 100 and stored["research_trace"] is None


async def test_threads_never_share_history(open_store: Opener) -> None:
    async with open_store() as store:
        await store.add_exchange(T1, record("in thread one"))
        await store.add_exchange(T2, record("in thread two"))
        other_channel = ThreadKey("slack", "T1", "C2", T1.thread)
        other_platform = ThreadKey("discord", "T1", "C1", T1.thread)
        assert [h.question for h in await store.history(T1)] == ["in thread one"]
        assert [h.question for h in await store.history(T2)] == ["in thread two"]
        assert await store.history(other_channel) == []
        assert await store.history(other_platform) == []
        assert await store.is_active(T1) and not await store.is_active(other_channel)


async def test_history_keeps_the_last_n_and_skips_help_and_errors(open_store: Opener) -> None:
    async with open_store() as store:
        for i in range(7):
            await store.add_exchange(T1, record(f"q{i}"))
        await store.add_exchange(T1, record("hi", kind="help"))
        await store.add_exchange(T1, record("broken", kind="error"))
        assert [h.question for h in await store.history(T1, 5)] == ["q2", "q3", "q4", "q5", "q6"]
        assert await store.history(T1, 0) == []


async def test_reset_forgets_history_but_keeps_the_thread_active(open_store: Opener) -> None:
    async with open_store() as store:
        eid = await store.add_exchange(T1, record("q1"))
        await store.reset(T1)
        assert await store.history(T1) == []
        assert await store.is_active(T1)
        assert await store.exchange(eid) is not None
        await store.add_exchange(T1, record("q2"))
        assert [h.question for h in await store.history(T1)] == ["q2"]
        await store.reset(ThreadKey("slack", "x", "y", "z"))  # unknown thread: no error


async def test_claim_event_is_once_even_when_racing(open_store: Opener) -> None:
    async with open_store() as a, open_store() as b:
        results = await asyncio.gather(*(s.claim_event("slack", "Ev1") for s in (a, b, a, b, a, b)))
        assert sorted(results) == [False] * 5 + [True]
        assert await a.claim_event("discord", "Ev1")  # ids are per platform
        # Two replicas handed the same 40 events at once: each is handled exactly once.
        ids = [f"Race{i}" for i in range(40)]
        won = await asyncio.gather(*(s.claim_event("slack", e) for e in ids for s in (a, b)))
        assert sum(won) == len(ids)
        assert all(won[2 * i] != won[2 * i + 1] for i in range(len(ids)))
    async with open_store() as c:
        assert not await c.claim_event("slack", "Ev1")  # survives a restart


async def test_claim_event_expires(open_store: Opener) -> None:
    async with open_store() as store:
        assert await store.claim_event("slack", "Ev2", ttl_s=0.05)
        assert not await store.claim_event("slack", "Ev2", ttl_s=0.05)
        await asyncio.sleep(0.1)
        assert await store.claim_event("slack", "Ev2", ttl_s=0.05)


async def test_feedback_second_click_replaces(open_store: Opener) -> None:
    async with open_store() as store:
        eid = await store.add_exchange(T1, record("q"))
        await store.record_feedback(eid, "U1", 1)
        await store.record_feedback(eid, "U2", 1)
        await store.record_feedback(eid, "U1", -1)
        assert await store.feedback(eid) == {"U1": -1, "U2": 1}
        with pytest.raises(InvalidInput):
            await store.record_feedback(eid, "U1", 5)
        with pytest.raises(InvalidInput):
            await store.record_feedback(eid + 100, "U1", 1)


async def test_query_log(open_store: Opener) -> None:
    async with open_store() as store:
        eid = await store.add_exchange(T1, record("q"))
        await store.log_query(
            QueryRecord("kb1", "auth0 cost", {"speaker": "John Park"}, ["h1", "h2"], 12.3), eid
        )
        (row,) = await store.recent_queries()
        assert row["query"] == "auth0 cost" and row["hits"] == 2
        assert row["filters"] == {"speaker": "John Park"} and row["hit_ids"] == ["h1", "h2"]
        assert row["retrieval_ms"] == 12.3 and row["exchange_id"] == eid


async def test_postgres_schema_from_the_same_migrations(postgres_url: str) -> None:
    async with PostgresSessionStore.open(postgres_url) as store:
        assert await store.applied_migrations() == [name for name, _ in MIGRATIONS]
        assert await store.migrate() == []
    conn = await asyncpg.connect(postgres_url)
    try:
        rows = await conn.fetch(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = 'public'"
        )
    finally:
        await conn.close()
    types = {(r["table_name"], r["column_name"]): r["data_type"] for r in rows}
    assert {t for t, _ in types} >= {
        "_migrations",
        "sessions",
        "exchanges",
        "processed_events",
        "feedback",
        "query_log",
    }
    # Timestamps keep sub-second precision (PostgreSQL's REAL would round to ~2 minutes).
    assert types[("exchanges", "created_at")] == "double precision"
    assert types[("processed_events", "expires_at")] == "double precision"
    assert types[("feedback", "user")] == "text"


async def test_replicas_starting_together_migrate_once(postgres_url: str) -> None:
    async def start() -> list[str]:
        async with PostgresSessionStore.open(postgres_url) as store:
            return await store.applied_migrations()

    results = await asyncio.gather(*(start() for _ in range(4)))
    assert results == [[name for name, _ in MIGRATIONS]] * 4


async def test_postgres_failures_are_one_sentence(postgres: Postgres, postgres_url: str) -> None:
    """Server down, wrong password, missing database, bad URL: a ConfigError naming the
    setting, without the password."""
    wrong_password = postgres_url.replace(PASSWORD, "not-the-password")
    cases = {
        f"postgresql://quorum:{PASSWORD}@127.0.0.1:{free_port()}/quorum": "connection refused",
        wrong_password: "login was refused",
        postgres.url("no_such_db"): "no such database",
        "postgresql://quorum@127.0.0.1:port/db": "not a valid URL",
    }
    for url, reason in cases.items():
        with pytest.raises(ConfigError) as caught:
            async with PostgresSessionStore.open(url):
                pass
        message = str(caught.value)
        assert reason in message and "QUORUM_DATABASE_URL" in message
        assert PASSWORD not in message and "\n" not in message


async def test_a_dropped_connection_is_replaced(postgres_url: str) -> None:
    """PostgreSQL restarting (or a proxy cutting idle connections) costs no answer."""
    async with PostgresSessionStore.open(postgres_url) as store:
        await store.add_exchange(T1, record("before"))
        admin = await asyncpg.connect(postgres_url.rsplit("/", 1)[0] + "/postgres")
        try:
            killed = await admin.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = $1",
                postgres_url.rsplit("/", 1)[1],
            )
        finally:
            await admin.close()
        assert killed >= 1
        assert [h.question for h in await store.history(T1)] == ["before"]


async def test_a_stopped_server_is_one_sentence() -> None:
    with running_postgres() as own:
        url = await own.create_database()
        store_cm = PostgresSessionStore.open(url)
        store = await store_cm.__aenter__()
        await store.ping()
    try:  # the server is stopped now
        # Worth trying again (a job is retried, not failed as if a setting were wrong).
        with pytest.raises(DatabaseUnavailable, match="out of reach.*QUORUM_DATABASE_URL"):
            await store.history(T1)
        with pytest.raises(DatabaseUnavailable, match="out of reach"):
            await store.ping()
    finally:
        await store_cm.__aexit__(None, None, None)
