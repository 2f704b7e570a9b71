"""Model faults that must end in a retry or the extractive fallback, never a traceback or
a half answer shown as whole, on both backends (Claude's API and an OpenAI-compatible
server, each through its real SDK and emulator): a stream reset mid-way, malformed or
truncated chunks, an empty stream, a stream that never finishes, 429/5xx, a server that is
down or too slow; and deep research's own limits (its budget never lengthens the request
timeout, bad tool input is a tool error)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.answer.answer import AnswerConfig
from bot.config import load_settings
from bot.engine import Engine
from bot.errors import LLMError
from bot.models import Event, PartialAnswer, Question, ThreadKey
from bot.research.loop import Researcher
from bot.router import DEEP_FAILED, ResearchRouter
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.indexer import ingest
from tests.backends import Reply, Served, ToolUse, tool_results

USER: list[Any] = [{"role": "user", "content": "Why did we move off Auth0?"}]
STREAM_FAULTS = ["reset", "malformed", "truncated", "empty", "no_stop"]
HALF = "Stand-in answer that must never be shown as final."
THREAD = ThreadKey("console", "local", "c", "t")


@pytest.mark.parametrize("fault", STREAM_FAULTS)
async def test_a_broken_stream_is_retried(served: Served, fault: str) -> None:
    llm = served.model(timeout_s=5, retries=2)
    served.emu.enqueue(Reply(text=HALF, fault=fault), "a whole answer")
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    done = await llm.stream(system="s", messages=USER, max_tokens=50, on_text=on_text)
    await llm.aclose()
    assert done.text == "a whole answer" and done.attempts == 2
    assert seen[-1] == "a whole answer"
    assert llm.retries == 1 and llm.errors == 0


@pytest.mark.parametrize("fault", STREAM_FAULTS)
async def test_a_stream_broken_every_time_is_an_llm_error(served: Served, fault: str) -> None:
    llm = served.model(timeout_s=5, retries=1)
    served.emu.enqueue(Reply(text=HALF, fault=fault), times=2)
    with pytest.raises(LLMError, match="broken reply|incomplete reply"):
        await llm.stream(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert len(served.emu.requests) == 2 and llm.errors == 1


async def test_a_truncated_reply_is_retried(served: Served) -> None:
    llm = served.model(timeout_s=5, retries=2)
    served.emu.enqueue(Reply(text=HALF, fault="truncated"), "whole")
    done = await llm.complete(system="s", messages=USER, max_tokens=50)
    assert done.text == "whole" and done.attempts == 2
    served.emu.enqueue(Reply(text=HALF, fault="truncated"), times=3)
    with pytest.raises(LLMError, match="broken reply|incomplete reply"):
        await llm.create(system="s", messages=USER, max_tokens=50)
    await llm.aclose()


async def test_a_callers_longer_timeout_never_overrides_the_configured_one(
    served: Served,
) -> None:
    llm = served.model(timeout_s=0.5)
    served.emu.enqueue(Reply(text="too late", delay_s=5))
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match="within 0.5 seconds"):
        await llm.create(system="s", messages=USER, max_tokens=50, timeout_s=90)
    await llm.aclose()
    assert time.perf_counter() - t0 < 2


# --- through the engine and deep research, on a real Weaviate ---------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def faults_kb(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    root = tmp_path_factory.mktemp("faults")
    (root / "2024-02-01-vendor-sync.txt").write_text(
        "[00:00:04] Eve Stone: We moved off Auth0 because the bill tripled this year.\n"
        "[00:01:10] Marcus Lee: The pager rotation starts Monday.\n"
    )
    kb = f"f{uuid.uuid4().hex[:12]}"
    report = await ingest(store, embedder, kb, [root])
    assert not report.failed
    return kb


QUICK_FAULTS = [*STREAM_FAULTS, "stream_error", "429", "503", "timeout", "down"]


def failing(fault: str) -> Reply:
    """A reply that fails the way ``fault`` says, every time."""
    if fault.isdigit():
        return Reply.error(int(fault))
    if fault == "stream_error":
        return Reply(text=HALF, stream_error="overloaded_error")
    if fault == "timeout":
        return Reply(text=HALF, delay_s=10)
    return Reply(text=HALF, fault=fault)


@pytest.mark.parametrize("fault", QUICK_FAULTS)
async def test_quick_answers_fall_back_to_extractive_on_any_fault(
    search: SearchService, served: Served, faults_kb: str, tmp_path: Path, fault: str
) -> None:
    served.emu.default = failing(fault)  # every request, the rewrite's too
    if fault == "down":
        await served.emu.stop()  # nothing listens on its port any more
    partials: list[str] = []

    async def on_event(event: Event) -> None:
        if isinstance(event, PartialAnswer):
            partials.append(event.text)

    llm = served.model(timeout_s=3, retries=1)
    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        engine = Engine(
            archives=search.archive,
            sessions=sessions,
            llm=llm,
            config=AnswerConfig(llm_timeout_s=3, rewrite_timeout_s=1),
        )
        asked = "Why did we move off Auth0?"
        question = Question(text=asked, thread=THREAD, user="u", kb=faults_kb)
        answer = await engine.ask(question, on_event)
    await llm.aclose()
    assert answer.kind == "extractive", answer
    assert "Stand-in" not in answer.text and "bill tripled" in answer.text
    assert llm.errors >= 1  # counted for /metrics, per backend


async def test_research_tool_errors_for_bad_input_and_offsets(
    search: SearchService, served: Served, faults_kb: str
) -> None:
    llm = served.model(retries=0)
    source = "2024-02-01-vendor-sync"
    emu = served.emu
    emu.enqueue(Reply(tool_uses=[ToolUse("search", {})], raw_input=["not", "an", "object"]))
    emu.enqueue(Reply.tools(ToolUse("get_transcript", {"source_id": source, "offset": 20_000})))
    emu.enqueue("Nothing more to find.")
    result = await Researcher(llm).run(
        Question(text="What about Auth0?", thread=THREAD, user="u1", kb=faults_kb, mode="deep"),
        search.archive(faults_kb),
    )
    await llm.aclose()
    first = tool_results(emu.requests[1].body)[0]
    assert first.is_error and "must be an object" in first.content
    second = tool_results(emu.requests[2].body)[0]
    assert second.is_error and "offset must be between 0 and" in second.content
    assert result.answer.text == "Nothing more to find."


@pytest.mark.parametrize("fault", ["reset", "truncated"])
async def test_deep_research_on_a_broken_model_falls_back_to_a_quick_extractive_answer(
    search: SearchService, served: Served, faults_kb: str, tmp_path: Path, fault: str
) -> None:
    served.emu.default = Reply(text=HALF, fault=fault)
    llm = served.model(timeout_s=3, retries=1)
    settings = load_settings(llm_timeout_s=3)
    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        engine = Engine(
            archives=search.archive,
            sessions=sessions,
            llm=llm,
            config=AnswerConfig(llm_timeout_s=3, rewrite_timeout_s=1),
            research=ResearchRouter.from_settings(settings, llm),
        )
        asked = "Why did we move off Auth0?"
        question = Question(text=asked, thread=THREAD, user="u", kb=faults_kb, mode="deep")
        answer = await engine.ask(question)
    await llm.aclose()
    assert answer.kind == "extractive", answer
    assert answer.note and DEEP_FAILED in answer.note
    assert "Stand-in" not in answer.text and "bill tripled" in answer.text
