"""Files shared with Quorum on Slack, end to end: Bolt and AsyncWebClient against the Slack
emulator (which serves ``url_private_download`` only to the bot token), the real
``KbLibrary`` over the session Weaviate server and MiniLM, Whisper for a recording."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.chat.uploads import BAD_SPEAKERS, NOT_ADMIN, Upload, Uploads
from adapters.slack.uploads import ACTION_FORGET, fetcher
from bot.library import KbLibrary
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.speakers.diarize import Diarizer
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.transcribe import Transcriber
from tests.emulators.slack import ALICE, BOT_USER, Message, SlackEmulator
from tests.fakes import FakeCore
from tests.media_fixtures import speak
from tests.test_slack import GENERAL, Bot, bot_replies, make_settings, running
from tests.test_uploads import held_library

BOB = "U0BOB"
VTT = b"""WEBVTT

00:00:03.000 --> 00:00:08.000
<v Priya>The zanzibar rollout moves to the second week of June.

00:00:09.000 --> 00:00:14.000
<v Priya>Marco owns the billing migration checklist.
"""


@pytest.fixture
async def library(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    tmp_path: Path,
) -> AsyncIterator[KbLibrary]:
    transcriber = Transcriber(cache_dir=tmp_path / "transcripts")
    async with held_library(store, embedder, search, tmp_path, transcriber=transcriber) as lib:
        yield lib


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator


@pytest.fixture
async def bot(
    library: KbLibrary, slack: SlackEmulator, kb: str, tmp_path: Path
) -> AsyncIterator[Bot]:
    core = FakeCore(library=library)
    settings = make_settings(slack, slack_kb=kb, slack_admins=ALICE, upload_max_mb=5)
    async with running(core, settings, slack) as b:
        yield b


async def share(
    slack: SlackEmulator,
    bot: Bot,
    files: list[dict[str, Any]],
    user: str = ALICE,
    channel: str = GENERAL,
    text: str = f"<@{BOT_USER}> add this",
) -> Message:
    msg = slack.user_posts(channel, text, user=user)
    event = slack.event(msg, "app_mention", files=files)
    assert (await slack.deliver_event(event)).status == 200
    await bot.settle()
    return msg


async def test_an_admins_upload_is_ingested_searchable_and_reported_in_the_thread(
    slack: SlackEmulator, bot: Bot, search: SearchService, kb: str
) -> None:
    msg = await share(slack, bot, [slack.share_file("june-planning.vtt", VTT)])

    [reply] = bot_replies(slack, GENERAL, msg.ts)
    shown = [v["text"] for v in reply.versions]
    assert shown[0] == "Downloading june-planning.vtt…"
    assert shown[-1] == "Added *June planning* (`june-planning`): 1 segment. Ask me about it."
    assert slack.downloads and all(ok for _, ok in slack.downloads)
    hits = await search.search(kb, "when does the zanzibar rollout happen")
    assert hits and "zanzibar" in hits[0].segment.text
    assert hits[0].segment.start_s == pytest.approx(3.0)


async def test_a_recording_is_transcribed_with_progress_and_its_length(
    slack: SlackEmulator, bot: Bot, search: SearchService, kb: str, tmp_path: Path
) -> None:
    wav = speak(tmp_path / "standup.wav", ["The quarterly budget review is on Friday."])
    file = slack.share_file("standup.wav", wav.path.read_bytes())
    msg = await share(slack, bot, [file], channel="D0ALICE", text="here's today's standup")

    [reply] = bot_replies(slack, "D0ALICE", msg.ts)
    final = reply.versions[-1]["text"]
    assert final.startswith("Added *Standup* (`standup`): ")
    assert f"0:{int(wav.duration_s):02d} of recording" in final
    shown = "\n".join(v["text"] for v in reply.versions[:-1])
    assert f"Transcribing standup.wav: 0 %, 0:00 of 0:{int(wav.duration_s):02d}" in shown
    hits = await search.search(kb, "budget review Friday")
    assert hits and "budget" in hits[0].segment.text.lower()


async def test_a_non_admin_is_refused_and_nothing_is_downloaded_or_ingested(
    slack: SlackEmulator, bot: Bot, library: KbLibrary, kb: str
) -> None:
    msg = await share(slack, bot, [slack.share_file("notes.vtt", VTT)], user=BOB)

    assert [e["text"] for e in slack.ephemerals if e["user"] == BOB] == [NOT_ADMIN]
    assert bot_replies(slack, GENERAL, msg.ts) == []
    assert slack.downloads == []
    assert await library.sources(kb) == []


@pytest.mark.parametrize(
    ("name", "size", "said"),
    [
        ("board-meeting.mp4", 300 * 1024 * 1024, "is 300 MB; the limit here is 5 MB"),
        ("setup.exe", 1000, "I can't read *.exe* files"),
    ],
)
async def test_oversized_or_unreadable_files_are_refused_before_download(
    slack: SlackEmulator, bot: Bot, library: KbLibrary, kb: str, name: str, size: int, said: str
) -> None:
    msg = await share(slack, bot, [slack.share_file(name, b"x" * 100, size=size)])

    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert said in reply.text and len(reply.versions) == 1
    assert slack.downloads == []
    assert await library.sources(kb) == []


async def test_a_file_larger_than_it_said_is_stopped_at_the_limit_while_downloading(
    slack: SlackEmulator, bot: Bot, library: KbLibrary, kb: str
) -> None:
    big = b"WEBVTT\n\n" + b"x" * (40 * 1024 * 1024)
    file = slack.share_file("big-notes.vtt", big, size=1000)
    msg = await share(slack, bot, [file])

    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert reply.versions[-1]["text"] == (
        "Sorry — big-notes.vtt is larger than it said; the limit here is 5 MB."
    )
    assert slack.sent[file["id"]] < 20 * 1024 * 1024  # not the whole 40 MB
    assert [p for p in library.inbox(kb).rglob("*") if p.is_file()] == []
    assert await library.sources(kb) == []


async def test_a_download_without_the_right_token_is_refused_by_slack_and_not_kept(
    slack: SlackEmulator, library: KbLibrary, kb: str
) -> None:
    file = slack.share_file("notes.vtt", VTT)
    said: list[str] = []

    class Reply:
        async def start(self, placeholder: str) -> None:
            said.append(placeholder)

        async def on_event(self, event: object) -> None:
            pass

        async def done(self, text: str) -> None:
            said.append(text)

    upload = Upload("notes.vtt", len(VTT), fetcher(file["url_private_download"], "xoxb-wrong"))
    await Uploads(library, 5).add(kb, upload, Reply())

    assert said[-1] == "Sorry — I couldn't download notes.vtt. Please share it again."
    assert slack.downloads == [(file["id"], False)]
    assert await library.sources(kb) == []
    assert [p for p in library.inbox(kb).rglob("*") if p.is_file()] == []


OTHER_MEETING = b"""WEBVTT

