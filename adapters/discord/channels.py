"""Where a Discord message was posted, in Quorum's terms: the session a thread or DM is,
whether a channel is a thread (cached or not), and which channel an allow-list means."""

from __future__ import annotations

import discord

from bot.models import ThreadKey

_THREAD_TYPES = (
    discord.ChannelType.public_thread,
    discord.ChannelType.private_thread,
    discord.ChannelType.news_thread,
)


def conversation(guild_id: int | None, channel_id: int) -> ThreadKey:
    """The session of a channel that is itself the conversation (a thread or a DM)."""
    workspace = str(guild_id) if guild_id else "dm"
    return ThreadKey("discord", workspace, str(channel_id), str(channel_id))


def is_thread(channel: object) -> bool:
    """A thread, cached or not (an uncached one arrives as a typeless PartialMessageable)."""
    if isinstance(channel, discord.Thread):
        return True
    if isinstance(channel, discord.PartialMessageable):
        return channel.type is None or channel.type in _THREAD_TYPES
    return False


def home_channel_id(channel: object) -> int | None:
    """The channel the allow-list is about: a thread's parent, else the channel itself."""
    if isinstance(channel, discord.Thread):
        return channel.parent_id
    return getattr(channel, "id", None)
