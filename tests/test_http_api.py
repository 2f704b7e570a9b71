"""The HTTP server through a real HTTP client (aiohttp): health, readiness, metrics that
move after a question, and the JSON API's answers, streams and refusals. The core is the
real one (the session Weaviate with the sample archive, SQLite, the anthropic SDK against
the Claude emulator)."""

from __future__ import annotations

import json
import re
import socket
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
import pytest_asyncio

from adapters.http.problems import STOPPING
from adapters.http.server import OpsServer, local_pages
from bot.config import load_settings
from bot.metrics import MeteredCore, Metrics
from bot.models import Actor
from bot.wiring import CoreServices, open_core, retrieval_config
from retrieval.encoding.embed import LazyEmbedder, SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.service import Retrieval
from retrieval.store.weaviate import WeaviateStore
from tests.emulators.anthropic import API_KEY, AnthropicEmulator
from tests.sample_archive import load_sample
from tests.test_slack_e2e import FAST_MODEL, HOSTED_UI_LINK, claude

TOKEN, OTHER_TOKEN = "tok-sample", "tok-other"
QUESTION = "What are the limits of the hosted UI login page?"


@dataclass
class Running:
    url: str
    kb: str
    server: OpsServer
    claude: AnthropicEmulator
    http: aiohttp.ClientSession

    def auth(self, token: str = TOKEN) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"}

    async def metrics(self) -> dict[str, float]:
        """Every sample of /metrics, by name and labels."""
        async with self.http.get(f"{self.url}/metrics") as r:
            assert r.status == 200 and r.content_type == "text/plain"
            text = await r.text()
        samples = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                samples[name] = float(value)
        return samples


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def served(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Running]:
    """The ops server on a free port, with the core as ``quorum serve`` attaches it; one
    for the module (the sample archive is embedded once)."""
    kb = f"t{uuid.uuid4().hex[:12]}"
    await load_sample(store, embedder, kb)
    async with AnthropicEmulator(default=claude) as emulator:
        settings = load_settings(
            data_dir=tmp_path_factory.mktemp("api") / "data",
            anthropic_api_key=API_KEY,
            anthropic_base_url=emulator.url,
            fast_model=FAST_MODEL,
            llm_max_retries=0,
            api_tokens=f"{TOKEN}:{kb},{OTHER_TOKEN}:elsewhere",
        )
        settings.data_dir.mkdir(parents=True)
        lazy = LazyEmbedder(None, settings.embed_batch_size)
        lazy._model = embedder  # the session's model, already loaded
        search = SearchService(store, lazy)
        config = retrieval_config(settings)
        retrieval = Retrieval(config, store, lazy, search, config.transcriber())
        server = OpsServer(settings)
        port = await server.start(0, "127.0.0.1")
        url = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{url}/healthz") as r:
                assert r.status == 200
            async with http.get(f"{url}/readyz") as r:
                assert r.status == 503  # alive, not ready: the core is not attached yet
                assert (await r.json())["checks"]["model"] == "loading"
            async with open_core(settings, retrieval=retrieval) as services:
                metrics = Metrics(services.llm)
                server.attach(services, MeteredCore(services.engine, metrics), metrics)
                server.readiness.set("model", None)
                try:
                    yield Running(url, kb, server, emulator, http)
                finally:
                    await server.stop()


@pytest.fixture
def running(served: Running) -> Running:
    """The module's server, with Claude's recorded requests cleared."""
    served.claude.requests.clear()
    served.server.readiness.stopping = False
    return served


