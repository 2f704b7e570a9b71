"""The ``/ask`` and ``/research`` app commands and their autocomplete. Module-level, so
``quorum discord sync`` can register them with Discord without a core; at run time they
hand over to the client (``adapters.discord.QuorumClient``), which answers."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, cast

import discord
from discord import app_commands

from adapters.chat.options import check_range, parse_date
from adapters.discord.uploads import add_upload_commands
from bot.models import Core, Mode
from retrieval.models import SearchFilters

log = logging.getLogger("quorum.discord")

AUTOCOMPLETE_TIMEOUT_S = 2.0  # autocomplete must be answered within 3 s


class Asker(Protocol):
    """What the commands need from the client."""

    core: Core

    def kb_for(self, guild_id: int | None) -> str: ...

    async def allowed(self, guild_id: int | None, channel: object, user_id: int) -> bool: ...

    async def on_slash(
        self, interaction: discord.Interaction[Any], text: str, mode: Mode, **opts: Any
    ) -> None: ...


def asker(interaction: discord.Interaction[Any]) -> Asker:
    """The Quorum client behind an interaction."""
    return cast(Asker, interaction.client)


def slash_filters(
    speaker: str | None = None,
    source: str | None = None,
    after: str | None = None,
    before: str | None = None,
) -> SearchFilters:
    """SearchFilters from /ask's options, validated (a bad date is one clear sentence)."""
    start = parse_date(after, f"after: {after!r}")
    end = parse_date(before, f"before: {before!r}")
    check_range(start, end, "{}: ")
    return SearchFilters(speaker=speaker or None, source=source or None, after=start, before=end)


def choices(names: Sequence[str], current: str) -> list[app_commands.Choice[str]]:
    """Up to 25 names containing what the user typed, those starting with it first."""
    typed = current.strip().lower()
    hits = [n for n in dict.fromkeys(names) if n and 0 < len(n) <= 100 and typed in n.lower()]
    hits.sort(key=lambda n: (not n.lower().startswith(typed), n.lower()))
    return [app_commands.Choice(name=n, value=n) for n in hits[:25]]


async def _complete(
    interaction: discord.Interaction[Any],
    current: str,
    lookup: Callable[[Core, str], Awaitable[list[str]]],
) -> list[app_commands.Choice[str]]:
    client = asker(interaction)
    if not await client.allowed(interaction.guild_id, interaction.channel, interaction.user.id):
        return []
    try:
        names = await asyncio.wait_for(
            lookup(client.core, client.kb_for(interaction.guild_id)), AUTOCOMPLETE_TIMEOUT_S
        )
    except Exception:
        log.warning("autocomplete lookup failed", exc_info=True)
        return []
    return choices(names, current)


async def speaker_autocomplete(
    interaction: discord.Interaction[Any], current: str
) -> list[app_commands.Choice[str]]:
    """Speakers in the knowledge base matching what was typed."""
    return await _complete(interaction, current, lambda core, kb: core.speakers(kb))


async def source_autocomplete(
    interaction: discord.Interaction[Any], current: str
) -> list[app_commands.Choice[str]]:
    """Source titles in the knowledge base matching what was typed."""
    return await _complete(interaction, current, lambda core, kb: core.source_titles(kb))


Text = app_commands.Range[str, 1, 4000]


@app_commands.command(name="ask", description="Ask the team's recordings and documents.")
@app_commands.describe(
    question="What you want to know",
    speaker="Only passages by this speaker",
    source="Only this recording or document",
    after="Recorded on or after (YYYY-MM-DD)",
    before="Recorded on or before (YYYY-MM-DD)",
)
@app_commands.autocomplete(speaker=speaker_autocomplete, source=source_autocomplete)
async def ask_command(
    interaction: discord.Interaction[Any],
    question: Text,
    speaker: str | None = None,
    source: str | None = None,
    after: str | None = None,
    before: str | None = None,
) -> None:
    """/ask: a quick answer with citations, in a thread."""
    await asker(interaction).on_slash(
        interaction, question, "quick", speaker=speaker, source=source, after=after, before=before
    )


@app_commands.command(name="research", description="Research a hard question step by step.")
@app_commands.describe(question="What you want researched")
async def research_command(interaction: discord.Interaction[Any], question: Text) -> None:
    """/research: deep research, showing its steps as it goes."""
    await asker(interaction).on_slash(interaction, question, "deep")


def add_commands(tree: app_commands.CommandTree[Any]) -> None:
    """Register /ask, /research, and /ingest, /sources, /forget on a tree."""
    tree.add_command(ask_command)
    tree.add_command(research_command)
    add_upload_commands(tree)
