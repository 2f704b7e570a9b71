"""Discord end to end through the real core: discord.py against the Discord emulator, the
real Engine with its SQLite session store, real Weaviate (the session server) holding the
sample archive, and on each model backend the real SDK (anthropic, or openai with
QUORUM_LLM=openai) against the emulator of its API."""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import discord
import pytest
from discord.gateway import DiscordWebSocket

from adapters.discord.channels import conversation
from adapters.discord.cli import sync_commands
from adapters.discord.render import RESEARCH_PLACEHOLDER
from bot.config import Settings, load_settings
from bot.engine import Engine
from bot.llm import from_settings as llm_from_settings
from bot.router import ResearchRouter
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from tests.backends import Served, system, tool_names
from tests.emulators.anthropic import AnthropicEmulator, Reply
from tests.emulators.discord import DiscordEmulator
from tests.emulators.openai import OpenAIEmulator
from tests.research_script import COST_LINK, QUESTION, READ, SEARCH, STEPS, script_research
from tests.sample_archive import load_sample
from tests.test_discord import ALICE, CHANNEL, GUILD, WEBHOOK, Harness, final_edit

HOSTED_UI = "https://www.loom.com/share/feedbeef?t=734"  # Auth deep dive @ 12:14
RESTYLE = "https://www.loom.com/share/feedbeef?t=744"  # "We can't fully restyle...", 12:24
FAST_MODEL = "claude-fast-emulated"
Emulator = AnthropicEmulator | OpenAIEmulator


def claude(body: dict[str, Any]) -> Reply:
    """Rewrites follow-ups (fast model); answers citing the source about the hosted UI."""
    if body["model"] == FAST_MODEL:
        return Reply(text="limits of the Cognito hosted UI login page")
    content = body["messages"][-1]["content"]
    prompt = content if isinstance(content, str) else json.dumps(content)
    blocks = re.split(r"\n(?=\[\d+\])", prompt.replace("\\n", "\n"))
    n = next(int(m[1]) for b in blocks if (m := re.match(r"\[(\d+)\]", b)) and "hosted UI" in b)
    more = " It keeps Cognito's domain, and only the logo and a few colours can change."
    # The first answer streams over ~2 s, so the adapter shows the text as it is written.
    delay = 0.25 if "login page" in prompt else 0.01
    return Reply(
        text=f"The **hosted UI** can't be fully restyled [{n}].{more}", chunk_delay_s=delay
    )


