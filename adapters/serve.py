"""``quorum serve [PLATFORM|all]``: run the configured chat platforms in one process,
sharing one core (one Weaviate client, one session store, one Claude client), beside the
HTTP server (health, metrics, the JSON API) that always runs; with no platform
configured, the API alone (``adapters.lifecycle``)."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters import discord, slack
from adapters.cli.app import fail, run
from adapters.lifecycle import Runner, serve_until_stopped
from adapters.platform import Platform
from bot.config import Settings
from retrieval.errors import ConfigError

PLATFORMS: tuple[Platform, ...] = (slack.PLATFORM, discord.PLATFORM)
NAMES = ", ".join(p.name for p in PLATFORMS)


def configured(settings: Settings) -> list[str]:
    """Platforms whose credentials are set."""
    return [p.name for p in PLATFORMS if p.configured(settings)]


def serve(
    platform: Annotated[str, typer.Argument(help=f"{NAMES} or all (the configured ones).")] = "all",
) -> None:
    """Run the bot on the configured chat platforms, and the HTTP API."""
    by_name = {p.name: p for p in PLATFORMS}
    if platform != "all" and platform not in by_name:
        raise fail(f"Unknown platform {platform!r}: use {NAMES} or all.")

    async def go(settings: Settings) -> None:
        if platform != "all" and not by_name[platform].configured(settings):
            raise ConfigError(f"Set {by_name[platform].needs} to serve {platform}.")
        wanted = [by_name[platform]] if platform != "all" else PLATFORMS
        runners: dict[str, Runner] = {p.name: p.run for p in wanted if p.configured(settings)}
        await serve_until_stopped(settings, runners)

    run(go)