00:00:02.000 --> 00:00:07.000
<v Ana>The warehouse lease renewal is signed for three more years.
"""


async def test_the_same_name_from_someone_else_is_refused_and_the_first_meeting_kept(
    slack: SlackEmulator, library: KbLibrary, search: SearchService, kb: str
) -> None:
    core = FakeCore(library=library)
    settings = make_settings(slack, slack_kb=kb, slack_admins=f"{ALICE},{BOB}", upload_max_mb=5)
    async with running(core, settings, slack) as bot:
        await share(slack, bot, [slack.share_file("weekly-sync.vtt", VTT)])
        msg = await share(slack, bot, [slack.share_file("weekly-sync.vtt", OTHER_MEETING)], BOB)

    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert reply.versions[-1]["text"] == (
        "I couldn't add weekly-sync.vtt: someone else already shared a file as "
        "`weekly-sync`; rename yours and share it again, or /forget weekly-sync first "
        "to replace it"
    )
    hits = await search.search(kb, "when does the zanzibar rollout happen")
    assert hits and "zanzibar" in hits[0].segment.text  # the first meeting's words stay
    assert not [h for h in await search.search(kb, "warehouse lease") if "lease" in h.segment.text]
    [kept] = [p for p in library.inbox(kb).rglob("*") if p.is_file()]
    assert kept.read_bytes() == VTT


async def test_the_same_person_sharing_a_name_again_updates_and_a_broken_version_keeps_the_old(
    slack: SlackEmulator, bot: Bot, library: KbLibrary, search: SearchService, kb: str
) -> None:
    await share(slack, bot, [slack.share_file("weekly-sync.vtt", VTT)])
    msg = await share(slack, bot, [slack.share_file("weekly-sync.vtt", OTHER_MEETING)])
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert reply.versions[-1]["text"].startswith("Updated *Weekly sync* (`weekly-sync`)")

    msg = await share(slack, bot, [slack.share_file("weekly-sync.vtt", b"WEBVTT\n\nnot a cue")])
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert reply.versions[-1]["text"].startswith("I couldn't add weekly-sync.vtt")
    [kept] = [p for p in library.inbox(kb).rglob("*") if p.is_file()]
    assert kept.read_bytes() == OTHER_MEETING  # the live version's file, not the broken one
    hits = await search.search(kb, "warehouse lease renewal")
    assert hits and "lease" in hits[0].segment.text


async def test_sources_lists_and_forget_asks_then_removes(
    slack: SlackEmulator, bot: Bot, library: KbLibrary, search: SearchService, kb: str
) -> None:
    await share(slack, bot, [slack.share_file("june-planning.vtt", VTT)])

    assert (await slack.deliver_command(slack.command("/sources", ""))).status == 200
    await bot.settle()
    listed = slack.responses[-1]["text"]
    assert "1 source:" in listed and "`june-planning` June planning (video, 1 segment)" in listed

    await slack.deliver_command(slack.command("/forget", "june-planning", user=BOB))
    await bot.settle()
    assert slack.responses[-1]["text"] == NOT_ADMIN

    await slack.deliver_command(slack.command("/forget", "june-planning"))
    await bot.settle()
    confirm = slack.responses[-1]
    assert confirm["text"].startswith("Remove *June planning* (`june-planning`, 1 segment)")
    assert await library.sources(kb)  # nothing removed before the click

    prompt = Message(GENERAL, "1.000001", confirm["text"], confirm["blocks"])
    await slack.deliver_action(slack.block_action(prompt, ACTION_FORGET))
    await bot.settle()
    done = slack.responses[-1]
    assert done["replace_original"] is True
    assert done["text"].startswith("Removed `june-planning`")
    assert await library.sources(kb) == []
    assert await search.search(kb, "zanzibar rollout") == []


async def test_an_upload_in_the_assistant_panel_refreshes_its_suggested_prompts(
    slack: SlackEmulator, bot: Bot
) -> None:
    started = slack.open_assistant()
    await slack.deliver_event(started)
    await bot.settle()
    thread = str(started["event"]["assistant_thread"]["thread_ts"])
    before = [p["title"] for p in slack.prompts[("D0ALICE", thread)]]
    assert not any(t.startswith("Decisions in") for t in before)  # nothing recorded yet

    msg = slack.user_posts("D0ALICE", "add this", thread_ts=thread)
    event = slack.event(msg, files=[slack.share_file("june-planning.vtt", VTT)])
    event["event"]["subtype"] = "file_share"
    assert (await slack.deliver_event(event)).status == 200
    await bot.settle()
    [reply] = bot_replies(slack, "D0ALICE", thread)
    assert reply.versions[-1]["text"].startswith("Added *June planning*")
    titles = [p["title"] for p in slack.prompts[("D0ALICE", thread)]]
    assert titles[0] == "Decisions in June planning"


@pytest.fixture
async def heard_bot(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    slack: SlackEmulator,
    kb: str,
    tmp_path: Path,
) -> AsyncIterator[tuple[Bot, KbLibrary]]:
    """The bot over a library whose recordings get speakers, as ``quorum serve``'s do."""
    transcriber = Transcriber(cache_dir=tmp_path / "transcripts")
    async with held_library(store, embedder, search, tmp_path, transcriber=transcriber) as lib:
        lib.writer.diarizer = Diarizer()
        settings = make_settings(slack, slack_kb=kb, slack_admins=ALICE, upload_max_mb=5)
        async with running(FakeCore(library=lib), settings, slack) as b:
            yield b, lib


async def test_speakers_typed_beside_a_recording_is_the_count_it_is_heard_with(
    slack: SlackEmulator, heard_bot: tuple[Bot, KbLibrary], kb: str, tmp_path: Path
) -> None:
    bot, library = heard_bot
    """`speakers:N` in the message that shares a recording is the upload command's count:
    one voice heard as the two people the admin said; a count that is not one is refused
    before anything is downloaded."""
    wav = speak(
        tmp_path / "handover.wav",
        [
            "The restore drill moves to Tuesday morning.",
            "The backup bucket keeps thirty days of snapshots.",
            "The on call rota changes on the first of the month.",
        ],
    )
    file = slack.share_file("handover.wav", wav.path.read_bytes())
    await share(slack, bot, [file], text=f"<@{BOT_USER}> add this speakers:0")
    assert [e["text"] for e in slack.ephemerals if e["user"] == ALICE] == [BAD_SPEAKERS]
    assert slack.downloads == [] and await library.sources(kb) == []

    await share(slack, bot, [file], text=f"<@{BOT_USER}> add this, speakers: 2")
    [info] = await library.sources(kb)
    assert sorted(info.source.speakers) == ["Speaker 1", "Speaker 2"]
