"""``quorum serve [slack|discord|all]``: run the configured platform adapters in one
process, sharing one core (one Weaviate client, one session store, one Claude client)."""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

import typer

from adapters.cli.commands import fail, run
from bot.config import Settings
from bot.wiring import open_core
from retrieval.errors import ConfigError

Platform = Literal["slack", "discord", "all"]


def configured(settings: Settings) -> list[str]:
    """Platforms whose credentials are set."""
    found = []
    if settings.slack_bot_token:
        found.append("slack")
    if settings.discord_token:
        found.append("discord")
    return found


def serve(
    platform: Annotated[
        str, typer.Argument(help="slack, discord or all (the configured ones).")
    ] = "all",
) -> None:
    """Run the bot on Slack and/or Discord."""
    if platform not in ("slack", "discord", "all"):
        raise fail(f"Unknown platform {platform!r}: use slack, discord or all.")

    async def go(settings: Settings) -> None:
        wanted = configured(settings) if platform == "all" else [platform]
        if not wanted:
            raise ConfigError(
                "Nothing to serve: set SLACK_BOT_TOKEN (and SLACK_APP_TOKEN or "
                "SLACK_SIGNING_SECRET) and/or DISCORD_TOKEN."
            )
        async with open_core(settings) as services:
            runners = []
            if "slack" in wanted:
                from adapters.slack.app import run_slack

                runners.append(run_slack(services.engine, settings))
            if "discord" in wanted:
                from adapters.discord.client import run_discord

                runners.append(run_discord(services.engine, settings))
            await asyncio.gather(*runners)

    run(go)
