"""``/speakers`` in chat, end to end: Bolt against the Slack emulator, the real
``KbLibrary`` over the session Weaviate server (Discord: ``test_speakers_discord``). An
admin (the rule of ``/forget``) lists a shared meeting's speakers with linked excerpts,
renames and merges them; anyone else is refused; bad input is one sentence."""

from __future__ import annotations

from pathlib import Path

from adapters.chat.prompts import suggestions
from adapters.chat.speakers import USAGE, parse
from adapters.chat.uploads import NOT_ADMIN
from retrieval.search.search import SearchService
from tests.conftest import PAGES
from tests.emulators.slack import SlackEmulator
from tests.fakes import FakeCore
from tests.speaker_meeting import write_meeting
from tests.test_slack import Bot
from tests.test_uploads_slack import BOB, bot, library, share, slack  # noqa: F401

SID = "2024-06-04-infra-review"


def meeting_bytes(tmp_path: Path) -> bytes:
    return write_meeting(tmp_path / "m", SID).read_bytes()


async def slash(slack: SlackEmulator, bot: Bot, text: str, user: str | None = None) -> str:  # noqa: F811
    fields = slack.command("/speakers", text, **({"user": user} if user else {}))
    assert (await slack.deliver_command(fields)).status == 200
    await bot.settle()
    said: str = slack.responses[-1]["text"]
    return said


async def test_slack_lists_renames_and_merges_for_an_admin_only(
    slack: SlackEmulator,  # noqa: F811
    bot: Bot,  # noqa: F811
    search: SearchService,
    kb: str,
    tmp_path: Path,
) -> None:
    await share(slack, bot, [slack.share_file(f"{SID}.vtt", meeting_bytes(tmp_path))])

    assert await slash(slack, bot, SID, user=BOB) == NOT_ADMIN
    listed = await slash(slack, bot, SID)
    assert listed.index("*Speaker 2*") < listed.index("*Speaker 1*")  # most talk first
    assert "1:45 of talk" in listed and f"{PAGES}/v/" in listed and "#t=" in listed

    said = await slash(slack, bot, f"rename {SID} “Speaker 2” “Amara Osei”")  # a phone's quotes
    assert said.startswith("In *") and "Speaker 2 is now Amara Osei" in said
    hits = await search.search(kb, "restore drill")
    assert any("Amara Osei" in h.segment.speakers for h in hits)
    assert not any("Speaker 2" in h.segment.speakers for h in hits)

    said = await slash(slack, bot, f'merge {SID} "Speaker 3" "Speaker 1"')
    assert "Its speakers: Speaker 1, Amara Osei." in said
    said = await slash(slack, bot, f'rename {SID} "Speaker 1" "Amara Osei"')
    assert "already has a speaker 'Amara Osei'" in said and "merge" in said
    assert await slash(slack, bot, "rename only-two") == USAGE
    assert (await slash(slack, bot, "no-such-meeting")).startswith("No source matches")


def test_a_command_is_read_as_a_phone_types_it() -> None:
    asked = parse("rename weekly ‘Speaker 2’ “Dr. Amara O'Sei”")
    assert not isinstance(asked, str)
    assert (asked.action, asked.source, asked.label, asked.name) == (
        "rename",
        "weekly",
        "Speaker 2",
        "Dr. Amara O'Sei",
    )
    assert parse('rename weekly "Speaker 2') == f"A quote is not closed. {USAGE}"
    too_long = parse("x" * 600)
    assert isinstance(too_long, str) and too_long.startswith("That is too long for /speakers")


async def test_suggested_prompts_name_a_named_speaker_never_a_label() -> None:
    core = FakeCore()
    core.speaker_names = ["Speaker 1", "Speaker 2", "Amara Osei"]
    titles = [s.title for s in await suggestions(core, "kb")]
    assert "What Amara Osei raised" in titles
    assert not any("Speaker 1" in t for t in titles)
    core.speaker_names = ["Speaker 1", "Speaker 2"]
    assert not any("raised" in s.title for s in await suggestions(core, "kb"))