@pytest.fixture
def claude_emulator(served: Served, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    """The model's emulator, on each backend in turn, chosen by environment."""
    served.emu.default = claude
    for name, value in {**served.env(), "QUORUM_FAST_MODEL": FAST_MODEL}.items():
        monkeypatch.setenv(name, value)
    return served.emu


@pytest.fixture
async def discord_emulator() -> AsyncIterator[DiscordEmulator]:
    old, old_gateway = discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    async with DiscordEmulator() as emulator:
        yield emulator
        assert emulator.unexpected == []
    discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = old, old_gateway


@pytest.fixture
async def sample(store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str) -> str:
    await load_sample(store, embedder, kb)
    return kb


@contextlib.asynccontextmanager
async def engine_for(settings: Settings, search: SearchService) -> AsyncIterator[Engine]:
    """The Engine as bot.wiring.open_core builds it (with the research router), on the
    session's search service."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    async with SessionStore.open(settings.sessions_path) as sessions:
        llm = llm_from_settings(settings)
        assert llm is not None
        research = ResearchRouter.from_settings(settings, llm)
        try:
            yield Engine.from_settings(
                settings, archives=search.archive, sessions=sessions, llm=llm, research=research
            )
        finally:
            await llm.aclose()


def e2e_settings(
    discord_emu: DiscordEmulator, claude_emu: Emulator, kb: str, tmp_path: Path
) -> Settings:
    """Discord's settings; the model's come from the environment (``claude_emulator``)."""
    return load_settings(
        data_dir=tmp_path / "data",
        discord_token=discord_emu.token,
        discord_api_url=discord_emu.url,
        discord_guild_id=GUILD,
        discord_kb=kb,
        llm_max_retries=0,
    )


async def test_ask_cites_the_second_then_the_thread_continues_and_feedback_sticks(
    discord_emulator: DiscordEmulator,
    claude_emulator: Emulator,
    sample: str,
    search: SearchService,
    tmp_path: Path,
) -> None:
    emu = discord_emulator
    settings = e2e_settings(emu, claude_emulator, sample, tmp_path)
    await sync_commands(settings, globally=False)
    async with engine_for(settings, search) as engine:
        bot = Harness(emu, engine, settings)
        await bot.start()
        try:
            first = "What are the limits of the hosted UI login page?"
            await bot.send("INTERACTION_CREATE", emu.slash("ask", CHANNEL, ALICE, question=first))
            body = final_edit(emu, rf"{WEBHOOK}/messages/\d+")
            assert body["content"].startswith("The **hosted UI** can't be fully restyled [[")
            # the citation opens the sentence it relies on, not the remark's start (12:14)
            assert f"(<{RESTYLE}>)" in body["content"]
            description = body["embeds"][0]["description"]
            assert f"[Auth deep dive @ 12:24]({RESTYLE})" in description
            assert "John Park" in description
            edits = emu.find("PATCH", rf"{WEBHOOK}/messages/\d+")
            assert len(edits) >= 2  # the text as it streamed, then the final answer
            assert any(e.body["content"].endswith("-# writing…") for e in edits[:-1])
            (thread_call,) = emu.find("POST", r"/channels/\d+/messages/\d+/threads")
            thread_id = int(thread_call.path.split("/")[4])

            # A follow-up in the thread, without a mention, continues the session.
            follow = emu.post(thread_id, ALICE, "and what about a custom domain?")
            await bot.send("MESSAGE_CREATE", follow)
            assert RESTYLE in emu.channel_messages(thread_id)[-1]["content"]
            rewrites = [r for r in claude_emulator.requests if r.body.get("model") == FAST_MODEL]
            assert rewrites and first in json.dumps(rewrites[-1].body)
            history = await engine.sessions.history(conversation(GUILD, thread_id))
            assert [e.question for e in history] == [first, "and what about a custom domain?"]

            # Feedback is stored, and a click after a restart still lands.
            answered = next(m for m in emu.messages.values() if m.get("components"))
            up = answered["components"][0]["components"][0]["custom_id"]
            exchange_id = int(up.rsplit(":", 1)[1])
            await bot.send("INTERACTION_CREATE", emu.click(int(answered["id"]), up, ALICE))
            assert await engine.sessions.feedback(exchange_id) == {ALICE["id"]: 1}
            calls = len(claude_emulator.requests)
            await bot.start()
            down = up.replace(":up:", ":down:")
            await bot.send("INTERACTION_CREATE", emu.click(int(answered["id"]), down, ALICE))
            assert await engine.sessions.feedback(exchange_id) == {ALICE["id"]: -1}

            # A redelivered message after the restart is not answered twice.
            await bot.send("MESSAGE_CREATE", dict(follow))
            assert len(claude_emulator.requests) == calls
        finally:
            await bot.close()


async def test_research_shows_each_step_then_the_answer_citing_both_steps(
    discord_emulator: DiscordEmulator,
    claude_emulator: Emulator,
    sample: str,
    search: SearchService,
    tmp_path: Path,
) -> None:
    emu = discord_emulator
    settings = e2e_settings(emu, claude_emulator, sample, tmp_path)
    await sync_commands(settings, globally=False)
    cited = script_research(claude_emulator)
    async with engine_for(settings, search) as engine:
        bot = Harness(emu, engine, settings)
        await bot.start()
        try:
            payload = emu.slash("research", CHANNEL, ALICE, question=QUESTION)
            await bot.send("INTERACTION_CREATE", payload)

            (deferred, *_) = emu.find("POST", r"/interactions/\d+/[^/]+/callback")
            assert deferred.body == {"type": 5}  # "thinking", within 3 s
            (placeholder,) = emu.find("POST", WEBHOOK)
            assert placeholder.body["content"] == RESEARCH_PLACEHOLDER
            original = next(i for i in emu.interactions.values() if str(i.id) == payload["id"])
            edits = emu.find("PATCH", rf"{WEBHOOK}/messages/{original.original_id}")
            shown = [e.body["content"] for e in edits]
            # Each step as it ran, then the answer (perhaps once as it is written first).
            assert shown[:2] == [f"-# {step}…" for step in STEPS]
            assert len(shown) in (3, 4)
            assert all(b.at - a.at >= 0.9 for a, b in itertools.pairwise(edits[:-1]))
            body = edits[-1].body
            content = body["content"]
            assert content.startswith("We left Auth0 over cost")
            assert f"[[{cited['cost']}]](<{COST_LINK}>)" in content  # the cost sentence
            assert f"[[{cited['hosted_ui']}]](<{HOSTED_UI}>)" in content  # the deep dive at 12:14
            assert "-# " not in content  # no note: the research ran and finished
            description = body["embeds"][0]["description"]
            assert f"[Auth kickoff @ 1:06]({COST_LINK})" in description
            assert f"[Auth deep dive @ 12:14]({HOSTED_UI})" in description

            # Claude researched this guild's knowledge base with the tools; the trace is stored.
            bodies = [r.body for r in claude_emulator.requests]
            assert len(bodies) == 3 and all(tool_names(b) for b in bodies)
            summary = system(bodies[0])
            assert "- kickoff | 'Auth kickoff' | video | 2024-01-09" in summary
            up = body["components"][0]["components"][0]["custom_id"]
            exchange_id = int(up.rsplit(":", 1)[1])
            stored = await engine.sessions.exchange(exchange_id)
            assert stored is not None and stored["mode"] == "deep"
            steps = stored["research_trace"]["steps"]
            assert [(s["turn"], s["tool"], s["args"], s["is_error"]) for s in steps] == [
                (1, "search", SEARCH, False),
                (2, "get_transcript", READ, False),
            ]
            assert cited["cost"] in steps[0]["passages"]
            assert cited["hosted_ui"] in steps[1]["passages"]
            [logged] = await engine.sessions.recent_queries()
            assert (logged["kb"], logged["query"], logged["exchange_id"]) == (
                sample,
                SEARCH["query"],
                exchange_id,
            )
        finally:
            await bot.close()
