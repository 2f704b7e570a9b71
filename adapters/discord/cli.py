"""``quorum discord sync [--global]``: register /ask and /research with Discord, once,
rather than on every start (Discord rate-limits command updates). Registered by
``adapters.cli.main`` as the ``discord`` sub-command group."""

from __future__ import annotations

from typing import Annotated

import discord
import typer
from discord import app_commands

from adapters.cli.app import fail, run
from adapters.discord.client import REJECTED, bot_token, configure_api
from adapters.discord.commands import add_commands
from adapters.discord.settings import discord_settings
from bot.config import Settings
from retrieval.errors import ConfigError

discord_app = typer.Typer(name="discord", help="Discord set-up commands.", no_args_is_help=True)


@discord_app.callback()
def discord_group() -> None:
    """Discord set-up commands (a group even with one command, so `sync` is its name)."""


async def sync_commands(settings: Settings, *, globally: bool) -> tuple[list[str], str]:
    """Register /ask and /research with Discord: on one guild (instant) or globally."""
    token = bot_token(settings)
    if not globally and discord_settings(settings).guild_id is None:
        raise ConfigError(
            "Set QUORUM_DISCORD_GUILD_ID to sync to your server (instant), "
            "or pass --global to sync everywhere."
        )
    configure_api(settings)
    client = discord.Client(intents=discord.Intents(guilds=True))  # REST only
    tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(client)
    add_commands(tree)
    async with client:
        try:
            await client.login(token)
        except discord.LoginFailure as exc:
            raise ConfigError(REJECTED) from exc
        if globally:
            synced = await tree.sync()
            return [c.name for c in synced], "every server (global commands)"
        guild = discord.Object(discord_settings(settings).guild_id or 0)
        tree.copy_global_to(guild=guild)
        synced = await tree.sync(guild=guild)
        return [c.name for c in synced], f"guild {guild.id}"


@discord_app.command("sync")
def sync_cmd(
    global_: Annotated[
        bool, typer.Option("--global", help="Sync to every server (not just the configured one).")
    ] = False,
) -> None:
    """Register the /ask and /research commands with Discord (once, not on every start)."""
    names, where = run(lambda settings: sync_commands(settings, globally=global_))
    if not names:
        raise fail("Discord accepted no commands.")
    typer.echo(f"Synced {', '.join('/' + n for n in names)} to {where}.")
