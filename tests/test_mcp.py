"""Quorum as an MCP server, through the SDK's own client: over Streamable HTTP at ``/mcp``
on the ops server with the real core attached (as ``quorum serve`` runs it), and over
stdio against a real ``quorum mcp`` process. The session Weaviate holds the sample
archive and a spoken recording; Claude is the emulator; links open in headless Chromium."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import pytest_asyncio
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent
from playwright.async_api import Browser

from bot.config import load_settings
from bot.insights import Insights
from bot.models import ThreadKey
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import MAX_K
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import ingest
from tests.emulators.anthropic import API_KEY, AnthropicEmulator
from tests.emulators.script import Reply
from tests.media_fixtures import speak
from tests.pages_harness import Served, chromium, media_state, opened, serving
from tests.sample_archive import HOSTED_UI_S, load_sample
from tests.test_slack_e2e import FAST_MODEL, HOSTED_UI_LINK, claude

TOKEN, OTHER_TOKEN = "tok-mcp", "tok-mcp-other"
QUESTION = "What are the limits of the hosted UI login page?"
SLOW = "Tell me everything about the hosted UI, slowly."
SAID = [
    "Welcome to the planning call for the new warehouse.",
    "The zanzibar launch moves to the second week of June.",
    "Marco owns the billing migration checklist.",
    "We review the quarterly budget on Friday afternoon.",
]
HANDBOOK = "# On-call handbook\n\nPage the secondary after fifteen minutes of silence.\n"
QUORUM = Path(sys.executable).parent / "quorum"


@dataclass
class World:
    served: Served
    kb: str
    other: str
    claude: AnthropicEmulator
    browser: Browser
    env: dict[str, str]  # for a `quorum mcp` process on the same archive


def answer_of(body: dict[str, Any]) -> Reply:
    """The sample's Claude, slow for the question a test hangs up on."""
    reply = claude(body)
    if SLOW in str(body["messages"]) and body["model"] != FAST_MODEL:
        return Reply(text=(reply.text or "") + " more" * 200, chunk_delay_s=0.05)
    return reply


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[World]:
    """Two knowledge bases: the sample archive and a spoken recording in one, a handbook in
    the other; the ops server serving both, each behind its own token."""
    folder = tmp_path_factory.mktemp("mcp")
    kb, other = f"t{uuid.uuid4().hex[:12]}", f"t{uuid.uuid4().hex[:12]}"
    files, docs = folder / "files", folder / "docs"
    files.mkdir()
    docs.mkdir()
    speak(files / "warehouse-planning.wav", SAID, gap_s=6.0)
    (docs / "on-call.md").write_text(HANDBOOK)
    async with AnthropicEmulator(default=answer_of) as emulator:
        settings = load_settings(
            data_dir=folder / "data",
            anthropic_api_key=API_KEY,
            anthropic_base_url=emulator.url,
            fast_model=FAST_MODEL,
            llm_max_retries=0,
            chunk_seconds=15.0,  # short windows: a passage starts well into the recording
            chunk_overlap_seconds=8.0,  # and overlapping ones: a page says no line twice
            api_tokens=f"{TOKEN}:{kb},{OTHER_TOKEN}:{other}",
        )
        async with serving(settings, weaviate_endpoint, store, embedder) as served:
            r = served.services.retrieval
            await load_sample(store, embedder, kb)
            for name, where in ((kb, files), (other, docs)):
                report = await ingest(
                    store,
                    r.embedder,
                    name,
                    [where],
                    chunking=r.chunking,
                    transcriber=r.transcriber,
                    media=r.media,  # pages play only what the media store kept at ingest
                )
                assert not report.failed, report.failed
            env = {
                **os.environ,
                "QUORUM_DATA_DIR": str(folder / "data"),
                "QUORUM_WEAVIATE_MODE": "local",
                "QUORUM_WEAVIATE_URL": weaviate_endpoint.url,
                "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate_endpoint.grpc_port),
                "ANTHROPIC_API_KEY": API_KEY,
                "ANTHROPIC_BASE_URL": emulator.url,
                "QUORUM_FAST_MODEL": FAST_MODEL,
                "QUORUM_LLM_MAX_RETRIES": "0",
            }
            async with chromium() as browser:
                yield World(served, kb, other, emulator, browser, env)


