"""Quorum on Discord: ``client`` (events and the answer flow), ``commands`` (the app
commands), ``ui`` (live placeholder, feedback buttons), ``render`` (messages within
Discord's limits), ``cli`` (``quorum discord sync``), ``settings``, ``doctor``, ``post``."""

import warnings

# discord.py imports the stdlib's deprecated audioop (voice support we never use); without
# this every command that loads it would start with a DeprecationWarning. Set here, the
# package's first line, before any of its modules imports discord.py.
warnings.filterwarnings("ignore", message="'audioop' is deprecated", category=DeprecationWarning)

from adapters.discord.settings import DiscordSettings  # noqa: E402
from adapters.platform import Platform  # noqa: E402

PLATFORM = Platform(
    name="discord",
    settings=DiscordSettings,
    configured=lambda s: s.token is not None,
    needs="DISCORD_TOKEN",
    runner="adapters.discord.client:run_discord",
    doctor="adapters.discord.doctor:check_discord",
    poster="adapters.discord.post:post_to_discord",
    channel="CHANNEL_ID",
    cli="adapters.discord.cli:discord_app",
)
