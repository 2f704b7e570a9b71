"""Discord end to end through the real core: discord.py against the Discord emulator, the
real Engine with its SQLite session store, real Weaviate (the session server) holding the
sample archive, and the real anthropic SDK against the Claude emulator."""

from __future__ import annotations

import contextlib
import json
import re
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import discord
import pytest
from discord.gateway import DiscordWebSocket

from adapters.discord import conversation
from adapters.discord_cli import sync_commands
from bot.config import Settings, load_settings
from bot.engine import NO_RESEARCH, Engine
from bot.llm import ClaudeLLM
from bot.sessions import SessionStore
from retrieval.embed import SentenceTransformerEmbedder
from retrieval.search import SearchService
from retrieval.store import Store
from tests.emulators.anthropic import API_KEY, AnthropicEmulator, Reply
from tests.emulators.discord import DiscordEmulator
from tests.sample_archive import load_sample
from tests.test_discord import ALICE, CHANNEL, GUILD, WEBHOOK, Harness, final_edit

HOSTED_UI = "https://www.loom.com/share/feedbeef?t=734"  # Auth deep dive @ 12:14
FAST_MODEL = "claude-fast-emulated"


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
async def claude_emulator() -> AsyncIterator[AnthropicEmulator]:
    emulator = AnthropicEmulator(default=claude)
    with warnings.catch_warnings():  # its TCPSite(shutdown_timeout=) is deprecated in aiohttp
        warnings.simplefilter("ignore", DeprecationWarning)
        await emulator.start()
    try:
        yield emulator
    finally:
        await emulator.stop()


@pytest.fixture
async def discord_emulator() -> AsyncIterator[DiscordEmulator]:
    old, old_gateway = discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    async with DiscordEmulator() as emulator:
        yield emulator
        assert emulator.unexpected == []
    discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = old, old_gateway


@pytest.fixture
async def sample(store: Store, embedder: SentenceTransformerEmbedder, kb: str) -> str:
    await load_sample(store, embedder, kb)
    return kb


@contextlib.asynccontextmanager
async def engine_for(settings: Settings, search: SearchService) -> AsyncIterator[Engine]:
    """The Engine as bot.wiring.open_core builds it, on the session's search service."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    async with SessionStore.open(settings.sessions_path) as sessions:
        llm = ClaudeLLM.from_settings(settings)
        assert llm is not None
        try:
            yield Engine.from_settings(
                settings, archives=search.archive, sessions=sessions, llm=llm
            )
        finally:
            await llm.aclose()


def e2e_settings(
    discord_emu: DiscordEmulator, claude_emu: AnthropicEmulator, kb: str, tmp_path: Path
) -> Settings:
    return load_settings(
        data_dir=tmp_path / "data",
        discord_token=discord_emu.token,
        discord_api_url=discord_emu.url,
        discord_guild_id=GUILD,
        discord_kb=kb,
        anthropic_api_key=API_KEY,
        anthropic_base_url=claude_emu.url,
        fast_model=FAST_MODEL,
        llm_max_retries=0,
    )


async def test_ask_cites_the_second_then_the_thread_continues_and_feedback_sticks(
    discord_emulator: DiscordEmulator,
    claude_emulator: AnthropicEmulator,
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
            assert f"(<{HOSTED_UI}>)" in body["content"]  # the citation opens 12:14
            description = body["embeds"][0]["description"]
            assert f"[Auth deep dive @ 12:14]({HOSTED_UI})" in description
            assert "John Park" in description
            edits = emu.find("PATCH", rf"{WEBHOOK}/messages/\d+")
            assert len(edits) >= 2  # the text as it streamed, then the final answer
            assert any(e.body["content"].endswith("-# writing…") for e in edits[:-1])
            (thread_call,) = emu.find("POST", r"/channels/\d+/messages/\d+/threads")
            thread_id = int(thread_call.path.split("/")[4])

            # A follow-up in the thread, without a mention, continues the session.
            follow = emu.post(thread_id, ALICE, "and what about a custom domain?")
            await bot.send("MESSAGE_CREATE", follow)
            assert HOSTED_UI in emu.channel_messages(thread_id)[-1]["content"]
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


async def test_research_answers_quickly_and_says_so(
    discord_emulator: DiscordEmulator,
    claude_emulator: AnthropicEmulator,
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
            question = "Why is the hosted UI a problem?"
            await bot.send(
                "INTERACTION_CREATE", emu.slash("research", CHANNEL, ALICE, question=question)
            )
        finally:
            await bot.close()
    content = final_edit(emu, rf"{WEBHOOK}/messages/\d+")["content"]
    assert f"(<{HOSTED_UI}>)" in content and f"-# {NO_RESEARCH}" in content
