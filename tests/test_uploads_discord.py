"""Files shared with Quorum on Discord, end to end: discord.py's own parsers and HTTP
client against the Discord emulator (whose CDN serves an attachment only by its signed
URL), the real ``KbLibrary`` over the session Weaviate server and MiniLM."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import discord
import pytest
import pytest_asyncio
from discord.gateway import DiscordWebSocket

from adapters.chat.uploads import NOT_ADMIN
from adapters.discord.cli import sync_commands
from bot.library import KbLibrary
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from tests.emulators.discord import DiscordEmulator, Json
from tests.fakes import FakeCore
from tests.test_discord import ALICE, CHANNEL, Harness, settings_for
from tests.test_uploads import held_library
from tests.test_uploads_slack import VTT

BOB = DiscordEmulator.user(700000000000000009, "bob")
WEBHOOK = r"/webhooks/\d+/[^/]+"


@pytest_asyncio.fixture(loop_scope="session")
async def emu() -> AsyncIterator[DiscordEmulator]:
    old, old_gateway = discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    async with DiscordEmulator() as emulator:
        yield emulator
        assert emulator.unexpected == [], "the adapter called routes Discord does not have"
    discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = old, old_gateway


@pytest.fixture
async def library(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    tmp_path: Path,
) -> AsyncIterator[KbLibrary]:
    async with held_library(store, embedder, search, tmp_path) as lib:
        yield lib


@pytest_asyncio.fixture(loop_scope="session")
async def bot(emu: DiscordEmulator, library: KbLibrary, kb: str) -> AsyncIterator[Harness]:
    settings = settings_for(emu, discord_kb=kb, discord_admin_role="Archivists", upload_max_mb=5)
    await sync_commands(settings, globally=False)
    harness = Harness(emu, FakeCore(library=library), settings)
    emu.add_role(int(harness.guild_payload["id"]), "Archivists", [ALICE])
    await harness.start()
    yield harness
    await harness.close()


def replies_to(emu: DiscordEmulator, message: Json) -> list[Json]:
    return [
        m
        for m in emu.channel_messages(CHANNEL)
        if (m.get("message_reference") or {}).get("message_id") == message["id"]
    ]


def contents(emu: DiscordEmulator, path: str) -> list[str]:
    """Every content a message was posted or edited with, in order."""
    return [
        c.body["content"] for c in emu.calls if path in c.path and c.body and "content" in c.body
    ]


async def attach(bot: Harness, user: Json, *files: Json) -> Json:
    payload = bot.emu.post(CHANNEL, user, "add this", mention_bot=True, attachments=list(files))
    await bot.send("MESSAGE_CREATE", payload)
    return payload


async def test_an_admins_attachment_is_ingested_searchable_and_reported(
    bot: Harness, search: SearchService, kb: str
) -> None:
    emu = bot.emu
    message = await attach(bot, ALICE, emu.attachment(CHANNEL, "june-planning.vtt", VTT))

    [reply] = replies_to(emu, message)
    shown = contents(emu, f"/messages/{reply['id']}") or [reply["content"]]
    posted = emu.find("POST", rf"/channels/{CHANNEL}/messages")[0].body["content"]
    assert posted == "Downloading june-planning.vtt…"
    assert (
        reply["content"] == "Added *June planning* (`june-planning`): 1 segment. Ask me about it."
    )
    assert shown[-1] == reply["content"]
    assert emu.downloads and all(ok for _, ok in emu.downloads)
    hits = await search.search(kb, "when does the zanzibar rollout happen")
    assert hits and hits[0].segment.start_s == pytest.approx(3.0)


async def test_a_member_without_the_role_or_manage_server_is_refused(
    bot: Harness, library: KbLibrary, kb: str
) -> None:
    emu = bot.emu
    message = await attach(bot, BOB, emu.attachment(CHANNEL, "notes.vtt", VTT))

    assert [m["content"] for m in replies_to(emu, message)] == [NOT_ADMIN]
    assert emu.downloads == []
    assert await library.sources(kb) == []


@pytest.mark.parametrize(
    ("name", "size", "said"),
    [
        ("all-hands.mkv", 80 * 1024 * 1024, "is 80 MB; the limit here is 5 MB"),
        ("slides.pptx", 1000, "I can't read *.pptx* files"),
    ],
)
async def test_oversized_or_unreadable_attachments_are_refused_before_download(
    bot: Harness, library: KbLibrary, kb: str, name: str, size: int, said: str
) -> None:
    emu = bot.emu
    message = await attach(bot, ALICE, emu.attachment(CHANNEL, name, b"x" * 10, size=size))

    [reply] = replies_to(emu, message)
    assert said in reply["content"]
    assert emu.downloads == []
    assert await library.sources(kb) == []


async def test_the_cdn_refuses_a_link_without_its_signature(bot: Harness) -> None:
    emu = bot.emu
    file = emu.attachment(CHANNEL, "notes.vtt", VTT)
    tampered = {**file, "url": file["url"].split("?")[0]}
    message = await attach(bot, ALICE, tampered)

    [reply] = replies_to(emu, message)
    assert reply["content"] == "Sorry — I couldn't download notes.vtt. Please share it again."
    assert emu.downloads == [(int(file["id"]), False)]


async def test_ingest_command_adds_the_attached_file(
    bot: Harness, library: KbLibrary, kb: str
) -> None:
    emu = bot.emu
    file = emu.attachment(CHANNEL, "june-planning.vtt", VTT)
    await bot.send("INTERACTION_CREATE", emu.slash("ingest", CHANNEL, ALICE, files={"file": file}))

    final = contents(emu, "/webhooks/")[-1]
    assert final.startswith("Added *June planning* (`june-planning`)")
    assert [i.source.id for i in await library.sources(kb)] == ["june-planning"]

    await bot.send("INTERACTION_CREATE", emu.slash("ingest", CHANNEL, BOB, files={"file": file}))
    refused = emu.find("POST", r"/interactions/\d+/[^/]+/callback")[-1].body["data"]
    assert refused["content"] == NOT_ADMIN and refused["flags"] == 64  # only Bob sees it
    assert [ok for _, ok in emu.downloads] == [True]  # Bob's file was never fetched


async def test_sources_lists_and_forget_confirms_then_removes(
    bot: Harness, library: KbLibrary, search: SearchService, kb: str
) -> None:
    emu = bot.emu
    await attach(bot, ALICE, emu.attachment(CHANNEL, "june-planning.vtt", VTT))

    await bot.send("INTERACTION_CREATE", emu.slash("sources", CHANNEL, BOB))
    listed = contents(emu, "/webhooks/")[-1]
    assert "1 source:" in listed and "`june-planning` June planning" in listed

    await bot.send("INTERACTION_CREATE", emu.slash("forget", CHANNEL, BOB, source="june-planning"))
    callbacks = emu.find("POST", r"/interactions/\d+/[^/]+/callback")
    assert callbacks[-1].body["data"]["content"] == NOT_ADMIN

    await bot.send(
        "INTERACTION_CREATE", emu.slash("forget", CHANNEL, ALICE, source="June planning")
    )
    question = emu.find("POST", r"/interactions/\d+/[^/]+/callback")[-1].body["data"]
    assert question["content"].startswith("Remove *June planning* (`june-planning`, 1 segment)")
    assert await library.sources(kb)  # nothing removed before the click

    prompt = max(emu.messages)  # the ephemeral question, as Discord keeps it
    await bot.send("INTERACTION_CREATE", emu.click(prompt, "quorum:forget:june-planning", BOB))
    assert await library.sources(kb)  # a non-admin's click changes nothing
    await bot.send("INTERACTION_CREATE", emu.click(prompt, "quorum:forget:june-planning", ALICE))
    assert emu.messages[prompt]["content"].startswith("Removed `june-planning`")
    assert await library.sources(kb) == []
    assert await search.search(kb, "zanzibar rollout") == []
