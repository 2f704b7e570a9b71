"""``quorum serve [slack|discord|all]``: run the configured platform adapters in one
process, sharing one core (one Weaviate client, one session store, one Claude client),
beside the HTTP server (health, metrics, the JSON API) that always runs; with no
platform configured, the API alone (``adapters.lifecycle``)."""

from __future__ import annotations

from typing import Annotated, Literal

import typer

from adapters.lifecycle import Runner, serve_until_stopped
from bot.cli import fail, run
from bot.config import Settings
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
    """Run the bot on Slack and/or Discord, and the HTTP API."""
    if platform not in ("slack", "discord", "all"):
        raise fail(f"Unknown platform {platform!r}: use slack, discord or all.")

    async def go(settings: Settings) -> None:
        wanted = configured(settings) if platform == "all" else [platform]
        if platform != "all" and platform not in configured(settings):
            token = "SLACK_BOT_TOKEN" if platform == "slack" else "DISCORD_TOKEN"
            raise ConfigError(f"Set {token} to serve {platform}.")
        runners: dict[str, Runner] = {}
        if "slack" in wanted:
            from adapters.slack import run_slack

            runners["slack"] = run_slack
        if "discord" in wanted:
            from adapters.discord import run_discord

            runners["discord"] = run_discord
        await serve_until_stopped(settings, runners)

    run(go)
