"""A removal's scrub on both session databases: it matches the source's id exactly in
what an answer is made of (its numbered sources, its research steps), never as a
substring or in another case, and leaves no scrubbed words in the database's files."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bot.models import ThreadKey
from bot.sessions import ExchangeRecord, QueryRecord, Sessions, SessionStore
from bot.sessions.postgres import PostgresSessionStore

Opener = Callable[[], contextlib.AbstractAsyncContextManager[Sessions]]


def thread(name: str) -> ThreadKey:
    return ThreadKey("api", "kb", "api", name)


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    if request.param == "sqlite":
        return lambda: SessionStore.open(tmp_path / "s.sqlite3")
    url: str = request.getfixturevalue("postgres_url")
    return lambda: PostgresSessionStore.open(url)


def citing(source_id: str, said: str, trace: Any = None, kb: str = "kb") -> ExchangeRecord:
    source = {"n": 1, "source_id": source_id, "title": source_id, "hit_id": f"{source_id}#0"}
    return ExchangeRecord(
        user="u1",
        question="What was said?",
        answer=f"{said} [1]",
        kind="answer",
        mode="deep" if trace else "quick",
        standalone_query=f"what was said about {said}",
        sources=[source],
        citations=[{"n": 1, "quote": said}],
        research_trace=trace,
        kb=kb,
    )


def steps(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"version": 1, "steps": [{"turn": 1, "tool": t, "args": a} for t, a in calls]}


async def test_a_scrub_takes_the_source_exactly(open_store: Opener) -> None:
    async with open_store() as store:
        ids = {}
        for name, record in {
            "Budget": citing("Budget", "the quokka budget"),
            "budget": citing("budget", "the marmalade fund"),
            # Deep answers whose steps call the ``search`` tool, and one that read ``search``.
            "deep": citing("auth", "the renewal", steps(("search", {"query": "search"}))),
            "read": citing(
                "auth", "the ranking", steps(("get_transcript", {"source_id": "search"}))
            ),
            "narrowed": citing("auth", "the filter", steps(("search", {"source_ids": ["search"]}))),
            "other kb": citing("Budget", "the other quokka", kb="kb2"),
        }.items():
            query = QueryRecord(record.kb or "kb", record.standalone_query or "", {}, (), 1.0)
            ids[name] = await store.add_exchange(thread(name), record, [query])

        assert await store.scrub_answers("kb", "Budget") == 1
        assert await store.scrub_answers("kb", "search") == 2
        await store.purge()

        kept = {name: await store.exchange(i) for name, i in ids.items()}
        assert {n for n, e in kept.items() if e and e["answer"] == ""} == {
            "Budget",
            "read",
            "narrowed",
        }
        assert kept["budget"]["answer"] == "the marmalade fund [1]"  # type: ignore[index]
        assert kept["deep"]["research_trace"] is not None  # type: ignore[index]
        assert kept["other kb"]["answer"] == "the other quokka [1]"  # type: ignore[index]
        logged = {q["exchange_id"]: q["query"] for q in await store.recent_queries()}
        assert logged[ids["budget"]] == "what was said about the marmalade fund"
        assert logged[ids["Budget"]] == ""


def contents(folder: Path) -> dict[str, bytes]:
    return {f.name: f.read_bytes() for f in folder.iterdir()}


async def test_a_scrub_leaves_no_word_in_the_sqlite_files_while_it_is_open(tmp_path: Path) -> None:
    async with SessionStore.open(tmp_path / "s.sqlite3") as store:
        await store.add_exchange(thread("s1"), citing("weekly", "the zanzibar lighthouse " * 200))
        await store.scrub_answers("kb", "weekly")
        await store.purge()
        left = contents(tmp_path)  # while the store is open, as under ``quorum serve``
    assert [name for name, data in left.items() if b"zanzibar" in data] == []
    assert left["s.sqlite3-wal"] == b""
