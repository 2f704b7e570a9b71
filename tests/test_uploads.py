"""The platform-neutral upload rules (``adapters.chat.uploads``): who may, what is refused
before downloading, file names that cannot escape the inbox, and a download that turns
out larger than announced is not kept. Platform round trips: test_uploads_slack.py and
test_uploads_discord.py. The library here keeps its archive in memory (``MemoryStore``):
these rules do not depend on the store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.chat.uploads import (
    BAD_SPEAKERS,
    MB,
    Upload,
    Uploads,
    may_manage,
    refusal,
    safe_name,
    speakers_said,
)
from bot.holdings import Holdings
from bot.library import KbLibrary
from bot.metrics import MeteredLibrary, Metrics
from bot.models import Event
from bot.sessions import SessionStore
from retrieval.encoding.embed import Embedder, SentenceTransformerEmbedder
from retrieval.ingest import SUPPORTED_SUFFIXES
from retrieval.search.search import SearchService
from retrieval.store import Store
from retrieval.store.memory import MemoryStore


@pytest.fixture
def library(embedder: SentenceTransformerEmbedder, tmp_path: Path) -> KbLibrary:
    """The real library over an in-memory store."""
    store = MemoryStore()
    search = SearchService(store, embedder)
    return KbLibrary(store=store, embedder=embedder, search=search, uploads_dir=tmp_path)


@contextlib.asynccontextmanager
async def held_library(
    store: Store, embedder: Embedder, search: SearchService, data: Path, **kw: Any
) -> AsyncIterator[KbLibrary]:
    """A library whose removals are ``Holdings.forget`` (the one removal path), with its
    session database and uploads under ``data``; ``kw`` goes to both (``transcriber``,
    ``media``)."""
    async with SessionStore.open(data / "sessions.sqlite3") as sessions:
        holdings = Holdings(store=store, search=search, sessions=sessions, data_dir=data, **kw)
        yield KbLibrary(
            store=store,
            embedder=embedder,
            search=search,
            uploads_dir=data / "uploads",
            holdings=holdings,
            **kw,
        )


class Said:
    """An UploadReply that keeps what it was told."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    async def start(self, placeholder: str) -> None:
        self.lines.append(placeholder)

    async def on_event(self, event: Event) -> None:
        self.lines.append(event.text)

    async def done(self, text: str) -> None:
        self.lines.append(text)


def test_admins_are_listed_users_the_admin_role_or_server_managers() -> None:
    assert may_manage("U1", ["U1", "U2"])
    assert not may_manage("U3", ["U1"])
    assert not may_manage("U3", [])  # nobody is an admin until one is configured
    assert may_manage("42", roles=["7", "Archivists"], admin_role="Archivists")
    assert not may_manage("42", roles=["7"], admin_role="Archivists")
    assert may_manage("42", manages_server=True)


def test_type_and_size_are_checked_from_what_the_platform_reports() -> None:
    assert refusal("standup.M4A", 10 * MB, 200) is None
    assert refusal("deck.key", 10, 200) == (
        "Sorry — I can't read *.key* files like deck.key. I take "
        + " ".join(sorted(SUPPORTED_SUFFIXES))
        + "."
    )
    assert refusal("README", 10, 200) is not None
    assert refusal("big.mp4", 201 * MB, 200) == (
        "Sorry — big.mp4 is 201 MB; the limit here is 200 MB."
    )
    assert refusal("empty.vtt", 0, 200) == "Sorry — empty.vtt is empty."


def test_a_file_name_cannot_leave_the_inbox() -> None:
    assert safe_name("../../etc/cron.d/job.md") == "job.md"
    assert safe_name("..\\..\\evil.VTT") == "evil.vtt"
    assert safe_name("Team sync (May).mp4") == "Team-sync-May.mp4"
    assert safe_name(".vtt") == "vtt"
    assert safe_name("...").startswith("upload")


async def test_a_download_larger_than_announced_is_dropped_unread(
    library: KbLibrary, kb: str
) -> None:
    async def lying(to: Path, limit: int) -> None:  # ignores the limit
        await asyncio.to_thread(to.write_bytes, b"WEBVTT\n\n" + b"x" * (2 * MB))

    said = Said()
    await Uploads(library, 1).add(kb, Upload("notes.vtt", 100, lying), said)

    assert said.lines[-1] == ("Sorry — notes.vtt is larger than it said; the limit here is 1 MB.")
    assert await library.sources(kb) == []
    assert [p for p in library.inbox(kb).rglob("*") if p.is_file()] == []


async def test_the_reply_quotes_a_summary_when_a_summarizer_is_wired_in(
    library: KbLibrary, kb: str
) -> None:
    asked: list[tuple[str, str]] = []

    async def summarize(kb: str, source_id: str) -> str | None:
        asked.append((kb, source_id))
        return "Topics: the June rollout\n\nDecision: ship in week two\nAction: Marco\nMore"

    library.summarize = summarize
    vtt = b"WEBVTT\n\n00:00:03.000 --> 00:00:08.000\nThe rollout moves to June.\n"

    async def fetch(to: Path, limit: int) -> None:
        await asyncio.to_thread(to.write_bytes, vtt)

    said = Said()
    await Uploads(library, 1).add(kb, Upload("rollout.vtt", len(vtt), fetch), said)

    assert asked == [(kb, "rollout")]
    assert said.lines[-1] == (
        "Added *Rollout* (`rollout`): 1 segment. Ask me about it.\n"
        "> Topics: the June rollout\n> Decision: ship in week two\n> Action: Marco"
    )


async def test_uploads_are_counted_in_the_metrics(library: KbLibrary, kb: str) -> None:
    metrics = Metrics()
    metered = MeteredLibrary(library, metrics)
    vtt = b"WEBVTT\n\n00:00:03.000 --> 00:00:08.000\nThe rollout moves to June.\n"

    async def fetch(to: Path, limit: int) -> None:
        await asyncio.to_thread(to.write_bytes, vtt)

    await Uploads(metered, 1).add(kb, Upload("metered.vtt", len(vtt), fetch), Said())
    scraped = metrics.render()[0].decode()
    assert 'quorum_ingest_files_total{status="added"} 1.0' in scraped
    assert "quorum_ingest_segments_total 1.0" in scraped


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("<@U0BOT> add this", None),
        ("add this speakers:3", 3),
        ("Speakers = 2.", 2),
        ("here, speakers: 20", 20),
        ("the speaker: Amara", None),  # the question option, not a count
        ("co-speakers:4", None),
        ("speakers:0", BAD_SPEAKERS),
        ("speakers:21", BAD_SPEAKERS),
        ("speakers: three", BAD_SPEAKERS),
        ("speakers:", BAD_SPEAKERS),
        ("speakers:٣", BAD_SPEAKERS),
    ],
)
def test_a_count_of_speakers_typed_beside_a_file(text: str, count: int | str | None) -> None:
    assert speakers_said(text) == count
