"""A file shared in chat with a name over 100 characters (meeting tools make them) is
read by its real extension and added, not refused as "a file without an extension";
messages show the name shortened with its extension kept. Slack end to end: Bolt against
the Slack emulator, the real library over the session Weaviate."""

from __future__ import annotations

from retrieval.search.search import SearchService
from tests.emulators.slack import SlackEmulator
from tests.test_slack import GENERAL, Bot, bot_replies
from tests.test_uploads_slack import VTT, bot, library, share, slack

__all__ = ["bot", "library", "slack"]  # the Slack upload tests' fixtures, used here

LONG = "2024-06-03 Quarterly planning with the warehouse, billing and vendor teams " * 2


async def test_a_long_file_name_is_added_by_its_extension(
    slack: SlackEmulator, bot: Bot, search: SearchService, kb: str
) -> None:
    name = LONG.strip().replace(" ", "_") + ".vtt"
    assert len(name) > 100
    msg = await share(slack, bot, [slack.share_file(name, VTT)])

    [reply] = bot_replies(slack, GENERAL, msg.ts)
    final = reply.versions[-1]["text"]
    assert final.startswith("Added *"), final
    assert "without an extension" not in final
    first = reply.versions[0]["text"]
    assert first.startswith("Downloading 2024-06-03_Quarterly") and first.endswith("….vtt…")
    hits = await search.search(kb, "when does the zanzibar rollout happen")
    assert hits and "zanzibar" in hits[0].segment.text
