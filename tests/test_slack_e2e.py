"""Slack end to end through the real core: the Bolt app and AsyncWebClient against the
Slack emulator, the real Engine with its SQLite session store, real Weaviate (the session
server) with the sample archive, and on each model backend the real SDK (anthropic, or
openai with QUORUM_LLM=openai) against the emulator of its API: answers stream into the
thread with citations at the second, and deep research runs its tools."""

from __future__ import annotations

import contextlib
import json
import re
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.slack.app import UPDATE_INTERVAL_S
from adapters.slack.render import ACTION_UP
from bot.config import Settings, load_settings
from bot.engine import SEARCH_DOWN, Engine
from bot.llm import from_settings as llm_from_settings
from bot.models import ThreadKey
from bot.router import ResearchRouter
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint, async_client
from tests.backends import Served, system, tool_names, turns
from tests.emulators.anthropic import AnthropicEmulator, Reply
from tests.emulators.openai import OpenAIEmulator
from tests.emulators.slack import (
    ALICE,
    BOT_TOKEN,
    BOT_USER,
    SIGNING_SECRET,
    TEAM,
    Message,
    SlackEmulator,
    texts_in,
)
from tests.research_script import (
    COST_LINK,
    QUESTION,
    READ,
    SEARCH,
    STEPS,
    script_research,
)
from tests.sample_archive import load_sample
from tests.test_slack import GENERAL, Bot, bot_replies, has_buttons, running

HOSTED_UI_LINK = "https://www.loom.com/share/feedbeef?t=734"
FAST_MODEL = "claude-fast-emulated"
Emulator = AnthropicEmulator | OpenAIEmulator


