"""Two admins share a file of the same name at the same moment (on the real Weaviate,
through the chat upload path every platform uses): one meeting is added and credited to
the admin who shared it, the other admin is told in one sentence why theirs was not and
how to add it, and neither meeting is silently lost or replaced. The same holds for a
command-line ingest racing a chat upload."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from adapters.chat.uploads import Upload, Uploads
from bot.library import KbLibrary
from bot.models import Actor, Event
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.indexer import ingest
from tests.test_uploads import held_library

VTT = "WEBVTT\n\n00:00:03.000 --> 00:00:09.000\n{}\n"
ANA = VTT.format("Ana: the kiln budget was approved for March.")
BEN = VTT.format("Ben: the ferry schedule changes in April.")


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


@pytest_asyncio.fixture
async def library(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> AsyncIterator[KbLibrary]:
    search = SearchService(store, embedder)
    async with held_library(store, embedder, search, tmp_path / "data") as library:
        yield library


class Gate:
    """Where two downloads meet, so they finish at the same moment: each waits for the
    other at most a second (an upload held back until the first is done never comes)."""

    def __init__(self) -> None:
        self.arrived = 0
        self.both = asyncio.Event()

    async def wait(self) -> None:
        self.arrived += 1
        if self.arrived == 2:
            self.both.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.both.wait(), 1.0)


def together(gate: Gate, text: str) -> Callable[[Path, int], Awaitable[None]]:
    """A download that finishes at the same moment as the other one."""

    async def fetch(to: Path, limit: int) -> None:
        await asyncio.to_thread(to.write_text, text)
        await gate.wait()

    return fetch


@pytest.mark.parametrize("same_person", [False, True])
async def test_two_admins_sharing_one_name_at_once_lose_nothing(
    library: KbLibrary, kb: str, same_person: bool
) -> None:
    ana, ben = Actor("slack", "U-ANA"), Actor("slack", "U-ANA" if same_person else "U-BEN")
    gate = Gate()
    uploads = Uploads(library, 10)
    said_ana, said_ben = Said(), Said()
    await asyncio.gather(
        uploads.add(kb, Upload("plan.vtt", len(ANA), together(gate, ANA)), said_ana, ana),
        uploads.add(kb, Upload("plan.vtt", len(BEN), together(gate, BEN)), said_ben, ben),
    )
    finals = [said_ana.lines[-1], said_ben.lines[-1]]
    added = [f for f in finals if f.startswith("Added *Plan* (`plan`)")]
    assert len(added) == 1, finals
    if same_person:  # one file shared twice: added, then updated, in whichever order
        updated = [f for f in finals if f.startswith("Updated *Plan* (`plan`)")]
        assert len(updated) == 1, finals
        winner = ana if finals[0] in updated else ben
    else:
        refused = [f for f in finals if f.startswith("I couldn't add plan.vtt: ")]
        assert len(refused) == 1, finals
        assert "someone else already shared a file as `plan`" in refused[0]
        assert "\n" not in refused[0]
        winner = ana if finals[0] in added else ben

    [held] = await library.sources(kb)
    kept = " ".join(h.segment.text for h in await library.search.archive(kb).transcript("plan"))
    said = ANA if winner is ana else BEN
    assert said.split(": ", 1)[1].strip() == kept and held.segments == 1  # the winner, whole
    holdings = library.holdings
    assert holdings is not None
    trail = [(e.action, e.actor) for e in await holdings.sessions.audit(kb, "plan")]
    if same_person:
        assert trail == [("updated", ana), ("added", ana)]
    else:
        assert trail == [("added", winner)]  # credited to who shared it
    kept_files = [p for p in library.inbox(kb).rglob("*") if p.is_file()]
    assert [p.read_text() for p in kept_files] == [said]  # the file the pages play


async def test_a_command_line_ingest_racing_an_upload_replaces_nothing(
    library: KbLibrary, kb: str, tmp_path: Path
) -> None:
    folder = tmp_path / "cli"
    folder.mkdir()
    (folder / "plan.vtt").write_text(BEN)
    gate = Gate()

    async def from_the_command_line() -> str:
        await gate.wait()
        report = await ingest(library.store, library.embedder, kb, [folder])
        return report.results[0].status

    said = Said()
    upload = Upload("plan.vtt", len(ANA), together(gate, ANA))
    _, status = await asyncio.gather(
        Uploads(library, 10).add(kb, upload, said, Actor("slack", "U-ANA")),
        from_the_command_line(),
    )
    chat_added = said.lines[-1].startswith("Added *Plan*")
    assert chat_added != (status == "added"), (said.lines[-1], status)  # exactly one won
    kept = " ".join(h.segment.text for h in await library.search.archive(kb).transcript("plan"))
    assert ("kiln" in kept) == chat_added and ("ferry" in kept) != chat_added
