"""Discord's settings (``DISCORD_TOKEN``, ``QUORUM_DISCORD_*`` knobs), loaded by
``Settings.platform``: ``discord_settings(settings).kb``."""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from bot.config import CsvInts, PlatformSettings, Settings


class DiscordSettings(PlatformSettings):
    """Everything Quorum needs to know to be on Discord."""

    model_config = SettingsConfigDict(env_prefix="QUORUM_DISCORD_")

    token: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("DISCORD_TOKEN", "QUORUM_DISCORD_TOKEN"),
        description="The bot's token: serve Discord.",
    )
    api_url: str | None = Field(None, description="Discord REST API base URL.")
    guild_id: int | None = Field(None, description="Guild to sync commands to (fast).")
    guilds: CsvInts = Field(
        default_factory=list, description="Allowed guild ids (empty: every guild)."
    )
    channels: CsvInts = Field(
        default_factory=list, description="Allowed channel ids (empty: every channel)."
    )
    kb: str | None = Field(
        None, description="Knowledge base for every Discord guild (default: the guild id)."
    )
    admin_role: str | None = Field(
        None,
        description="Role (id or name) whose members may add and forget sources; members "
        "with the Manage Server permission always may.",
    )


def discord_settings(settings: Settings) -> DiscordSettings:
    """Discord's settings within ``settings``."""
    return settings.platform(DiscordSettings)