@contextlib.asynccontextmanager
async def over_http(
    world: World, token: str | None = TOKEN, mode: str = "auto"
) -> AsyncIterator[Client]:
    """The SDK's client on ``/mcp`` with ``token``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"{world.served.url}/mcp", http_client=http)
        async with Client(transport, mode=mode) as client:
            yield client


def text(result: CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


def data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text(result)
    assert result.structured_content is not None
    return result.structured_content


async def metrics(world: World) -> dict[str, float]:
    async with world.served.http.get(f"{world.served.url}/metrics") as r:
        body = await r.text()
    return {
        name: float(value)
        for name, value in (
            line.rsplit(" ", 1) for line in body.splitlines() if line and line[0] != "#"
        )
    }


async def test_tools_resources_and_their_schemas(world: World) -> None:
    async with over_http(world) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"search", "ask", "sources", "transcript", "summary"}
        for tool in tools.values():
            assert tool.description and len(tool.description) > 60, tool.name
            assert tool.input_schema["type"] == "object"
        search = tools["search"].input_schema
        assert search["required"] == ["query"]
        assert search["properties"]["k"]["maximum"] == MAX_K
        assert {"speaker", "source", "since", "until", "level"} <= set(search["properties"])
        assert tools["ask"].input_schema["required"] == ["question"]
        assert "session_id" in tools["ask"].input_schema["properties"]
        assert tools["transcript"].input_schema["required"] == ["source"]

        listed = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert "quorum://transcript/warehouse-planning" in listed
        assert "quorum://transcript/kickoff" in listed
        summary = await client.call_tool("summary", {"source": "Warehouse planning"})
        [topic] = [line for line in data(summary)["lines"] if line["kind"] == "topic"]
        assert topic["start_s"] > 5 and f"#t={int(topic['start_s'])}" in topic["link"]
        assert re.search(r"- Topic \(0:\d\d\): .*second week of June\. http", text(summary))
        read = await client.read_resource("quorum://transcript/warehouse-planning")
        body = read.contents[0].text  # type: ignore[union-attr]
        assert body.startswith("# Warehouse planning (audio)") and "(0:00)" in body
        assert "migration checklist" in body and "quarterly budget" in body


async def test_search_links_the_page_that_plays_the_cited_second(world: World) -> None:
    async with over_http(world) as client:
        result = await client.call_tool(
            "search",
            {"query": "migration checklist", "source": "Warehouse planning", "k": 1},
        )
    hit = data(result)["hits"][0]
    assert hit["source"]["id"] == "warehouse-planning" and "migration checklist" in hit["text"]
    link = hit["page_link"]
    assert link.startswith(f"{world.served.url}/v/") and link in text(result)
    second = int(re.findall(r"#t=(\d+)", link)[0])
    assert second == int(hit["start_s"]) and second > 5  # not the recording's start

    page = await opened(world.browser, link)
    state = await media_state(page)
    assert abs(state["t"] - second) < 1.0, (state, second)
    assert state["cited"] and "migration checklist" in state["cited"]
    await page.close()


async def test_ask_cites_the_second_with_progress_and_a_follow_up(world: World) -> None:
    before = await metrics(world)
    steps: list[str] = []

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        steps.append(message or "")

    async with over_http(world) as client:
        first = await client.call_tool("ask", {"question": QUESTION}, progress_callback=progress)
        answer = data(first)
        assert answer["kind"] == "answer" and "hosted UI" in answer["text"]
        [cite] = answer["citations"]
        assert cite["link"].startswith(HOSTED_UI_LINK) and cite["start_s"] == HOSTED_UI_S
        assert HOSTED_UI_LINK in text(first) and answer["session_id"] in text(first)
        assert steps, "no progress was reported"

        again = await client.call_tool(
            "ask", {"question": "and what about it?", "session_id": answer["session_id"]}
        )
    follow = data(again)
    assert follow["session_id"] == answer["session_id"]
    assert follow["standalone_query"] == "limits of the Cognito hosted UI login page"
    assert follow["citations"][0]["link"].startswith(HOSTED_UI_LINK)

    # Counted and logged like any platform's questions: metrics, and the query log's thread.
    after = await metrics(world)
    asked = 'quorum_questions_total{mode="quick",outcome="answer",platform="mcp"}'
    assert after[asked] - before.get(asked, 0.0) == 2.0
    thread = ThreadKey("mcp", world.kb, "mcp", answer["session_id"])
    history = await world.served.services.sessions.history(thread, 10)
    assert [e.question for e in history] == [QUESTION, "and what about it?"]
    insights = Insights(sessions=world.served.services.sessions, embedder=None, archives=None)
    report = await insights.report(world.kb, time.time() - 3600, gaps=False, fresh=True)
    assert "mcp" in report.platforms and report.questions >= 2


async def test_another_knowledge_bases_token_sees_none_of_these_sources(world: World) -> None:
    async with over_http(world, OTHER_TOKEN) as client:
        listed = data(await client.call_tool("sources", {}))
        assert [s["id"] for s in listed["sources"]] == ["on-call"]
        found = data(await client.call_tool("search", {"query": "Marco billing checklist"}))
        assert {h["source"]["id"] for h in found["hits"]} <= {"on-call"}
        for tool, args in (
            ("transcript", {"source": "warehouse-planning"}),
            ("summary", {"source": "kickoff"}),
            ("search", {"query": "hosted UI", "source": "Auth deep dive"}),
        ):
            refused = await client.call_tool(tool, args)
            assert refused.is_error and "No source" in text(refused), (tool, text(refused))
        asked = data(await client.call_tool("ask", {"question": QUESTION}))
        assert "Auth" not in str(asked["citations"]) and "loom" not in str(asked)
        resources = [str(r.uri) for r in (await client.list_resources()).resources]
        assert resources == ["quorum://transcript/on-call"]
        with pytest.raises(Exception, match="No source"):
            await client.read_resource("quorum://transcript/kickoff")


async def test_a_missing_or_wrong_token_is_refused(world: World) -> None:
    http = world.served.http
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}):
        async with http.post(f"{world.served.url}/mcp", json=hello, headers=headers) as r:
            assert r.status == 401 and r.headers["WWW-Authenticate"] == "Bearer"
            assert "token" in (await r.json())["error"].lower()
    for token in (None, "nope"):
        with pytest.raises(Exception):  # noqa: B017  (the SDK's own error for a 401)
            async with over_http(world, token) as client:
                await client.list_tools()


async def test_bad_arguments_get_one_sentence(world: World) -> None:
    async with over_http(world) as client:
        cases: dict[tuple[str, str], dict[str, Any]] = {
            ("search", "k"): {"query": "hosted UI", "k": 10**9},
            ("search", "source"): {"query": "hosted UI", "source": "The Board Meeting"},
            ("search", "since"): {"query": "hosted UI", "since": "last Tuesday-ish"},
            ("transcript", "source"): {},
            ("transcript", "range"): {"source": "kickoff", "start_s": 90, "end_s": 10},
            ("summary", "source"): {"source": "no such thing"},
            ("ask", "session"): {"question": "hi", "session_id": "../../etc/passwd"},
        }
        said = {}
        for (tool, what), args in cases.items():
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, what)
            said[(tool, what)] = text(result)
    for sentence in said.values():
        assert "\n" not in sentence and "Traceback" not in sentence and "pydantic" not in sentence
        assert sentence.endswith("."), sentence
    assert said[("search", "k")] == (
        f"search: the argument 'k' should be less than or equal to {MAX_K} (got 1000000000)."
    )
    assert "No source 'The Board Meeting'" in said[("search", "source")]
    assert "'since'" in said[("search", "since")]
    assert said[("transcript", "source")] == "transcript: the argument 'source' is required."
    assert "start_s (90) is after end_s (10)" in said[("transcript", "range")]
    assert "No source 'no such thing'" in said[("summary", "source")]
    assert "session_id must be" in said[("ask", "session")]


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_a_client_that_hangs_up_mid_ask_cancels_it(world: World, mode: str) -> None:
    before = await metrics(world)
    hung_up = world.claude.hung_up
    session = uuid.uuid4().hex
    started = asyncio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message and "writing" in message.lower():
            started.set()

    async def ask_and_leave() -> None:
        async with over_http(world, mode=mode) as client:
            call = asyncio.create_task(
                client.call_tool(
                    "ask", {"question": SLOW, "session_id": session}, progress_callback=progress
                )
            )
            await asyncio.wait_for(started.wait(), 30)
            await asyncio.sleep(0.3)  # Claude is streaming the (slow) answer now
            call.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await call
        # Leaving the block closed the client's connections.

    await ask_and_leave()
    cancelled = 'quorum_questions_total{mode="quick",outcome="cancelled",platform="mcp"}'
    for _ in range(100):
        now = await metrics(world)
        if now.get(cancelled, 0.0) > before.get(cancelled, 0.0):
            break
        await asyncio.sleep(0.1)
    assert now[cancelled] - before.get(cancelled, 0.0) == 1.0
    assert now["quorum_questions_in_flight"] == 0.0
    for _ in range(50):
        if world.claude.hung_up > hung_up:
            break
        await asyncio.sleep(0.1)
    assert world.claude.hung_up == hung_up + 1  # Quorum stopped reading Claude's stream
    thread = ThreadKey("mcp", world.kb, "mcp", session)
    assert await world.served.services.sessions.history(thread, 10) == []  # nothing stored


@contextlib.asynccontextmanager
async def over_stdio(world: World, port: int) -> AsyncIterator[Client]:
    """The SDK's client on a `quorum mcp --kb KB` process, as a desktop client starts it."""
    env = {**world.env, "QUORUM_HTTP_PORT": str(port)}
    params = StdioServerParameters(command=str(QUORUM), args=["mcp", "--kb", world.kb], env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        yield client


async def test_over_stdio_search_plays_the_second_and_ask_follows_up(world: World) -> None:
    port = free_port()
    async with over_stdio(world, port) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {"search", "ask", "sources", "transcript", "summary"}
        found = await client.call_tool(
            "search", {"query": "migration checklist", "source": "Warehouse planning", "k": 1}
        )
        [hit] = data(found)["hits"]
        link = hit["page_link"]
        assert link.startswith(f"http://localhost:{port}/v/"), link  # pages it serves itself
        second = int(re.findall(r"#t=(\d+)", link)[0])
        assert second == int(hit["start_s"]) and second > 5
        page = await opened(world.browser, link)
        assert abs((await media_state(page))["t"] - second) < 1.0
        await page.close()

        first = data(await client.call_tool("ask", {"question": QUESTION}))
        assert first["citations"][0]["link"].startswith(HOSTED_UI_LINK)
        again = data(
            await client.call_tool(
                "ask", {"question": "and what about it?", "session_id": first["session_id"]}
            )
        )
        assert again["standalone_query"] == "limits of the Cognito hosted UI login page"
        assert again["citations"][0]["start_s"] == HOSTED_UI_S

        transcript = await client.call_tool("transcript", {"source": "kickoff", "end_s": 60})
        said = text(transcript)
        assert "(0:00) Priya Raman:" in said and "(end of the range)" in said


async def test_over_stdio_a_client_that_goes_away_mid_ask_cancels_it(world: World) -> None:
    hung_up = world.claude.hung_up
    session = uuid.uuid4().hex
    started = asyncio.Event()

    async def progress(progress: float, total: float | None, message: str | None) -> None:
        if message and "writing" in message.lower():
            started.set()

    async with over_stdio(world, free_port()) as client:
        call = asyncio.create_task(
            client.call_tool(
                "ask", {"question": SLOW, "session_id": session}, progress_callback=progress
            )
        )
        await asyncio.wait_for(started.wait(), 60)
        await asyncio.sleep(0.3)
    # The client closed the process's stdin (and ended it): the answer went with it.
    call.cancel()
    with contextlib.suppress(BaseException):
        await call
    for _ in range(50):
        if world.claude.hung_up > hung_up:
            break
        await asyncio.sleep(0.1)
    assert world.claude.hung_up == hung_up + 1
    thread = ThreadKey("mcp", world.kb, "mcp", session)
    assert await world.served.services.sessions.history(thread, 10) == []


async def test_a_hostile_caller_gets_a_short_refusal(world: World) -> None:
    """With a good token, what is not an MCP request is refused whole, without a traceback:
    a body past the port's limit, a body that is not JSON, another method than POST."""
    http, url = world.served.http, f"{world.served.url}/mcp"
    auth = {
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": "2025-11-25",
    }
    huge = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "x": "' + b"a" * 300_000 + b'"}'
    async with http.post(url, data=huge, headers=auth) as r:
        assert r.status == 413
    async with http.post(url, data=b"{not json", headers=auth) as r:
        body = await r.text()
        assert r.status == 400 and "Parse error" in body and "Traceback" not in body
    for method in ("GET", "DELETE", "PUT"):  # no stream to hold open, no session to end
        async with http.request(method, url, headers=auth) as r:
            assert r.status == 405 and r.headers["Allow"] == "POST"
            assert "POST" in (await r.json())["error"]
    async with http.get(f"{world.served.url}/healthz") as r:
        assert r.status == 200  # the port is still up


