"""A server that refuses tools turns deep research off for a while, not until restart:
the refusal is remembered (the next deep question is answered quickly without asking the
server again), then tools are tried again, and a server that now calls tools gets deep
research back in the same running Quorum."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.answer.answer import AnswerConfig
from bot.config import load_settings
from bot.engine import Engine
from bot.models import Question, ThreadKey
from bot.router import NO_TOOLS, ResearchRouter
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.indexer import ingest
from tests.backends import Served
from tests.emulators.openai import OpenAIEmulator, Reply, ToolUse


@pytest_asyncio.fixture
async def emu() -> AsyncIterator[OpenAIEmulator]:
    async with OpenAIEmulator(supports_tools=False) as e:
        yield e


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def tools_kb(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    root = tmp_path_factory.mktemp("tools")
    (root / "2024-02-01-vendor-sync.txt").write_text(
        "[00:00:04] Eve Stone: We moved off Auth0 because the bill tripled this year.\n"
    )
    kb = f"o{uuid.uuid4().hex[:12]}"
    assert not (await ingest(store, embedder, kb, [root])).failed
    return kb


def deep(kb: str) -> Question:
    thread = ThreadKey("console", "local", "c", uuid.uuid4().hex)
    return Question(text="Why did we move off Auth0?", thread=thread, user="u", kb=kb, mode="deep")


def with_tools(emu: OpenAIEmulator) -> int:
    return sum(1 for r in emu.requests if isinstance(r.body, dict) and r.body.get("tools"))


async def test_deep_research_comes_back_once_the_server_calls_tools(
    search: SearchService, emu: OpenAIEmulator, tools_kb: str, tmp_path: Path
) -> None:
    emu.default = Reply(text="We left Auth0 because the bill tripled [1].")
    llm = Served("openai", emu).model(timeout_s=5)
    llm.tools_recheck_s = 60.0
    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        engine = Engine(
            archives=search.archive,
            sessions=sessions,
            llm=llm,
            config=AnswerConfig(llm_timeout_s=5, rewrite_timeout_s=2),
            research=ResearchRouter.from_settings(load_settings(llm_timeout_s=5), llm),
        )
        refused = await engine.ask(deep(tools_kb))
        assert refused.mode == "quick" and refused.note and NO_TOOLS in refused.note
        asked = with_tools(emu)
        remembered = await engine.ask(deep(tools_kb))
        assert remembered.note and NO_TOOLS in remembered.note
        assert with_tools(emu) == asked  # not asked again while the refusal is fresh

        emu.supports_tools = True  # the operator gave the server a model that calls tools
        llm.tools_recheck_s = 0.0  # ... and the refusal has grown old (no sleeping here)
        emu.enqueue(Reply.tools(ToolUse("search", {"query": "Auth0 bill"})))
        answer = await engine.ask(deep(tools_kb))
    await llm.aclose()
    assert answer.mode == "deep" and answer.kind == "answer", answer
    assert not answer.note or NO_TOOLS not in answer.note
    assert llm.tools_supported is True
