"""``/speakers`` on Discord, end to end: discord.py against the Discord emulator, the real
``KbLibrary`` over the session Weaviate server (the fixtures of ``test_uploads_discord``):
an admin (the admin role, the rule of ``/forget``) lists and renames, anyone else is
refused, a rename without a name is one sentence."""

from __future__ import annotations

from pathlib import Path

from adapters.chat.uploads import NOT_ADMIN
from bot.library import KbLibrary
from tests.speaker_meeting import write_meeting
from tests.test_discord import ALICE, CHANNEL, Harness
from tests.test_uploads_discord import BOB, attach, bot, contents, emu, library  # noqa: F401

SID = "2024-06-04-infra-review"


async def test_discord_lists_and_renames_for_an_admin_only(
    bot: Harness,  # noqa: F811
    library: KbLibrary,  # noqa: F811
    kb: str,
    tmp_path: Path,
) -> None:
    d = bot.emu
    await attach(
        bot,
        ALICE,
        d.attachment(CHANNEL, f"{SID}.vtt", write_meeting(tmp_path / "m", SID).read_bytes()),
    )

    await bot.send("INTERACTION_CREATE", d.slash("speakers", CHANNEL, BOB, source=SID))
    refused = d.find("POST", r"/interactions/\d+/[^/]+/callback")[-1].body["data"]
    assert refused["content"] == NOT_ADMIN and refused["flags"] == 64

    await bot.send("INTERACTION_CREATE", d.slash("speakers", CHANNEL, ALICE, source=SID))
    listed = contents(d, "/webhooks/")[-1]
    assert "*Speaker 2*: 1:45 of talk" in listed and "#t=" in listed
    await bot.send(
        "INTERACTION_CREATE",
        d.slash(
            "speakers",
            CHANNEL,
            ALICE,
            source=SID,
            action="rename",
            speaker="Speaker 2",
            to="Amara Osei",
        ),
    )
    assert "Speaker 2 is now Amara Osei" in contents(d, "/webhooks/")[-1]
    [info] = await library.sources(kb)
    assert "Amara Osei" in info.source.speakers and "Speaker 2" not in info.source.speakers
    await bot.send(
        "INTERACTION_CREATE",
        d.slash("speakers", CHANNEL, ALICE, source=SID, action="rename", speaker="Speaker 1"),
    )
    assert "rename needs a source, a speaker and a name" in contents(d, "/webhooks/")[-1]
