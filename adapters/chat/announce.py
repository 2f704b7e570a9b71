"""``QUORUM_POST_SUMMARIES``: when ``quorum ingest`` adds or changes a recording, its
summary goes to the team's channel, each line linked to its moment, so people hear about
a new recording where they already are. Where to post is ``PLATFORM:CHANNEL`` (several,
comma-separated), for any registered platform; how to post is each platform's."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from adapters.platform import Poster, platforms
from bot.cite.citations import at_second
from bot.config import Settings
from bot.write import Announcer
from retrieval.errors import ConfigError, InvalidInput, QuorumError
from retrieval.links.links import format_timestamp
from retrieval.models import Hit
from retrieval.search.search import KbArchive, SearchService
from retrieval.write.indexer import FileResult
from retrieval.write.summary import LABELS, read_lines

log = logging.getLogger("quorum.announce")

RECORDINGS = ("video", "audio")


@dataclass(frozen=True)
class Target:
    """One place summaries are posted."""

    platform: str
    channel: str


def targets(value: str | None) -> list[Target]:
    """``name:C123,other:456`` as targets; a ConfigError names a malformed one."""
    channels = {p.name: p.channel for p in platforms()}
    found: list[Target] = []
    for raw in (value or "").split(","):
        if not raw.strip():
            continue
        platform, _, channel = raw.strip().partition(":")
        if platform not in channels or not channel.strip():
            forms = " or ".join(f"{name}:{form}" for name, form in channels.items())
            raise ConfigError(
                f"QUORUM_POST_SUMMARIES: {raw.strip()!r} is not {forms} "
                "(comma-separated for several)."
            )
        found.append(Target(platform, channel.strip()))
    return found


def summary_markdown(hit: Hit) -> str:
    """A stored summary as Markdown: the title, then each line with a link to its moment."""
    lines = [f"**New recording: {hit.source.title}**"]
    for line in read_lines(hit.segment):
        where = ""
        if line.start_s is not None:
            link = at_second(hit, line.start_s)[1]
            stamp = format_timestamp(line.start_s)
            where = f" [{stamp}]({link})" if link else f" ({stamp})"
        lines.append(f"- {LABELS[line.section]}: {line.text}{where}")
    return "\n".join(lines)


async def announce(
    settings: Settings,
    archive: KbArchive,
    results: Sequence[FileResult],
    posters: Mapping[str, Poster] | None = None,
) -> list[str]:
    """Post the summary of every recording ``results`` added or changed to each target,
    through its platform's poster (``posters`` stands in for them in tests); returns one
    line per failure (a post that fails never fails the ingest)."""
    where = targets(settings.post_summaries)
    if not where:
        return []
    if posters is None:
        posters = {p.name: p.post for p in platforms()}
    failures: list[str] = []
    changed = [r for r in results if r.status in ("added", "updated") and r.source_id]
    for result in changed:
        assert result.source_id is not None
        try:
            hit = await archive.summary(result.source_id)
        except InvalidInput:  # too short to have a summary
            continue
        if hit.source.kind not in RECORDINGS:
            continue
        text = summary_markdown(hit)
        for target in where:
            try:
                await posters[target.platform](settings, target.channel, text)
            except (QuorumError, OSError) as exc:
                log.warning("posting a summary to %s failed: %s", target, exc)
                failures.append(
                    f"Could not post the summary of {hit.source.title} to "
                    f"{target.platform}:{target.channel} ({exc})."
                )
    return failures


def announcer(settings: Settings, search: SearchService) -> Announcer:
    """The core's ``Announcer`` (``bot.write``): what a write added, posted to the
    ``QUORUM_POST_SUMMARIES`` targets."""

    async def post(kb: str, results: Sequence[FileResult]) -> list[str]:
        return await announce(settings, search.archive(kb), results)

    return post
