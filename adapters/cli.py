"""The ``quorum`` entry point: the core's commands plus the platform ones (chat, serve,
demo), which live here because only adapters may import the platform SDKs."""

from __future__ import annotations

import logging

from adapters.console import chat_command, demo_command
from adapters.discord_cli import discord_app
from adapters.doctor import doctor
from adapters.serve import serve
from bot.cli import app

app.command("serve")(serve)
app.command("chat")(chat_command)
app.command("demo")(demo_command)
app.command("doctor")(doctor)
app.add_typer(discord_app)

__all__ = ["app", "main"]


def main() -> int:
    """Run the ``quorum`` command line."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    app()
    return 0
