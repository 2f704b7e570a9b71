"""The session store's privacy duties on SQLite and PostgreSQL (a real server): the audit
trail outlives the sources and survives a restart, old questions expire (dry run first),
answers that quoted a forgotten source lose its words, and answers need not be kept."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest

from bot.models import ThreadKey
from bot.sessions import Actor, AuditEntry, ExchangeRecord, QueryRecord, Sessions, SessionStore
from bot.sessions.postgres import PostgresSessionStore

Opener = Callable[..., contextlib.AbstractAsyncContextManager[Sessions]]
T1 = ThreadKey("slack", "T1", "C1", "1700000000.000100")
QUOTE = "the zebra budget is frozen until March"


def answer(source_id: str, question: str = "What about the budget?") -> ExchangeRecord:
    return ExchangeRecord(
        user="U1",
        question=question,
        answer=f"Dana said {QUOTE} [1].",
        kind="answer",
        mode="quick",
        sources=[{"n": 1, "source_id": source_id, "title": "Weekly sync"}],
        kb="kb1",
        citations=[{"n": 1, "quote": QUOTE}],
        research_trace={"calls": [{"source_id": source_id, "text": QUOTE}]},
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens a store on one database (the same one each call, as after a restart)."""
    if request.param == "sqlite":
        path = tmp_path / "s.sqlite3"
        return lambda keep_answers=True: SessionStore.open(path, keep_answers)
    url: str = request.getfixturevalue("postgres_url")
    return lambda keep_answers=True: PostgresSessionStore.open(url, keep_answers)


async def test_the_audit_trail_says_who_did_what_and_outlives_the_source(
    open_store: Opener,
) -> None:
    async with open_store() as store:
        await store.record_audit(
            AuditEntry("added", "kb1", "weekly-sync", Actor("cli", "ana"), "Weekly sync")
        )
        await store.record_audit(
            AuditEntry("updated", "kb1", "weekly-sync", Actor("slack", "U42"), "Weekly sync")
        )
        await store.record_audit(AuditEntry("added", "kb2", "other", Actor("api", "ci-token")))
        await store.record_audit(
            AuditEntry("removed", "kb1", "weekly-sync", Actor("discord", "1234"), "Weekly sync")
        )
    async with open_store() as store:  # after a restart
        trail = await store.audit(kb="kb1")
        assert [(e.action, str(e.actor)) for e in trail] == [
            ("removed", "discord:1234"),
            ("updated", "slack:U42"),
            ("added", "cli:ana"),
        ]
        assert all(e.at > time.time() - 60 and e.title == "Weekly sync" for e in trail)
        assert [e.source_id for e in await store.audit()] == [
            "weekly-sync",
            "other",
            "weekly-sync",
            "weekly-sync",
        ]
        assert len(await store.audit(limit=1)) == 1
        assert list(await store.added("kb1")) == []  # removed since
        (by_api,) = (await store.added("kb2")).values()
        assert by_api.actor == Actor("api", "ci-token")


async def test_old_questions_expire_after_a_dry_run(open_store: Opener) -> None:
    async with open_store() as store:
        old = await store.add_exchange(T1, answer("s1", "an old question"))
        await store.log_query(QueryRecord("kb1", "old search", {}, ["h1"], 1.0), old)
        await store.record_feedback(old, "U1", 1)
        cutoff = time.time() + 0.001
        await asyncio.sleep(0.01)
        new = await store.add_exchange(T1, answer("s1", "a new question"))
        assert await store.old_questions(cutoff) == {"questions": 1, "searches": 1}
        assert await store.exchange(old) is not None  # a dry run deletes nothing
        assert await store.old_questions(cutoff, apply=True) == {"questions": 1, "searches": 1}
        assert await store.exchange(old) is None and await store.exchange(new) is not None
        assert await store.recent_queries() == [] and await store.feedback(old) == {}
        assert [h.question for h in await store.history(T1)] == ["a new question"]
        assert await store.old_questions(cutoff) == {"questions": 0, "searches": 0}


async def test_answers_that_quoted_a_forgotten_source_lose_its_words(open_store: Opener) -> None:
    async with open_store() as store:
        kept = await store.add_exchange(T1, answer("weekly-sync"))
        quoted = await store.add_exchange(T1, answer("weekly_sync"))
        elsewhere = await store.add_exchange(T1, replace(answer("weekly_sync"), kb="other"))
        # "_" is LIKE's any-character: forgetting weekly_sync must not scrub weekly-sync;
        # nor another knowledge base's weekly_sync, another recording.
        assert await store.scrub_answers("kb1", "weekly_sync") == 1
        other = await store.exchange(elsewhere)
        assert other is not None and QUOTE in other["answer"]
        stored = await store.exchange(quoted)
        assert stored is not None
        assert stored["question"] == "What about the budget?"
        assert QUOTE not in repr(stored) and stored["sources"] == []
        untouched = await store.exchange(kept)
        assert untouched is not None and QUOTE in untouched["answer"]


async def test_answers_need_not_be_kept(open_store: Opener) -> None:
    async with open_store(keep_answers=False) as store:
        eid = await store.add_exchange(T1, answer("weekly-sync"))
        stored = await store.exchange(eid)
        assert stored is not None and stored["question"] == "What about the budget?"
        assert QUOTE not in repr(stored)
        assert stored["sources"][0]["title"] == "Weekly sync"
