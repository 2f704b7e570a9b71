"""``quorum serve [PLATFORM|all]``: run the configured chat platforms in one process,
sharing one core (one Weaviate client, one session store, one Claude client)."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from adapters import discord, slack
from adapters.cli.commands import fail, run
from adapters.platform import Platform
from bot.config import Settings
from bot.wiring import open_core
from retrieval.errors import ConfigError

PLATFORMS: tuple[Platform, ...] = (slack.PLATFORM, discord.PLATFORM)
NAMES = ", ".join(p.name for p in PLATFORMS)


def configured(settings: Settings) -> list[str]:
    """Platforms whose credentials are set."""
    return [p.name for p in PLATFORMS if p.configured(settings)]


def serve(
    platform: Annotated[
        str,
        typer.Argument(
            help=f"{', '.join(p.name for p in PLATFORMS)} or all (the configured ones)."
        ),
    ] = "all",
) -> None:
    """Run the bot on the configured chat platforms."""
    by_name = {p.name: p for p in PLATFORMS}
    if platform != "all" and platform not in by_name:
        raise fail(f"Unknown platform {platform!r}: use {NAMES} or all.")

    async def go(settings: Settings) -> None:
        wanted = [by_name[platform]] if platform != "all" else []
        wanted = wanted or [p for p in PLATFORMS if p.configured(settings)]
        if not wanted:
            needs = " and/or ".join(p.needs for p in PLATFORMS)
            raise ConfigError(f"Nothing to serve: set {needs}.")
        async with open_core(settings) as services:
            await asyncio.gather(*(p.run(services.engine, settings) for p in wanted))

    run(go)
