"""The ``quorum`` entry point: the core's commands plus the platform ones (serve, chat,
demo, discord)."""

from __future__ import annotations

import logging

from adapters.cli import ask, commands  # noqa: F401  (register their commands)
from adapters.cli.app import app
from adapters.cli.transcript import transcript_cmd
from adapters.console.app import chat_command, demo_command
from adapters.discord.cli import discord_app
from adapters.doctor import doctor
from adapters.serve import serve

app.command("transcript")(transcript_cmd)
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
