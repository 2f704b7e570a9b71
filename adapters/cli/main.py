"""Every ``quorum`` command: the core's plus the platform ones (serve, chat, demo, doctor,
and the groups each registered chat platform adds)."""

from __future__ import annotations

import typer

from adapters.cli import (  # noqa: F401
    ask,
    commands,
    insights,
    jobs,
    mcp,
    privacy,
    speakers,
    transcript,
)
from adapters.cli.app import app, launch
from adapters.console.app import chat_command, demo_command
from adapters.doctor import doctor
from adapters.platform import platforms
from adapters.serve import serve

app.command("serve")(serve)
app.command("chat")(chat_command)
app.command("demo")(demo_command)
app.command("doctor")(doctor)


def add_platform_commands(cli: typer.Typer) -> None:
    """Each registered platform's own group of commands (``quorum <name> ...``)."""
    for chat in platforms():
        if (group := chat.commands()) is not None:
            cli.add_typer(group)


add_platform_commands(app)

__all__ = ["add_platform_commands", "app", "launch"]
