"""Every ``quorum`` command: the core's plus the platform ones (serve, chat, demo, doctor,
discord)."""

from __future__ import annotations

from adapters.cli import ask, commands, privacy, transcript  # noqa: F401  (register their commands)
from adapters.cli.app import app, launch
from adapters.console.app import chat_command, demo_command
from adapters.discord.cli import discord_app
from adapters.doctor import doctor
from adapters.serve import serve

app.command("serve")(serve)
app.command("chat")(chat_command)
app.command("demo")(demo_command)
app.command("doctor")(doctor)
app.add_typer(discord_app)

__all__ = ["app", "launch"]
