"""Posting one message to a Discord channel outside any conversation (summaries of newly
ingested recordings, ``adapters.chat.announce``): REST only, no gateway."""

from __future__ import annotations

import discord

from adapters.discord.client import REJECTED, bot_token, configure_api
from adapters.discord.render import split_text
from bot.config import Settings
from retrieval.errors import ConfigError, QuorumError


async def post_to_discord(settings: Settings, channel: str, markdown: str) -> None:
    """Post ``markdown`` to the channel with id ``channel`` as the bot."""
    token = bot_token(settings)
    if not channel.isdigit():
        raise ConfigError(f"discord:{channel} is not a channel id (a number).")
    configure_api(settings)
    client = discord.Client(intents=discord.Intents(guilds=True))  # REST only
    async with client:
        try:
            await client.login(token)
        except discord.LoginFailure as exc:
            raise ConfigError(REJECTED) from exc
        try:
            target = client.get_partial_messageable(int(channel))
            for piece in split_text(markdown):
                await target.send(piece, allowed_mentions=discord.AllowedMentions.none())
        except discord.HTTPException as exc:
            raise QuorumError(f"Discord said {exc.status} {exc.text or ''}".strip()) from exc
