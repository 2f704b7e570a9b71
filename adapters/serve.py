"""``quorum serve [PLATFORM|all]``: run the configured chat platforms in one process,
sharing one core (one Weaviate client, one session store, one Claude client), beside the
HTTP server (health, metrics, the JSON API) that always runs; with no platform
configured, the API alone (``adapters.lifecycle``)."""

from __future__ import annotations

from typing import Annotated

import typer

from adapters import platform as registry
from adapters.cli.app import fail, run
from adapters.lifecycle import serve_until_stopped
from bot.config import Settings
from retrieval.errors import ConfigError
from retrieval.links.share import load_secret


def configured(settings: Settings) -> list[str]:
    """Platforms whose credentials are set."""
    return [p.name for p in registry.configured(settings)]


def serve(
    platform: Annotated[
        str, typer.Argument(help="A chat platform's name, or all (the configured ones).")
    ] = "all",
) -> None:
    """Run the bot on the configured chat platforms, and the HTTP API."""
    by_name = registry.by_name()
    names = ", ".join(by_name)
    if platform != "all" and platform not in by_name:
        raise fail(f"Unknown platform {platform!r}: use {names} or all.")

    async def go(settings: Settings) -> None:
        if platform != "all" and not by_name[platform].is_configured(settings):
            raise ConfigError(f"Set {by_name[platform].needs} to serve {platform}.")
        wanted = [by_name[platform]] if platform != "all" else list(by_name.values())
        # Read (or made) now, not at the first link: with an unusable secret every page
        # and search would fail while /readyz said ready, so serve refuses to start.
        secret = settings.link_secret
        load_secret(settings.data_dir, secret.get_secret_value() if secret else None)
        await serve_until_stopped(settings, [p for p in wanted if p.is_configured(settings)])

    run(go)