async def test_readyz_and_metrics_move_after_a_question(running: Running) -> None:
    async with running.http.get(f"{running.url}/readyz") as r:
        assert r.status == 200
        assert await r.json() == {
            "status": "ready",
            "checks": {"weaviate": "ok", "database": "ok", "model": "ok"},
        }
    before = await running.metrics()
    asked = 'quorum_questions_total{mode="quick",outcome="answer",platform="api"}'

    async with running.http.post(
        f"{running.url}/api/ask", json={"question": QUESTION}, headers=running.auth()
    ) as r:
        assert r.status == 200
        answer = await r.json()
    assert answer["kind"] == "answer" and HOSTED_UI_LINK in json.dumps(answer["citations"])

    after = await running.metrics()

    def moved(name: str) -> float:
        return after[name] - before.get(name, 0.0)

    assert moved(asked) == 1.0
    for stage in ("search", "llm", "total"):
        assert moved(f'quorum_answer_seconds_count{{stage="{stage}"}}') == 1.0
    assert moved('quorum_answer_seconds_sum{stage="total"}') > 0
    assert moved('quorum_llm_tokens_total{backend="claude",kind="output"}') > 0
    assert moved('quorum_llm_tokens_total{backend="claude",kind="input"}') > 0
    assert moved("quorum_active_sessions") == 1.0  # a new session (thread)
    assert after["quorum_questions_in_flight"] == 0.0

    running.server.readiness.stopping = True  # what SIGTERM does first
    async with running.http.get(f"{running.url}/readyz") as r:
        assert r.status == 503 and (await r.json())["status"] == "stopping"
    async with running.http.post(
        f"{running.url}/api/ask", json={"question": QUESTION}, headers=running.auth()
    ) as r:
        assert r.status == 503 and (await r.json())["error"] == STOPPING
    assert (await running.metrics())[asked] == after[asked]  # no new question was taken


async def test_ask_as_one_json_then_a_follow_up_in_the_session(running: Running) -> None:
    url, auth = running.url, running.auth()
    async with running.http.post(f"{url}/api/ask", json={"question": QUESTION}, headers=auth) as r:
        first = await r.json()
    session = first["session_id"]
    follow = {"question": "and what about a custom domain?", "session_id": session}
    async with running.http.post(f"{url}/api/ask", json=follow, headers=auth) as r:
        assert r.status == 200
        second = await r.json()
    assert second["session_id"] == session and second["standalone_query"]
    async with running.http.get(f"{url}/api/sessions/{session}", headers=auth) as r:
        assert r.status == 200
        stored = await r.json()
    assert [e["question"] for e in stored["exchanges"]] == [QUESTION, follow["question"]]
    assert [e["exchange_id"] for e in stored["exchanges"]] == [
        first["exchange_id"],
        second["exchange_id"],
    ]

    vote = {"session_id": session, "exchange_id": first["exchange_id"], "value": -1}
    async with running.http.post(f"{url}/api/feedback", json=vote, headers=auth) as r:
        assert r.status == 200
    services = running.server.services
    assert services is not None
    assert await services.sessions.feedback(first["exchange_id"]) == {"api": -1}
    unknown = {**vote, "exchange_id": first["exchange_id"] + 1000}
    async with running.http.post(f"{url}/api/feedback", json=unknown, headers=auth) as r:
        assert r.status == 404 and "No answer" in (await r.json())["error"]


async def test_ask_streams_progress_partials_then_the_answer(running: Running) -> None:
    body = {"question": QUESTION, "stream": True}
    async with running.http.post(f"{running.url}/api/ask", json=body, headers=running.auth()) as r:
        assert r.status == 200 and r.content_type == "text/event-stream"
        raw = (await r.read()).decode()
    events = [(m[1], json.loads(m[2])) for m in re.finditer(r"event: (\w+)\ndata: (.*)\n\n", raw)]
    kinds = [k for k, _ in events]
    assert kinds[0] == "progress" and kinds[-1] == "answer"
    assert "partial" in kinds and kinds.count("answer") == 1
    partials = [d["text"] for k, d in events if k == "partial"]
    assert partials[-1].startswith("The **hosted UI** is the weak spot")
    final = events[-1][1]
    assert final["kind"] == "answer" and final["exchange_id"] and final["session_id"]


