"""Stream chunks an OpenAI-compatible server may send that the ``openai`` SDK passes on
without validating them: no ``choices``, ``"delta": null``, content that is not text, a
list where a chunk should be, usage that is not counts, tool arguments sent as an object.
What can be read is read (the model's answer is shown); what cannot is a broken reply,
retried and then the quoted-passages fallback, for quick answers, follow-up rewrites and
deep research alike, and ``quorum ask`` in a terminal, never "Something went wrong" and
never a traceback in the log."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.answer.answer import AnswerConfig
from bot.config import load_settings
from bot.engine import Engine
from bot.models import Answer, Question, ThreadKey
from bot.router import DEEP_FAILED, ResearchRouter
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import ingest
from tests.backends import Served
from tests.emulators.openai import OpenAIEmulator, Reply

QUORUM = Path(sys.executable).parent / "quorum"
THREAD = ThreadKey("console", "local", "c", "hostile")
SAID = "We left Auth0 because the bill tripled [1]."
CHUNK = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "created": 0, "model": "m"}


def choice(delta: Any) -> dict[str, Any]:
    return {**CHUNK, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


# chunks that carry nothing wrong for the answer: read, and the model's answer shown
READABLE: dict[str, list[Any]] = {
    "no choices": [dict(CHUNK)],
    "choices null": [{**CHUNK, "choices": None}],
    "delta null": [choice(None)],
    "usage a word": [{**CHUNK, "choices": [], "usage": "lots"}],
    "usage counts as text": [
        {**CHUNK, "choices": [], "usage": {"prompt_tokens": "9", "completion_tokens": None}}
    ],
    "usage details a list": [
        {**CHUNK, "choices": [], "usage": {"prompt_tokens": 9, "prompt_tokens_details": [1]}}
    ],
}
# chunks that leave the answer unknowable: broken, then the quoted passages
BROKEN: dict[str, list[Any]] = {
    "content a number": [choice({"content": 42})],
    "content a list": [choice({"content": [{"type": "text", "text": "hi"}]})],
    "a list chunk": [[1, 2, 3]],
    "a string chunk": ["chunk"],
    "choices an object": [{**CHUNK, "choices": {"index": 0}}],
    "choice a number": [{**CHUNK, "choices": [7]}],
    "tool calls an object": [choice({"tool_calls": {"index": 0}})],
    "tool call without index": [choice({"tool_calls": [{"function": {"name": "x"}}]})],
    "finish reason a number": [
        {**CHUNK, "choices": [{"index": 0, "delta": {}, "finish_reason": 3}]}
    ],
}


@pytest_asyncio.fixture
async def emu() -> AsyncIterator[OpenAIEmulator]:
    async with OpenAIEmulator() as e:
        yield e


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def chunks_kb(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    root = tmp_path_factory.mktemp("chunks")
    (root / "2024-02-01-vendor-sync.txt").write_text(
        "[00:00:04] Eve Stone: We moved off Auth0 because the bill tripled this year.\n"
        "[00:01:10] Marcus Lee: The pager rotation starts Monday.\n"
    )
    kb = f"c{uuid.uuid4().hex[:12]}"
    report = await ingest(store, embedder, kb, [root])
    assert not report.failed
    return kb


async def ask(
    search: SearchService, emu: OpenAIEmulator, kb: str, tmp_path: Path, *questions: Question
) -> list[Answer]:
    llm = Served("openai", emu).model(timeout_s=5, retries=1)
    settings = load_settings(llm_timeout_s=5)
    answers = []
    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        engine = Engine(
            archives=search.archive,
            sessions=sessions,
            llm=llm,
            config=AnswerConfig(llm_timeout_s=5, rewrite_timeout_s=2),
            research=ResearchRouter.from_settings(settings, llm),
        )
        for question in questions:
            answers.append(await engine.ask(question))
    await llm.aclose()
    return answers


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.exc_info or r.exc_text]


@pytest.mark.parametrize("probe", list(READABLE))
async def test_a_chunk_with_nothing_wrong_for_the_answer_is_read(
    search: SearchService,
    emu: OpenAIEmulator,
    chunks_kb: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    probe: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    emu.default = Reply(text=SAID, chunks=READABLE[probe])
    asked = Question(text="Why did we move off Auth0?", thread=THREAD, user="u", kb=chunks_kb)
    [answer] = await ask(search, emu, chunks_kb, tmp_path, asked)
    assert answer.kind == "answer", answer
    assert answer.text.startswith("We left Auth0 because the bill tripled")
    assert tracebacks(caplog) == []


@pytest.mark.parametrize("probe", list(BROKEN))
async def test_a_chunk_that_cannot_be_read_falls_back_to_the_quoted_passages(
    search: SearchService,
    emu: OpenAIEmulator,
    chunks_kb: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    probe: str,
) -> None:
    caplog.set_level(logging.DEBUG)
    emu.default = Reply(text=SAID, chunks=BROKEN[probe])  # every request, rewrites too
    thread = ThreadKey("console", "local", "c", uuid.uuid4().hex)
    first = Question(text="Why did we move off Auth0?", thread=thread, user="u", kb=chunks_kb)
    follow_up = Question(text="And what did it cost?", thread=thread, user="u", kb=chunks_kb)
    deep = Question(
        text="Why did we move off Auth0?",
        thread=ThreadKey("console", "local", "c", uuid.uuid4().hex),
        user="u",
        kb=chunks_kb,
        mode="deep",
    )
    quick, followed, researched = await ask(
        search, emu, chunks_kb, tmp_path, first, follow_up, deep
    )
    for answer in (quick, followed, researched):
        assert answer.kind == "extractive", answer
        assert "bill tripled" in answer.text and "We left Auth0" not in answer.text
    assert researched.note and DEEP_FAILED in researched.note
    assert len(emu.requests) >= 6  # each was asked (and retried), none crashed the reading
    assert tracebacks(caplog) == []


async def test_tool_arguments_sent_as_an_object_are_taken(
    search: SearchService,
    emu: OpenAIEmulator,
    chunks_kb: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    call = {
        "index": 0,
        "id": "call_obj",
        "type": "function",
        "function": {"name": "search", "arguments": {"query": "Auth0 bill"}},
    }
    emu.enqueue(Reply(stop_reason="tool_calls", chunks=[choice({"tool_calls": [call]})]))
    emu.enqueue(Reply(text=SAID))
    deep = Question(
        text="Why did we move off Auth0?", thread=THREAD, user="u", kb=chunks_kb, mode="deep"
    )
    [answer] = await ask(search, emu, chunks_kb, tmp_path, deep)
    assert answer.mode == "deep" and answer.kind == "answer", answer
    assert answer.text.startswith("We left Auth0 because the bill tripled")
    results = [m for m in emu.requests[1].body["messages"] if m["role"] == "tool"]
    assert results and results[0]["tool_call_id"] == "call_obj"
    assert "bill tripled" in results[0]["content"]  # the search ran with the object's query
    assert tracebacks(caplog) == []


@pytest.mark.parametrize("probe", ["a list chunk", "content a number"])
async def test_quorum_ask_in_a_terminal_quotes_the_passages(
    emu: OpenAIEmulator, chunks_kb: str, weaviate_env: Endpoint, tmp_path: Path, probe: str
) -> None:
    emu.default = Reply(text=SAID, chunks=BROKEN[probe])
    env = {
        **os.environ,
        **Served("openai", emu).env(),
        "QUORUM_LLM_MAX_RETRIES": "1",
        "COLUMNS": "200",
    }
    proc = await asyncio.create_subprocess_exec(
        str(QUORUM),
        "ask",
        "Why did we move off Auth0?",
        "--kb",
        chunks_kb,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    shown = out.decode() + err.decode()
    assert proc.returncode == 0, shown
    assert "bill tripled" in shown and "We left Auth0" not in shown
    assert "Traceback" not in shown and "Something went wrong" not in shown
    assert len(emu.requests) >= 2  # the model was asked, and its reply could not be read
