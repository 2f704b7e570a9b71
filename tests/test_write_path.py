"""The one write path (``bot/write.py``): a chat upload gets what ``quorum ingest`` gets,
the model-written summary, the audit entry and the media store's copy for its page (gone
again with ``/forget``), through the real core (``open_core``), the real SDK on the model's
emulator and the session Weaviate server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from adapters.chat.uploads import Upload, Uploads
from bot.config import load_settings
from bot.holdings import Holdings
from bot.models import Actor
from bot.sessions import SessionStore
from bot.wiring import open_core
from bot.write import Writer
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.links.kept_media import MediaStore
from retrieval.search.search import SearchService
from retrieval.store.memory import MemoryStore
from retrieval.store.weaviate.server import Endpoint
from tests.backends import Reply, Served, last_text
from tests.test_uploads import Said

LINES = [
    ("Priya", "The zanzibar rollout moves to the second week of June."),
    ("Marco", "Then the billing migration checklist has to be done in May."),
    ("Priya", "Marco owns the billing migration checklist from now on."),
    ("Marco", "I will send the checklist to finance by Friday."),
    ("Dana", "Support needs the new dates for the customer letters."),
    ("Priya", "We tell support on Monday, once finance has signed off."),
    ("Dana", "The letters go out the week before the rollout starts."),
    ("Marco", "Finance asked for a rollback plan, a page at most."),
]


def _vtt() -> bytes:
    """Four minutes of a meeting, a line every thirty seconds (three windows or more)."""
    cues = [
        f"00:{30 * i // 60:02d}:{30 * i % 60:02d}.000 --> 00:{30 * i // 60:02d}:"
        f"{30 * i % 60 + 6:02d}.000\n<v {who}>{text}"
        for i, (who, text) in enumerate(LINES)
    ]
    return ("WEBVTT\n\n" + "\n\n".join(cues) + "\n").encode()


VTT = _vtt()


async def test_a_chat_upload_gets_the_model_written_summary(
    served: Served, weaviate_env: Endpoint, kb: str, tmp_path: Path
) -> None:
    reply = {
        "topics": [{"text": "The zanzibar rollout's new date.", "at": 3}],
        "decisions": [{"text": "The rollout moves to June's second week.", "at": 4}],
        "actions": [{"text": "Marco sends finance the checklist.", "at": 90}],
    }
    served.emu.enqueue(Reply(text=json.dumps(reply)))
    settings = load_settings(data_dir=tmp_path / "data", **served.settings())

    async def fetch(to: Path, limit: int) -> None:
        await asyncio.to_thread(to.write_bytes, VTT)

    said = Said()
    async with open_core(settings) as services:
        assert services.engine.library is not None
        uploads = Uploads(services.engine.library, 5)
        added = await uploads.add(
            kb, Upload("sync.vtt", len(VTT), fetch), said, Actor("slack", "U1")
        )
        audit = await services.sessions.audit(kb)

    assert added is not None and added.status == "added"
    assert "[90] " in last_text(served.bodies[-1])  # the model read the transcript, timed
    assert "> Topic: The zanzibar rollout's new date." in said.lines[-1]
    assert [(e.action, e.source_id, str(e.actor)) for e in audit] == [("added", "sync", "slack:U1")]


NOTES = "# Rollout\n\nThe zanzibar rollout moves to the second week of June.\n"


async def test_a_chat_upload_is_kept_for_its_page_and_forget_takes_the_copy(
    served: Served, weaviate_env: Endpoint, kb: str, tmp_path: Path
) -> None:
    settings = load_settings(data_dir=tmp_path / "data", **served.settings())
    media = tmp_path / "data" / "media"

    async def fetch(to: Path, limit: int) -> None:
        await asyncio.to_thread(to.write_text, NOTES)

    async with open_core(settings) as services:
        library = services.engine.library
        assert library is not None
        added = await Uploads(library, 5).add(
            kb, Upload("rollout.md", len(NOTES), fetch), Said(), Actor("slack", "U1")
        )
        assert added is not None and added.status == "added"
        (kept,) = [
            p for p in media.rglob("*") if p.is_file() and not p.name.startswith(".")
        ]  # what its page offers
        assert kept.read_text() == NOTES
        assert await library.forget(kb, "rollout", Actor("slack", "U1")) > 0
    assert [p for p in media.rglob("*") if p.is_file() and not p.name.startswith(".")] == []


async def test_the_writers_removal_is_holdings_forget_and_drops_the_media_copy(
    embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    store = MemoryStore()
    search = SearchService(store, embedder)
    media = MediaStore(tmp_path / "media")

    def kept() -> list[Path]:
        return [p for p in media.root.rglob("*") if p.is_file() and not p.name.startswith(".")]

    (tmp_path / "a.md").write_text(NOTES)
    (tmp_path / "b.md").write_text(NOTES + "\nAnother line.\n")
    bare = Writer(store=store, embedder=embedder, search=search, media=media)
    written = await bare.add(kb, [tmp_path / "a.md", tmp_path / "b.md"], Actor("cli"))
    assert not written.report.failed and len(kept()) == 2
    with pytest.raises(TypeError, match="needs Holdings"):  # no lesser twin of forget
        await bare.remove(kb, "a", Actor("cli"))
    async with SessionStore.open(tmp_path / "sessions.sqlite3") as sessions:
        holdings = Holdings(
            store=store, search=search, sessions=sessions, data_dir=tmp_path, media=media
        )
        writer = Writer(store=store, embedder=embedder, search=search, holdings=holdings)
        forgotten = await writer.remove(kb, "a", Actor("cli"))
        assert forgotten.passages > 0 and len(forgotten.files) == 1
        trail = await sessions.audit(kb, "a")
    assert [e.action for e in trail] == ["removed"]  # the audit trail: Holdings' doing
    (left,) = kept()
    assert left.read_text().endswith("Another line.\n")  # b's copy stays
