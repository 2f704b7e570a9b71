"""Discord's row of ``quorum doctor``: the token, the Message Content intent, and the
app commands registered, each failure with its fix."""

from __future__ import annotations

import discord
from discord import app_commands

from adapters.discord.client import bot_token, configure_api
from adapters.discord.commands import add_commands
from adapters.discord.settings import discord_settings
from adapters.platform import Check
from bot.config import Settings


async def check_discord(settings: Settings) -> Check | None:
    """The token, the Message Content intent, and /ask and /research registered."""
    own = discord_settings(settings)
    if own.token is None:
        return None
    configure_api(settings)
    client = discord.Client(intents=discord.Intents(guilds=True))  # REST only
    tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(client)
    add_commands(tree)
    wanted = {c.name for c in tree.get_commands()}
    async with client:
        try:
            await client.login(bot_token(settings))
        except discord.LoginFailure:
            return Check(
                "discord",
                "FAIL",
                "Discord rejected DISCORD_TOKEN.",
                "Reset the token in the Developer Portal (Bot > Reset Token) and set it.",
            )
        info = await client.application_info()
        flags = info.flags
        if not (flags.gateway_message_content or flags.gateway_message_content_limited):
            return Check(
                "discord",
                "FAIL",
                "The Message Content intent is off.",
                "Developer Portal > Bot > Privileged Gateway Intents: turn on Message Content.",
            )
        guild = discord.Object(own.guild_id) if own.guild_id else None
        synced = {c.name for c in await tree.fetch_commands(guild=guild)}
    missing = sorted(wanted - synced)
    if missing:
        command = "quorum discord sync" + (" --global" if guild is None else "")
        return Check(
            "discord",
            "FAIL",
            f"Slash commands not registered: {', '.join('/' + m for m in missing)}.",
            f"Run `{command}`.",
        )
    return Check("discord", "ok", f"logged in as {client.user}, intents and commands in place")
