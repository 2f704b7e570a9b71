"""A recording added in chat, then asked about in chat: the answer's link opens Quorum's
page in Chromium playing within a second of the cited second, with the quoted sentence
highlighted. Slack through Bolt against the Slack emulator, Discord through discord.py
against the Discord emulator; the real core (engine, library, Whisper) on the session
Weaviate, its pages served by the ops server."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser

from bot.config import load_settings
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.emulators.discord import DiscordEmulator
from tests.emulators.slack import ALICE, BOT_USER, SlackEmulator
from tests.media_fixtures import speak
from tests.pages_harness import Served, chromium, media_state, opened, serving
from tests.test_discord import ALICE as DISCORD_ALICE
from tests.test_discord import CHANNEL, Harness, settings_for
from tests.test_pages import SAID
from tests.test_slack import GENERAL, bot_replies, make_settings, running
from tests.test_uploads_discord import emu, replies_to  # noqa: F401 (emu: a fixture)

LINK = r"http://127\.0\.0\.1:\d+/v/[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+#t=\d+(?:&s=[\d.]+)?"


@dataclass
class World:
    served: Served
    browser: Browser
    wav: bytes


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[World]:
    folder = tmp_path_factory.mktemp("pages-chat")
    wav = speak(folder / "warehouse-planning.wav", SAID, gap_s=3.0).path.read_bytes()
    settings = load_settings(data_dir=folder / "data")
    async with serving(settings, weaviate_endpoint, store, embedder) as served:
        async with chromium() as browser:
            yield World(served, browser, wav)


async def plays_the_quote(world: World, text: str) -> None:
    """The answer in ``text`` links to a page that plays at its second, quote highlighted."""
    links = re.findall(LINK, text)
    assert links, text
    link = links[0]
    page = await opened(world.browser, link)
    state = await media_state(page)
    second = int(re.findall(r"#t=(\d+)", link)[0])
    assert abs(state["t"] - second) < 1.0, (state, second)
    assert "migration checklist" in state["cited"]
    await page.close()


async def test_a_recording_shared_on_slack_is_cited_with_a_link_that_plays(
    world: World, tmp_path: Path
) -> None:
    kb = f"t{uuid.uuid4().hex[:12]}"
    async with SlackEmulator() as slack:
        settings = make_settings(slack, slack_kb=kb, slack_admins=ALICE, upload_max_mb=5)
        async with running(world.served.services.engine, settings, slack) as bot:
            file = slack.share_file("warehouse-planning.wav", world.wav)
            msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> add this")
            event = slack.event(msg, "app_mention", files=[file])
            assert (await slack.deliver_event(event)).status == 200
            await bot.settle()
            [added] = bot_replies(slack, GENERAL, msg.ts)
            assert added.versions[-1]["text"].startswith("Added *Warehouse planning*")

            asked = slack.user_posts(GENERAL, f"<@{BOT_USER}> who owns the migration checklist?")
            await slack.deliver_event(slack.event(asked, "app_mention"))
            await bot.settle()
            [reply] = bot_replies(slack, GENERAL, asked.ts)
            await plays_the_quote(world, reply.all_text())


async def test_a_recording_attached_on_discord_is_cited_with_a_link_that_plays(
    world: World,
    emu: DiscordEmulator,  # noqa: F811
) -> None:
    kb = f"t{uuid.uuid4().hex[:12]}"
    settings = settings_for(emu, discord_kb=kb, discord_admin_role="Archivists", upload_max_mb=5)
    harness = Harness(emu, world.served.services.engine, settings)
    emu.add_role(int(harness.guild_payload["id"]), "Archivists", [DISCORD_ALICE])
    await harness.start()
    user = DISCORD_ALICE
    try:
        payload = emu.post(
            CHANNEL,
            user,
            "add this",
            mention_bot=True,
            attachments=[emu.attachment(CHANNEL, "warehouse-planning.wav", world.wav)],
        )
        await harness.send("MESSAGE_CREATE", payload)
        await harness.settle(60)
        [added] = replies_to(emu, payload)
        assert added["content"].startswith("Added *Warehouse planning*"), added["content"]

        before = len(emu.calls)
        question = emu.post(CHANNEL, user, "who owns the migration checklist?", mention_bot=True)
        await harness.send("MESSAGE_CREATE", question)
        await harness.settle(60)
        # The answer is posted in a thread started from the question: read what was sent.
        sent = "\n".join(str(c.body) for c in emu.calls[before:] if c.body)
        await plays_the_quote(world, sent)
    finally:
        await harness.close()
