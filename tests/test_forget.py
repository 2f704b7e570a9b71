"""Forget means forgotten: a real recording (espeak-ng's voice, transcribed by Whisper) is
ingested, asked about and removed, then none of its distinctive words is left in any file
under the data dir, nor does any command find them. Weaviate's own files live outside the
data dir here (the session server); its deletion is confirmed through its API: search at
every level, the source list and the summary find nothing. Once for a file ingested from
disk with the CLI, once for a file shared in Slack and removed with /forget."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from adapters.slack.uploads import ACTION_FORGET
from bot.holdings import Holdings
from bot.library import KbLibrary
from bot.sessions import Actor, SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.models import LEVELS, SearchFilters
from retrieval.search.search import SearchService
from retrieval.store import Store
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import ingest
from retrieval.write.transcribe import Transcriber
from tests.emulators.slack import ALICE, BOT_USER, Message, SlackEmulator
from tests.fakes import FakeCore
from tests.media_fixtures import speak
from tests.test_slack import GENERAL, Bot, make_settings, running

runner = CliRunner()

SAID = [
    "The orchestra rehearsal moves to the lighthouse.",
    "Bring the pineapple cake and the volcano poster.",
]
CANDIDATES = ("orchestra", "rehearsal", "lighthouse", "pineapple", "volcano", "poster")


def quorum(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def files_saying(folder: Path, words: set[str]) -> dict[str, set[str]]:
    """Every file under ``folder`` that holds one of ``words`` (any case), with which."""
    found: dict[str, set[str]] = {}
    for file in folder.rglob("*"):
        if file.is_file():
            text = file.read_bytes().lower()
            if hits := {w for w in words if w.encode() in text}:
                found[str(file.relative_to(folder))] = hits
    return found


def distinctive(transcripts: Path) -> set[str]:
    """The words Whisper heard, out of the ones spoken for this test (at least three)."""
    heard = " ".join(f.read_text().lower() for f in transcripts.glob("*.json"))
    words = {w for w in CANDIDATES if re.search(rf"\b{w}\b", heard)}
    assert len(words) >= 3, heard
    return words


def test_a_recording_removed_with_the_cli_leaves_no_word_behind(
    tmp_path: Path, weaviate_env: Endpoint, kb: str
) -> None:
    data = tmp_path / "data"
    (tmp_path / "recordings").mkdir()
    wav = speak(tmp_path / "recordings" / "weekly-sync.wav", SAID).path
    code, _, err = quorum("ingest", str(wav), "--kb", kb)
    assert code == 0, err
    words = distinctive(data / "transcripts")
    code, out, _ = quorum("search", " ".join(words), "--kb", kb, "--json")
    assert code == 0 and json.loads(out)
    code, out, err = quorum("ask", "Where does the practice move to?", "--kb", kb)
    assert code == 0, err
    assert files_saying(data, words), "the words are kept before removal"
    (listed,) = json.loads(quorum("sources", "--kb", kb, "--json")[1])
    assert listed["id"] == "weekly-sync" and listed["transcript_kept"] is True
    assert listed["media_kept"] is True  # the copy its page plays, in the media store
    assert listed["added_by"].startswith("cli") and listed["added_at"]
    assert listed["size_bytes"] == wav.stat().st_size

    code, out, err = quorum("remove", "weekly-sync", "--kb", kb)
    assert code == 0, err
    assert "Removed weekly-sync" in out and "2 kept file(s)" in out  # transcript, media

    assert files_saying(data, words) == {}
    assert wav.is_file()  # Quorum never deletes the user's own recording
    for level in LEVELS:
        code, out, _ = quorum("search", " ".join(words), "--kb", kb, "--level", level, "--json")
        assert code == 0 and json.loads(out) == [], level
    assert json.loads(quorum("sources", "--kb", kb, "--json")[1]) == []
    code, _, err = quorum("summary", "weekly-sync", "--kb", kb)
    assert code == 1 and "weekly-sync" in err
    code, out, err = quorum("transcript", "weekly-sync", "--kb", kb)
    assert code == 1 and not {w for w in words if w in (out + err).lower()}
    code, out, _ = quorum("ask", "Where does the practice move to?", "--kb", kb)
    assert not {w for w in words if w in out.lower()}
    trail = json.loads(quorum("audit", "--kb", kb, "--json")[1])
    assert [(e["action"], e["via"], e["source_id"]) for e in trail] == [
        ("removed", "cli", "weekly-sync"),
        ("added", "cli", "weekly-sync"),
    ]


@pytest.fixture
async def holdings(store: Store, search: SearchService, tmp_path: Path) -> AsyncIterator[Holdings]:
    data = tmp_path / "data"
    async with SessionStore.open(data / "sessions.sqlite3") as sessions:
        yield Holdings(
            store=store,
            search=search,
            sessions=sessions,
            data_dir=data,
            transcriber=Transcriber(cache_dir=data / "transcripts"),
        )


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator


@pytest.fixture
async def bot(
    holdings: Holdings,
    store: Store,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    slack: SlackEmulator,
    kb: str,
) -> AsyncIterator[Bot]:
    library = KbLibrary(
        store=store,
        embedder=embedder,
        search=search,
        uploads_dir=holdings.data_dir / "uploads",
        transcriber=holdings.transcriber,
        holdings=holdings,
    )
    settings = make_settings(slack, slack_kb=kb, slack_admins=ALICE, upload_max_mb=5)
    async with running(FakeCore(library=library), settings, slack) as b:
        yield b


async def test_a_chat_upload_forgotten_in_slack_leaves_no_word_behind(
    slack: SlackEmulator,
    bot: Bot,
    holdings: Holdings,
    search: SearchService,
    kb: str,
    tmp_path: Path,
) -> None:
    data = holdings.data_dir
    wav = speak(tmp_path / "standup.wav", SAID)
    msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> add this", user=ALICE)
    file = slack.share_file("standup.wav", wav.path.read_bytes())
    event = slack.event(msg, "app_mention", files=[file])
    assert (await slack.deliver_event(event)).status == 200
    await bot.settle()
    words = distinctive(data / "transcripts")
    assert await search.search(kb, " ".join(words))
    (held,) = await holdings.held(kb)
    assert held.media_kept and held.transcript_kept
    assert held.added is not None and str(held.added.actor) == f"slack:{ALICE}"
    (kept,) = (data / "uploads" / kb).rglob("standup.wav")  # the sound, and its transcript
    assert files_saying(data, words)

    await slack.deliver_command(slack.command("/forget", "standup"))
    await bot.settle()
    confirm = slack.responses[-1]
    prompt = Message(GENERAL, "1.000001", confirm["text"], confirm["blocks"])
    await slack.deliver_action(slack.block_action(prompt, ACTION_FORGET))
    await bot.settle()
    assert slack.responses[-1]["text"].startswith("Removed `standup`")

    assert files_saying(data, words) == {} and not kept.exists()
    for level in LEVELS:
        assert await search.search(kb, " ".join(words), SearchFilters(levels=(level,))) == []
    assert await holdings.store.list_sources(kb) == []
    trail = await holdings.sessions.audit(kb)
    assert [(e.action, str(e.actor)) for e in trail] == [
        ("removed", f"slack:{ALICE}"),
        ("added", f"slack:{ALICE}"),
    ]


async def test_a_transcript_another_source_shares_is_kept_until_the_last_goes(
    holdings: Holdings, store: Store, embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    """The same recording ingested under two names (here in two knowledge bases): the kept
    transcript serves both, so forgetting one keeps it and forgetting the other deletes it."""
    wav = speak(tmp_path / "all-hands.wav", SAID[:1]).path
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "all-hands-again.wav").write_bytes(wav.read_bytes())
    other_kb = f"{kb}x"
    await ingest(store, embedder, kb, [wav], transcriber=holdings.transcriber)
    await ingest(store, embedder, other_kb, [copy], transcriber=holdings.transcriber)
    (kept,) = [f for files in holdings.transcriber.kept().values() for f in files]
    ana = Actor("cli", "ana")

    first = await holdings.forget(kb, "all-hands", ana)
    assert first.passages and first.shared_transcript and first.files == ()
    assert kept.is_file()
    second = await holdings.forget(other_kb, "all-hands-again", ana)
    assert second.passages and not second.shared_transcript
    assert second.files == (str(kept),) and not kept.exists()