async def test_search_and_sources(running: Running) -> None:
    url, auth = running.url, running.auth()
    query = {"query": "hosted UI login page", "k": 3}
    async with running.http.post(f"{url}/api/search", json=query, headers=auth) as r:
        assert r.status == 200
        found = await r.json()
    assert len(found["hits"]) == 3
    assert found["hits"][0]["source"]["title"] == "Auth deep dive"
    async with running.http.get(f"{url}/api/sources", headers=auth) as r:
        assert r.status == 200
        sources = (await r.json())["sources"]
    assert {s["title"] for s in sources} == {
        "Auth kickoff",
        "Auth deep dive",
        "Auth migration plan",
    }
    # What Quorum holds of each (ingested from disk here: no copy kept), never its path.
    assert all(s["media_kept"] is False and s["transcript_kept"] is False for s in sources)
    assert all({"size_bytes", "added_at", "added_by", "kept_bytes"} <= set(s) for s in sources)
    assert not any("path" in s for s in sources)


async def test_jobs_are_listed_for_the_tokens_knowledge_base_only(
    running: Running, tmp_path: Path
) -> None:
    services = running.server.services
    assert services is not None
    note = tmp_path / "private-notes" / "standup.txt"
    note.parent.mkdir()
    note.write_text("[00:00:05] Ana: The flumox cache evicts entries.\n")
    [mine], _ = await services.jobs.add(running.kb, [note], Actor("cli", "ana"))
    [theirs], _ = await services.jobs.add("elsewhere", [note], Actor("cli", "bo"))
    url = running.url
    async with running.http.get(f"{url}/api/jobs", headers=running.auth()) as r:
        assert r.status == 200
        body = await r.json()
    assert body["kb"] == running.kb
    assert [(j["id"], j["file"], j["state"]) for j in body["jobs"]] == [
        (mine.id, "standup.txt", "queued")
    ]
    assert "private-notes" not in json.dumps(body)  # a file's name, never its path
    async with running.http.get(
        f"{url}/api/jobs", params={"kb": "elsewhere"}, headers=running.auth()
    ) as r:
        assert r.status == 403
    async with running.http.get(f"{url}/api/jobs", headers=running.auth(OTHER_TOKEN)) as r:
        assert [j["id"] for j in (await r.json())["jobs"]] == [theirs.id]
    for bad in ("0", "-1", "x", "501"):
        async with running.http.get(
            f"{url}/api/jobs", params={"limit": bad}, headers=running.auth()
        ) as r:
            assert r.status == 422 and (await r.json())["field"] == "limit"
    async with running.http.get(f"{url}/api/jobs") as r:
        assert r.status == 401
    # /metrics: what an autoscaler of workers reads (the whole queue, every replica alike).
    assert running.server.metrics is not None
    await running.server.metrics.jobs().read(services.jobs.table)
    samples = await running.metrics()
    assert samples['quorum_jobs{state="queued"}'] >= 2
    assert samples['quorum_jobs_queued{lane="write"}'] >= 2
    assert samples["quorum_jobs_oldest_queued_seconds"] >= 0
    assert samples["quorum_workers"] == 0
    # A running job's stage, as its worker's heartbeat writes it.
    table = services.jobs.table
    assert await table.claim("write", "box-2:41:ab", 30.0, job_id=mine.id)
    await table.beat(mine.id, "box-2:41:ab", None, "writing")
    async with running.http.get(f"{url}/api/jobs", headers=running.auth()) as r:
        [job] = (await r.json())["jobs"]
    assert (job["state"], job["stage"]) == ("running", "writing")
    await services.jobs.cancel(mine.id)
    await services.jobs.cancel(theirs.id)


