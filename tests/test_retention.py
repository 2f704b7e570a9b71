"""Retention on SQLite and PostgreSQL (real servers), over the session Weaviate server: a
dry run says what has outlived its days and deletes nothing; applying it forgets the old
source whole (written to the audit trail as expired), deletes the old kept transcript
and the old questions, and keeps everything younger. ``quorum retention`` says the same."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from bot.holdings import Holdings
from bot.models import ThreadKey
from bot.retention import DAY_S, Retain, daily, plan
from bot.sessions import Actor, AuditEntry, ExchangeRecord, SessionStore
from bot.sessions.postgres import PostgresSessionStore
from bot.sessions.sql import SqlSessions
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store import Store
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import ingest

T1 = ThreadKey("slack", "T1", "C1", "1700000000.000100")
VTT = """WEBVTT

00:00:01.000 --> 00:00:05.000
<v Ana>{text}
"""


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Callable[[], contextlib.AbstractAsyncContextManager[SqlSessions]]:
    if request.param == "sqlite":
        return lambda: SessionStore.open(tmp_path / "data" / "sessions.sqlite3")
    url: str = request.getfixturevalue("postgres_url")
    return lambda: PostgresSessionStore.open(url)


@pytest.fixture
async def sessions(
    open_store: Callable[[], contextlib.AbstractAsyncContextManager[SqlSessions]],
) -> AsyncIterator[SqlSessions]:
    async with open_store() as store:
        yield store


async def test_retention_says_then_deletes_only_what_outlived_its_days(
    store: Store,
    search: SearchService,
    embedder: SentenceTransformerEmbedder,
    sessions: SqlSessions,
    kb: str,
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    holdings = Holdings(store=store, search=search, sessions=sessions, data_dir=data)
    files = tmp_path / "files"
    files.mkdir()
    (files / "old-meeting.vtt").write_text(VTT.format(text="The kiln budget was approved."))
    (files / "new-meeting.vtt").write_text(VTT.format(text="The ferry schedule changes."))
    await ingest(store, embedder, kb, [files])
    now = time.time()
    ana = Actor("cli", "ana")
    await sessions.record_audit(AuditEntry("added", kb, "old-meeting", ana, at=now - 40 * DAY_S))
    await sessions.record_audit(AuditEntry("added", kb, "new-meeting", ana))
    cache = data / "transcripts"
    cache.mkdir(parents=True)
    old_file, new_file = cache / f"{'a' * 64}.tiny.en.json", cache / f"{'b' * 64}.tiny.en.json"
    for f in (old_file, new_file):
        f.write_text("{}")
    os.utime(old_file, (now - 40 * DAY_S, now - 40 * DAY_S))
    await sessions.add_exchange(T1, ExchangeRecord("U1", "an old question", "a", "answer", "quick"))
    await sessions.driver.execute("UPDATE exchanges SET created_at = ?", now - 40 * DAY_S)
    await sessions.add_exchange(T1, ExchangeRecord("U1", "a new question", "a", "answer", "quick"))
    retain = Retain(sources_days=30, transcripts_days=30, queries_days=30)

    dry = await plan(holdings, retain)
    assert [(s.kb, s.source_id) for s in dry.sources] == [(kb, "old-meeting")]
    assert [f for f, _ in dry.transcripts] == [old_file] and dry.questions == 1
    assert dry.undated == 0  # sources the audit never saw are dated by the index
    assert dry.lines()[0].startswith(f"Would delete source {kb}/old-meeting")
    assert len(await store.list_sources(kb)) == 2 and old_file.exists()  # nothing went

    done = await plan(holdings, retain, apply=True)
    assert done.totals() == (
        "Deleted 1 source(s), 1 kept transcript(s), 1 question(s) and 0 search(es)."
    )
    assert [i.source.id for i in await store.list_sources(kb)] == ["new-meeting"]
    assert not old_file.exists() and new_file.exists()
    assert [h.question for h in await sessions.history(T1)] == ["a new question"]
    (expired, *_) = await sessions.audit(kb)
    assert (expired.action, expired.source_id, str(expired.actor)) == (
        "expired",
        "old-meeting",
        "retention",
    )
    assert (await plan(holdings, retain)).totals().startswith("Would delete 0 source(s)")


def test_the_retention_command(weaviate_env: Endpoint, monkeypatch: pytest.MonkeyPatch) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["retention"])
    assert result.exit_code == 1 and "QUORUM_RETAIN_SOURCES_DAYS" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    monkeypatch.setenv("QUORUM_RETAIN_QUERIES_DAYS", "30")
    result = runner.invoke(app, ["retention", "--dry-run"])
    assert result.exit_code == 0, result.stderr
    assert "Would delete 0 source(s), 0 kept transcript(s), 0 question(s)" in result.stdout
    result = runner.invoke(app, ["retention", "--apply"])
    assert result.exit_code == 0 and "Deleted 0 source(s)" in result.stdout


async def test_serve_applies_retention_now_and_then_again(
    store: Store, search: SearchService, sessions: SqlSessions, tmp_path: Path
) -> None:
    holdings = Holdings(store=store, search=search, sessions=sessions, data_dir=tmp_path / "d")
    await sessions.add_exchange(T1, ExchangeRecord("U1", "first", "a", "answer", "quick"))
    keeper = asyncio.create_task(daily(holdings, Retain(queries_days=1), every_s=0.05))
    try:
        await asyncio.sleep(0.2)
        assert [h.question for h in await sessions.history(T1)] == ["first"]  # young
        await sessions.driver.execute("UPDATE exchanges SET created_at = 0")
        for _ in range(100):  # the next daily run takes it
            if not await sessions.history(T1):
                break
            await asyncio.sleep(0.05)
        assert await sessions.history(T1) == []
    finally:
        keeper.cancel()
