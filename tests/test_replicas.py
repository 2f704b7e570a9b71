"""Two replicas: two real ``quorum serve`` processes share one PostgreSQL (the session
server) and one Weaviate (the session server). Slack delivers every question to both, as
a load balancer retrying or a second deployment would; each question gets exactly one
answer, and both replicas see the same history."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import aiohttp
import asyncpg
import pytest

from bot.models import ThreadKey
from bot.sessions.postgres import PostgresSessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.emulators.anthropic import API_KEY, AnthropicEmulator, Reply
from tests.emulators.slack import BOT_TOKEN, BOT_USER, SIGNING_SECRET, TEAM, SlackEmulator
from tests.sample_archive import load_sample
from tests.test_lifecycle import free_port, quorum_serve
from tests.test_slack import GENERAL, bot_replies

QUESTIONS = 12
START_S = 420.0  # two cold starts (torch, the model) side by side on a shared 2-core runner

pytestmark = pytest.mark.timeout(START_S + 180)
ANSWER = "We moved to **Cognito** because Auth0 cost too much [1]."


async def test_two_replicas_on_postgres_answer_each_question_exactly_once(
    tmp_path: Path,
    postgres_url: str,
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    kb: str,
) -> None:
    await load_sample(store, embedder, kb)
    reply = Reply(text=ANSWER, chunk_delay_s=0.01)
    async with SlackEmulator() as slack, AnthropicEmulator(default=reply) as claude:
        ports = [free_port(), free_port()]
        common = {
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "QUORUM_SLACK_API_URL": slack.api_url,
            "QUORUM_SLACK_KB": kb,
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": claude.url,
            "QUORUM_LLM_MAX_RETRIES": "0",
            "QUORUM_DATABASE_URL": postgres_url,
            "QUORUM_WEAVIATE_MODE": "local",
            "QUORUM_WEAVIATE_URL": weaviate_endpoint.url,
            "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate_endpoint.grpc_port),
        }
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        async with (
            quorum_serve(common | {"QUORUM_SLACK_PORT": str(ports[0])}, tmp_path / "a") as a,
            quorum_serve(common | {"QUORUM_SLACK_PORT": str(ports[1])}, tmp_path / "b") as b,
        ):
            t0 = time.monotonic()
            for ready in await asyncio.gather(a.ready(START_S), b.ready(START_S)):
                assert ready["checks"]["database"] == "ok"
            print(f"both ready after {time.monotonic() - t0:.1f}s")

            targets = [f"http://127.0.0.1:{port}/slack/events" for port in ports]
            asked = [
                slack.user_posts(GENERAL, f"<@{BOT_USER}> why did we leave Auth0? ({i})")
                for i in range(QUESTIONS)
            ]
            async with aiohttp.ClientSession() as http:

                async def deliver(target: str, body: str) -> int:
                    headers = slack.signed(body, "application/json")
                    async with http.post(target, data=body.encode(), headers=headers) as r:
                        return r.status

                # Every event reaches both replicas at the same moment.
                bodies = [json.dumps(slack.event(msg, "app_mention")) for msg in asked]
                statuses = await asyncio.gather(
                    *(deliver(target, body) for body in bodies for target in targets)
                )
            assert statuses == [200] * (2 * QUESTIONS)

            def answered() -> bool:
                return all(
                    any("Cognito" in r.all_text() for r in bot_replies(slack, GENERAL, m.ts))
                    for m in asked
                )

            await slack.wait_for(answered, within_s=60)
            await asyncio.sleep(2.0)  # time for a duplicate to show up, if there were one
            logs = [(d / "serve.log").read_text() for d in (tmp_path / "a", tmp_path / "b")]

        replies = {m.ts: bot_replies(slack, GENERAL, m.ts) for m in asked}
        assert {ts: len(r) for ts, r in replies.items()} == {m.ts: 1 for m in asked}
        assert len(claude.requests) == QUESTIONS  # no replica answered a question twice
        for log in logs:
            assert "Traceback" not in log, log

    # Both replicas wrote to the one store: every question is there once.
    conn = await asyncpg.connect(postgres_url)
    try:
        stored = await conn.fetchval("SELECT count(*) FROM exchanges")
        claims = await conn.fetchval("SELECT count(*) FROM processed_events")
    finally:
        await conn.close()
    assert (stored, claims) == (QUESTIONS, QUESTIONS)
    async with PostgresSessionStore.open(postgres_url) as sessions:
        history = await sessions.history(ThreadKey("slack", TEAM, GENERAL, asked[0].ts))
        assert [h.question for h in history] == ["why did we leave Auth0? (0)"]
