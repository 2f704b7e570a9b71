"""Quorum on Discord: ``client`` (events and the answer flow), ``commands`` (the app
commands), ``ui`` (live placeholder, feedback buttons), ``render`` (messages within
Discord's limits), ``cli`` (``quorum discord sync``)."""

from adapters.platform import Platform

PLATFORM = Platform(
    name="discord",
    configured=lambda s: s.discord_token is not None,
    needs="DISCORD_TOKEN",
    runner="adapters.discord.client:run_discord",
)
