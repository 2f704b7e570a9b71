"""QUORUM_POST_SUMMARIES: a recording ingested from the command line has its summary
posted to the team's Slack and Discord channels (through the real SDKs and the
emulators), each line linked to its moment; documents are not announced, and a channel
that refuses the post costs one line, never the ingest."""

from __future__ import annotations

import shutil
from pathlib import Path

import discord
import pytest
from discord.gateway import DiscordWebSocket

from adapters.chat.announce import announce, targets
from adapters.discord.post import post_to_discord
from adapters.slack.post import post_to_slack
from bot.config import load_settings
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import ConfigError
from retrieval.links.share import LinkSigner, load_secret
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.indexer import ingest
from tests.emulators.discord import DiscordEmulator
from tests.emulators.slack import BOT_TOKEN, SIGNING_SECRET, SlackEmulator

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
RETRO = EXAMPLES / "recordings" / "2024-02-27-cutover-retro.txt"
GUILD, CHANNEL = 900000000000000101, 900000000000000102


def test_targets_are_checked_before_any_work() -> None:
    assert [(t.platform, t.channel) for t in targets("slack:C1, discord:42")] == [
        ("slack", "C1"),
        ("discord", "42"),
    ]
    with pytest.raises(ConfigError, match="slack:CHANNEL or discord:CHANNEL_ID"):
        targets("teams:general")


async def test_a_new_recording_is_announced_with_links_to_its_moments(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for path in (RETRO, RETRO.with_suffix(".meta.json")):
        shutil.copy(path, folder / path.name)
    (folder / "notes.md").write_text("# Notes\n\n" + "We keep the runbook current. " * 80)
    report = await ingest(store, embedder, kb, [folder])
    assert not report.failed
    # as quorum serve and ingest run it: links to Quorum's own pages (the retro has no URL)
    signer = LinkSigner(load_secret(tmp_path / "data"), "http://127.0.0.1:8088")
    search = SearchService(store, embedder, signer=signer)
    old, old_gateway = discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    try:
        async with SlackEmulator() as slack, DiscordEmulator() as disc:
            disc.guild(GUILD, {CHANNEL: "general"})
            settings = load_settings(
                data_dir=tmp_path / "data",
                slack_bot_token=BOT_TOKEN,
                slack_signing_secret=SIGNING_SECRET,
                slack_api_url=slack.api_url,
                discord_token=disc.token,
                discord_api_url=disc.url,
                post_summaries=f"slack:C0GENERAL,discord:{CHANNEL},slack:C0NOSUCH",
            )
            posters = {"slack": post_to_slack, "discord": post_to_discord}
            failures = await announce(settings, search.archive(kb), report.results, posters)

            (posted,) = slack.top_level("C0GENERAL")
            text = str(posted.blocks)
            assert "New recording: Cut-over retro" in text
            assert "Topic: " in text and "#t=" in text  # each line links its moment
            assert "http://127.0.0.1:8088/v/" in text
            (sent,) = disc.channel_messages(CHANNEL)
            assert sent["content"].startswith("**New recording: Cut-over retro")
            assert "](" in sent["content"] and "Notes" not in sent["content"]
            assert len(failures) == 1 and "slack:C0NOSUCH" in failures[0]
    finally:
        discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = old, old_gateway