def test_serve_and_chat_do_not_import_the_sdk_until_an_mcp_request() -> None:
    """The SDK takes seconds to import on a busy machine: ``quorum serve``'s port (and
    ``quorum chat``'s pages) open without it."""
    import subprocess

    code = "import sys, adapters.http.server; print(sorted({'mcp', 'mcp_types'} & {*sys.modules}))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


async def test_over_stdio_a_core_that_cannot_start_says_why_in_each_tool(
    world: World, tmp_path: Path
) -> None:
    closed = free_port()  # nothing listens there
    env = {
        **world.env,
        "QUORUM_DATA_DIR": str(tmp_path / "data"),
        "QUORUM_WEAVIATE_URL": f"http://127.0.0.1:{closed}",
        "QUORUM_HTTP_PORT": str(free_port()),
    }
    params = StdioServerParameters(command=str(QUORUM), args=["mcp", "--kb", "demo"], env=env)
    async with Client(params, read_timeout_seconds=120) as client:
        assert len((await client.list_tools()).tools) == 5  # it answers all the same
        for tool, args in (("search", {"query": "x"}), ("ask", {"question": "why?"})):
            said = text(await client.call_tool(tool, args))
            assert said.startswith("Quorum could not start: ") and f":{closed}" in said, said
            assert "Restart this MCP server" in said and "Traceback" not in said


async def test_long_results_are_paged_without_gaps_or_repeats(world: World) -> None:
    async with over_http(world) as client:
        for source in ("kickoff", "warehouse-planning"):
            whole = data(await client.call_tool("transcript", {"source": source}))
            assert whole["next_offset"] is None
            lines, offset, calls = [], 0, 0
            while offset is not None:
                page = await client.call_tool(
                    "transcript", {"source": source, "offset": offset, "limit": 1}
                )
                lines += data(page)["lines"]
                offset = data(page)["next_offset"]
                calls += 1
                if offset is not None:
                    assert f"offset={offset}" in text(page)  # the model is told how to go on
            assert calls >= 2, source
            said = " ".join(t["text"] for t in lines)
            assert said == " ".join(t["text"] for t in whole["lines"]), source  # no repeats

        first = data(await client.call_tool("sources", {"limit": 2}))
        rest = data(await client.call_tool("sources", {"offset": first["next_offset"]}))
        ids = [s["id"] for s in first["sources"] + rest["sources"]]
        assert len(ids) == len(set(ids)) == first["total"] == 4 and rest["next_offset"] is None