@pytest.mark.parametrize(
    ("headers", "status", "says"),
    [
        ({}, 401, "Authorization: Bearer"),
        ({"Authorization": "Bearer nope"}, 401, "Unknown API token"),
        ({"Authorization": f"Basic {TOKEN}"}, 401, "Authorization: Bearer"),
        ({"Authorization": "Bearer tøk-sämple"}, 401, "Unknown API token"),
        ({"Authorization": f"Bearer {TOKEN}\u00e9"}, 401, "Unknown API token"),
    ],
)
async def test_a_missing_or_unknown_token_is_401(
    running: Running, headers: dict[str, str], status: int, says: str
) -> None:
    for method, path, body in (
        ("POST", "/api/ask", {"question": QUESTION}),
        ("POST", "/api/ask", {"mode": "a bad body"}),
        ("GET", "/api/sources", None),
        ("GET", "/api/sessions/abc", None),
    ):
        async with running.http.request(
            method, f"{running.url}{path}", json=body, headers=headers
        ) as r:
            assert r.status == status, path
            assert r.headers["WWW-Authenticate"] == "Bearer"
            assert says in (await r.json())["error"]
    assert not running.claude.requests


async def test_a_token_for_another_knowledge_base_is_403(running: Running) -> None:
    url, other = running.url, running.auth(OTHER_TOKEN)
    theirs = {"question": QUESTION, "kb": running.kb}
    async with running.http.post(f"{url}/api/ask", json=theirs, headers=other) as r:
        assert r.status == 403 and running.kb in (await r.json())["error"]
    async with running.http.get(
        f"{url}/api/sources", params={"kb": "elsewhere"}, headers=running.auth()
    ) as r:
        assert r.status == 403
    # Its own knowledge base is allowed, and it is not this one.
    async with running.http.get(f"{url}/api/sources", headers=other) as r:
        assert r.status == 200 and (await r.json()) == {"kb": "elsewhere", "sources": []}
    assert not running.claude.requests


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/ask", {}, "question"),
        ("/api/ask", {"question": ""}, "question"),
        ("/api/ask", {"question": "q", "mode": "slow"}, "mode"),
        ("/api/ask", {"question": "q", "filters": {"after": "yesterday"}}, "filters.after"),
        ("/api/ask", {"question": "q", "session_id": "a b"}, "session_id"),
        ("/api/ask", {"question": "q", "colour": "red"}, "colour"),
        ("/api/ask", "not json", "body"),
        ("/api/ask", '{"question": ' + "[" * 50_000 + "]" * 50_000 + "}", "body"),
        (
            "/api/search",
            '{"query": "q", "filters": ' + '{"x": ' * 9_000 + "1" + "}" * 9_001,
            "body",
        ),
        ("/api/search", {"query": "q", "k": 0}, "k"),
        ("/api/feedback", {"session_id": "s", "exchange_id": 1, "value": 2}, "value"),
    ],
)
async def test_a_bad_body_is_422_naming_the_field(
    running: Running, path: str, body: Any, field: str
) -> None:
    kwargs: dict[str, Any] = {"data": body} if isinstance(body, str) else {"json": body}
    async with running.http.post(f"{running.url}{path}", headers=running.auth(), **kwargs) as r:
        assert r.status == 422
        problem = await r.json()
    assert problem["field"] == field and problem["error"].startswith(field)
    assert not running.claude.requests


async def test_openapi_describes_every_route(running: Running) -> None:
    async with running.http.get(f"{running.url}/api/openapi.json") as r:
        assert r.status == 200
        doc = await r.json()
    assert doc["openapi"].startswith("3.")
    assert set(doc["paths"]) == {
        "/api/ask",
        "/api/search",
        "/api/sources",
        "/api/jobs",
        "/api/sessions/{id}",
        "/api/feedback",
        "/api/insights",
    }
    ask = doc["components"]["schemas"]["AskBody"]
    assert ask["required"] == ["question"] and "session_id" in ask["properties"]
    assert "Filters" in doc["components"]["schemas"]


async def test_a_terminal_chat_beside_a_running_server_leaves_the_pages_to_it(
    tmp_path: Path,
) -> None:
    """``quorum chat`` (and ``quorum mcp``) next to a ``quorum serve`` on the same port: the
    port is taken, so the chat serves no pages of its own instead of failing to start."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = load_settings(data_dir=tmp_path, http_port=port)
        async with local_pages(settings, cast(CoreServices, None)) as pages:
            assert pages is None
