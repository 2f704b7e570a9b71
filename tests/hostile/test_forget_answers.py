"""Forgetting reaches every answer about a source and no other: an answer being written
when its source is removed is not kept with its words, a follow-up rewritten from a
removed answer loses its rewrite (the thread and the query log), insights drop the
source at once, and a removal matches the source's id exactly: removing ``Budget``
keeps an answer citing ``budget``, removing ``search.md`` keeps every deep-research
answer (whose trace names the ``search`` tool)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.answer.answer import AnswerConfig
from bot.engine import REMOVED_MEANWHILE, Engine
from bot.holdings import Holdings
from bot.insights import Insights
from bot.llm import claude_model
from bot.models import Question, ThreadKey
from bot.sessions import Actor, SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.models import SearchFilters
from retrieval.search.search import SearchService
from retrieval.store import Store
from retrieval.write.indexer import ingest
from tests.emulators.anthropic import AnthropicEmulator, Reply, ToolUse
from tests.hostile.test_forget_on_disk import files_saying
from tests.test_engine import make_engine

ANA = Actor("cli", "ana")
MEETING = "[00:00:05] Ana Ruiz: The orchestra rehearsal moves to the marmalade lighthouse.\n"
ASKED = "Where does the orchestra rehearsal move?"


@pytest.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore.open(tmp_path / "data" / "sessions.sqlite3") as s:
        yield s


@pytest.fixture
def holdings(
    store: Store, search: SearchService, sessions: SessionStore, tmp_path: Path
) -> Holdings:
    return Holdings(store=store, search=search, sessions=sessions, data_dir=tmp_path / "data")


@pytest.fixture
async def emu() -> AsyncIterator[AnthropicEmulator]:
    async with AnthropicEmulator() as emulator:
        yield emulator


def written(folder: Path, files: dict[str, str]) -> list[Path]:
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return [folder / name for name in files]


async def add(
    store: Store, embedder: SentenceTransformerEmbedder, kb: str, folder: Path, **files: str
) -> None:
    """Ingest ``files`` (name -> text) into ``kb``."""
    report = await ingest(store, embedder, kb, written(folder, files))
    assert all(r.status == "added" for r in report.results), report.results


def ask(kb: str, text: str, thread: str = "t1", **kw: Any) -> Question:
    return Question(text, ThreadKey("api", kb, "api", thread), "u1", kb, **kw)


def cited(answer: Any) -> set[str]:
    return {s.hit.source.id for s in answer.sources}


async def test_removing_Budget_keeps_the_answer_that_cited_budget(
    store: Store,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    sessions: SessionStore,
    holdings: Holdings,
    kb: str,
    tmp_path: Path,
) -> None:
    await add(
        store,
        embedder,
        kb,
        tmp_path / "docs",
        **{
            "Budget.md": "---\nid: Budget\n---\n# Budget\n\nThe quokka budget is nine hundred.\n",
            "budget.md": "# Budget notes\n\nThe marmalade fund pays for the lighthouse trip.\n",
        },
    )
    engine = make_engine(search, sessions, None)
    only = SearchFilters(source_ids=("budget",))  # `source:budget`, typed in the question
    answer = await engine.ask(ask(kb, "What does the marmalade fund pay for?", filters=only))
    assert answer.exchange_id and cited(answer) == {"budget"}, answer

    gone = await holdings.forget(kb, "Budget", ANA)
    assert gone.passages and gone.answers == 0

    kept = await sessions.exchange(answer.exchange_id)
    assert kept is not None and "lighthouse" in kept["answer"], kept
    assert [s["source_id"] for s in kept["sources"]] == ["budget"] * len(kept["sources"])


async def test_removing_search_md_keeps_deep_research_answers(
    store: Store,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    sessions: SessionStore,
    holdings: Holdings,
    emu: AnthropicEmulator,
    kb: str,
    tmp_path: Path,
) -> None:
    await add(
        store,
        embedder,
        kb,
        tmp_path / "docs",
        **{
            "search.md": "# Search\n\nThe search page ranks recordings by date.\n",
            "auth.md": "# Auth\n\nWe left Auth0 because the renewal quote tripled.\n",
        },
    )
    looked = ToolUse("search", {"query": "Auth0 renewal quote", "source_ids": ["auth"]})
    emu.enqueue(Reply.tools(looked), Reply(text="We left Auth0 over the renewal quote [1]."))
    engine = make_engine(search, sessions, emu)
    answer = await engine.ask(ask(kb, "Why did we leave Auth0?", mode="deep"))
    assert answer.mode == "deep" and answer.citations and cited(answer) == {"auth"}, answer

    gone = await holdings.forget(kb, "search", ANA)
    assert gone.passages and gone.answers == 0

    kept = await sessions.exchange(answer.exchange_id or 0)
    assert kept is not None and "renewal quote" in kept["answer"], kept
    assert kept["research_trace"]["steps"][0]["tool"] == "search"


async def test_an_answer_being_written_when_its_source_is_removed_keeps_none_of_its_words(
    store: Store,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    sessions: SessionStore,
    holdings: Holdings,
    emu: AnthropicEmulator,
    kb: str,
    tmp_path: Path,
) -> None:
    await add(store, embedder, kb, tmp_path / "docs", **{"meeting.txt": MEETING})
    emu.enqueue(Reply(text="It moves to the marmalade lighthouse [1].", delay_s=4))
    claude = claude_model(
        api_key=emu.api_key, base_url=emu.url, model="c", fast_model="c", timeout_s=30
    )
    engine = Engine(
        archives=search.archive,
        sessions=sessions,
        llm=claude,
        config=AnswerConfig(llm_timeout_s=30),  # Claude is slow here, not down
    )
    writing = asyncio.create_task(engine.ask(ask(kb, ASKED)))
    for _ in range(100):  # until Claude is writing: the passages are read
        if emu.requests:
            break
        await asyncio.sleep(0.05)
    assert emu.requests and not writing.done()

    await holdings.forget(kb, "meeting", ANA)
    answer = await writing

    assert answer.text == REMOVED_MEANWHILE and not answer.sources
    stored = await sessions.exchange(answer.exchange_id or 0)
    assert stored is not None and stored["question"] == ASKED
    assert stored["answer"] == REMOVED_MEANWHILE and stored["sources"] == []
    assert files_saying(tmp_path / "data") == {}


def rewritten_or_answered(body: dict[str, Any]) -> Reply:
    """Claude as the follow-up needs it: a rewrite that carries the first answer's words,
    else an answer citing the first passage (the cake's, when it was given)."""
    if "standalone search query" in str(body.get("system")):
        return Reply(text="Who brings the cake to the marmalade lighthouse rehearsal?")
    if "pineapple" in str(body["messages"]):
        return Reply(text="Bo brings the pineapple cake [1].")
    return Reply(text="It moves to the marmalade lighthouse [1].")


async def test_a_follow_up_rewritten_from_a_removed_answer_loses_the_rewrite(
    store: Store,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    sessions: SessionStore,
    holdings: Holdings,
    emu: AnthropicEmulator,
    kb: str,
    tmp_path: Path,
) -> None:
    cake = "[00:00:09] Bo Chen: I bring the pineapple cake.\n"
    await add(store, embedder, kb, tmp_path / "docs", **{"meeting.txt": MEETING, "cake.txt": cake})
    emu.default = rewritten_or_answered
    engine = make_engine(search, sessions, emu)
    first = await engine.ask(ask(kb, ASKED, filters=SearchFilters(source_ids=("meeting",))))
    assert cited(first) == {"meeting"}, first
    # The follow-up reads only the other source: only its rewrite came from the meeting.
    follow = await engine.ask(
        ask(kb, "And who brings the cake?", filters=SearchFilters(source_ids=("cake",)))
    )
    assert follow.standalone_query and "marmalade" in follow.standalone_query
    assert cited(follow) == {"cake"}, follow
    assert files_saying(tmp_path / "data")

    await holdings.forget(kb, "meeting", ANA)

    assert files_saying(tmp_path / "data") == {}  # the database, its WAL, the query log
    kept = await sessions.exchange(follow.exchange_id or 0)
    assert kept is not None and kept["standalone_query"] is None and "cake" in kept["answer"]


async def test_insights_drop_a_removed_source_at_once(
    store: Store,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    sessions: SessionStore,
    holdings: Holdings,
    kb: str,
    tmp_path: Path,
) -> None:
    await add(store, embedder, kb, tmp_path / "docs", **{"meeting.txt": MEETING})
    await make_engine(search, sessions, None).ask(ask(kb, ASKED))
    insights = Insights(sessions=sessions, embedder=None, archives=None)
    since = time.time() - 3600
    before = await insights.report(kb, since)
    assert [c.source_id for c in before.top_sources] == ["meeting"]

    await holdings.forget(kb, "meeting", ANA)

    after = await insights.report(kb, since)  # within the cache's ten minutes
    assert after.top_sources == [] and after.questions == 1