def _prompt(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


def number_of(prompt: str, needle: str) -> int:
    """The [n] of the source whose passage contains ``needle``."""
    for block in re.split(r"\n(?=\[\d+\])", prompt):
        m = re.match(r"\[(\d+)\]", block)
        if m and needle in block:
            return int(m[1])
    raise AssertionError(f"{needle!r} is not among the sources")


def claude(body: dict[str, Any]) -> Reply:
    """Rewrites follow-ups (fast model), and answers citing the hosted-UI moment."""
    if body["model"] == FAST_MODEL:
        return Reply(text="limits of the Cognito hosted UI login page")
    n = number_of(_prompt(body), "hosted UI")
    return Reply(
        text=f"The **hosted UI** is the weak spot: it can't be fully restyled [{n}].",
        chunk_delay_s=0.01,
    )


@pytest.fixture
def claude_emulator(served: Served, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    """The model's emulator, on each backend in turn, chosen the way an operator does: by
    environment (ANTHROPIC_API_KEY, or QUORUM_LLM=openai with QUORUM_OPENAI_BASE_URL)."""
    served.emu.default = claude
    for name, value in {**served.env(), "QUORUM_FAST_MODEL": FAST_MODEL}.items():
        monkeypatch.setenv(name, value)
    return served.emu


@pytest.fixture
async def sample(store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str) -> str:
    await load_sample(store, embedder, kb)
    return kb


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator


def e2e_settings(
    slack: SlackEmulator, claude_emulator: Emulator, kb: str, tmp_path: Path
) -> Settings:
    """Slack's settings; the model's come from the environment (``claude_emulator``)."""
    settings = load_settings(
        data_dir=tmp_path / "data",
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack.api_url,
        slack_kb=kb,
        llm_max_retries=0,
    )
    assert settings.fast_model == FAST_MODEL and settings.llm_backend is not None
    return settings


@contextlib.asynccontextmanager
async def engine_for(
    settings: Settings, search: SearchService
) -> AsyncIterator[tuple[Engine, SessionStore]]:
    """The Engine as bot.wiring.open_core builds it (with the research router), on a given
    search service."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    async with SessionStore.open(settings.sessions_path) as sessions:
        llm = llm_from_settings(settings)
        assert llm is not None
        research = ResearchRouter.from_settings(settings, llm)
        engine = Engine.from_settings(
            settings, archives=search.archive, sessions=sessions, llm=llm, research=research
        )
        try:
            yield engine, sessions
        finally:
            await llm.aclose()


@contextlib.asynccontextmanager
async def quorum(
    slack: SlackEmulator, settings: Settings, search: SearchService, interval_s: float = 0.05
) -> AsyncIterator[tuple[Bot, Engine, SessionStore]]:
    async with (
        engine_for(settings, search) as (engine, sessions),
        running(engine, settings, slack, interval_s=interval_s) as bot,
    ):
        yield bot, engine, sessions


async def ask_mention(
    slack: SlackEmulator, bot: Bot, text: str, thread_ts: str | None = None
) -> Message:
    msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> {text}", thread_ts=thread_ts)
    assert (await slack.deliver_event(slack.event(msg, "app_mention"))).status == 200
    await bot.settle()
    return msg


async def test_mention_to_cited_answer_then_a_follow_up_uses_the_thread(
    slack: SlackEmulator,
    claude_emulator: Emulator,
    sample: str,
    search: SearchService,
    tmp_path: Path,
) -> None:
    settings = e2e_settings(slack, claude_emulator, sample, tmp_path)
    async with quorum(slack, settings, search) as (bot, _, sessions):
        first = await ask_mention(slack, bot, "What are the limits of the hosted UI login page?")
        [reply] = bot_replies(slack, GENERAL, first.ts)
        final = reply.all_text()
        assert f"[<{HOSTED_UI_LINK}|" in final  # the citation opens the recording at 12:14
        assert f"<{HOSTED_UI_LINK}|Auth deep dive @ 12:14> — John Park" in final
        assert "The *hosted UI* is the weak spot" in final and has_buttons(reply)
        assert len(reply.versions) >= 3  # placeholder, progress/partials, final
        assert not slack.errors()

        follow = slack.user_posts(GENERAL, "and what about a custom domain?", thread_ts=first.ts)
        await slack.deliver_event(slack.event(follow))
        await bot.settle()
        replies = bot_replies(slack, GENERAL, first.ts)
        assert len(replies) == 2 and HOSTED_UI_LINK in replies[1].all_text()

        rewrite = [r for r in claude_emulator.requests if r.body.get("model") == FAST_MODEL]
        assert rewrite, "the follow-up was not rewritten with the thread's history"
        assert "What are the limits of the hosted UI login page?" in json.dumps(rewrite[-1].body)
        answer_call = claude_emulator.requests[-1].body
        assert turns(answer_call)[0]["text"] == "What are the limits of the hosted UI login page?"
        assert answer_call["model"] == settings.model and turns(answer_call)[1]["text"]

        history = await sessions.history(ThreadKey("slack", TEAM, GENERAL, first.ts))
        assert [e.question for e in history] == [
            "What are the limits of the hosted UI login page?",
            "and what about a custom domain?",
        ]


async def test_research_shows_each_step_then_the_answer_citing_both_steps(
    slack: SlackEmulator,
    claude_emulator: Emulator,
    sample: str,
    search: SearchService,
    tmp_path: Path,
) -> None:
    settings = e2e_settings(slack, claude_emulator, sample, tmp_path)
    cited = script_research(claude_emulator)
    async with quorum(slack, settings, search, UPDATE_INTERVAL_S) as (bot, _, sessions):
        assert (await slack.deliver_command(slack.command("/research", QUESTION))).status == 200
        await bot.settle()

        [echo] = slack.top_level(GENERAL)
        assert f"asked for deep research:* {QUESTION}" in echo.all_text()
        [reply] = bot_replies(slack, GENERAL, echo.ts)
        assert {c.args["ts"] for c in slack.called("chat.update")} == {reply.ts}
        shown = ["\n".join(texts_in(v["blocks"])) for v in reply.versions]
        # The placeholder, then each step as it ran (one update a second), then the answer
        # (the answer's text may show once as it is written, before its final form).
        assert shown[0] == "Researching the archive…"
        assert shown[1:3] == [f"_{step}…_" for step in STEPS]
        assert len(shown) in (4, 5)
        final = shown[-1]
        assert final.startswith("We left Auth0 over cost")
        cost_link = COST_LINK.replace("&", "&amp;")
        assert f"[<{cost_link}|{cited['cost']}>]" in final  # opens the cost sentence
        assert f"[<{HOSTED_UI_LINK}|{cited['hosted_ui']}>]" in final  # the deep dive at 12:14
        assert f"<{cost_link}|Auth kickoff @ 1:06> — John Park" in final
        assert f"<{HOSTED_UI_LINK}|Auth deep dive @ 12:14> — John Park" in final
        assert ":information_source:" not in final and "not available" not in final
        assert has_buttons(reply) and not slack.errors() and not slack.responses

        # Claude researched the archive of this workspace's knowledge base, with the tools.
        bodies = [r.body for r in claude_emulator.requests]
        assert len(bodies) == 3 and all(tool_names(b) for b in bodies)
        assert "- kickoff | 'Auth kickoff' | video | 2024-01-09" in system(bodies[0])
        actions = next(b for b in reply.versions[-1]["blocks"] if b["type"] == "actions")
        exchange_id = int(actions["elements"][0]["value"])
        stored = await sessions.exchange(exchange_id)
        assert stored is not None and stored["mode"] == "deep" and stored["question"] == QUESTION
        steps = stored["research_trace"]["steps"]
        assert [(s["turn"], s["tool"], s["args"], s["is_error"]) for s in steps] == [
            (1, "search", SEARCH, False),
            (2, "get_transcript", READ, False),
        ]
        assert cited["cost"] in steps[0]["passages"]
        assert cited["hosted_ui"] in steps[1]["passages"]
        [logged] = await sessions.recent_queries()
        assert (logged["kb"], logged["query"], logged["exchange_id"]) == (
            sample,
            SEARCH["query"],
            exchange_id,
        )


async def test_feedback_and_exactly_once_survive_a_restart(
    slack: SlackEmulator,
    claude_emulator: Emulator,
    sample: str,
    search: SearchService,
    tmp_path: Path,
) -> None:
    settings = e2e_settings(slack, claude_emulator, sample, tmp_path)
    async with quorum(slack, settings, search) as (bot, _, sessions):
        msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> What's wrong with the hosted UI?")
        for payload, retry in (
            (slack.event(msg, "app_mention"), None),
            (slack.event(msg, "message"), None),
            (slack.event(msg, "app_mention"), 1),
        ):
            await slack.deliver_event(payload, retry_num=retry)
        await bot.settle()
        [reply] = bot_replies(slack, GENERAL, msg.ts)
        await slack.deliver_action(slack.block_action(reply, ACTION_UP))
        await bot.settle()
        exchange_id = int(
            next(b for b in reply.versions[-2]["blocks"] if b["type"] == "actions")["elements"][0][
                "value"
            ]
        )
        assert await sessions.feedback(exchange_id) == {ALICE: 1}
        assert "Thanks — feedback recorded 👍" in reply.all_text()
    calls = len(claude_emulator.requests)

    async with quorum(slack, settings, search) as (bot, _, _):
        await slack.deliver_event(slack.event(msg, "app_mention"), retry_num=2)
        await bot.settle()
    assert len(bot_replies(slack, GENERAL, msg.ts)) == 1
    assert len(claude_emulator.requests) == calls


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_weaviate_down_is_a_polite_message_in_the_thread(
    slack: SlackEmulator,
    claude_emulator: Emulator,
    embedder: SentenceTransformerEmbedder,
    kb: str,
    tmp_path: Path,
) -> None:
    port, grpc = _closed_port(), _closed_port()
    endpoint = Endpoint("127.0.0.1", port, "127.0.0.1", grpc)
    down = WeaviateStore(async_client(endpoint, timeout_s=2), endpoint.url)  # nothing listens there
    settings = e2e_settings(slack, claude_emulator, kb, tmp_path)
    try:
        async with quorum(slack, settings, SearchService(down, embedder)) as (bot, _, _):
            msg = await ask_mention(slack, bot, "What are the limits of the hosted UI?")
    finally:
        with contextlib.suppress(Exception):
            await down.client.close()
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert f":warning: {SEARCH_DOWN}" in reply.all_text()
    assert "Traceback" not in reply.all_text() and not has_buttons(reply)
    assert not claude_emulator.requests


@pytest.mark.parametrize("refused", [None, "not_allowed"])
async def test_the_assistant_panel_streams_a_cited_answer_or_falls_back_to_edits(
    slack: SlackEmulator,
    claude_emulator: Emulator,
    sample: str,
    search: SearchService,
    tmp_path: Path,
    refused: str | None,
) -> None:
    """Panel opened → prompts from the archive → question → status → the answer streamed
    (or, when Slack refuses the stream, today's edits) with its citation at 12:14 →
    feedback stored."""
    settings = e2e_settings(slack, claude_emulator, sample, tmp_path)
    slack.refuse_streams = refused
    async with quorum(slack, settings, search) as (bot, _, sessions):
        started = slack.open_assistant(viewing=GENERAL)
        await slack.deliver_event(started)
        await bot.settle()
        thread = started["event"]["assistant_thread"]["thread_ts"]
        prompts = slack.prompts[("D0ALICE", thread)]
        titles = {"Auth kickoff", "Auth deep dive", "Auth migration plan"}
        assert {p["message"].split('source:"')[-1].rstrip('"') for p in prompts[:2]} <= titles

        msg = slack.user_posts(
            "D0ALICE", "What are the limits of the hosted UI login page?", thread_ts=thread
        )
        await slack.deliver_event(slack.event(msg))
        await bot.settle()
        [reply] = bot_replies(slack, "D0ALICE", thread)
        assert f"[<{HOSTED_UI_LINK}|" in reply.all_text()  # the citation opens 12:14
        assert "The *hosted UI* is the weak spot" in reply.all_text() and has_buttons(reply)
        if refused is None:
            assert reply.streaming is False and len(reply.appended) >= 1
            assert slack.statuses[("D0ALICE", thread)][0] == "Searching the archive…"
            assert not slack.errors()
        else:
            assert reply.streaming is None and len(reply.versions) >= 2  # posted, then edited
            assert reply.versions[0]["text"] == "Searching the archive…"
            assert [c.error for c in slack.errors()] == [refused]

        await slack.deliver_action(slack.block_action(reply, ACTION_UP))
        await bot.settle()
        actions = next(b for b in reply.versions[-2]["blocks"] if b["type"] == "actions")
        assert await sessions.feedback(int(actions["elements"][0]["value"])) == {ALICE: 1}
