"""Slack's settings (``SLACK_*`` secrets, ``QUORUM_SLACK_*`` knobs), loaded by
``Settings.platform``: ``slack_settings(settings).kb``."""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from bot.config import CsvStrs, PlatformSettings, Settings


class SlackSettings(PlatformSettings):
    """Everything Quorum needs to know to be on Slack."""

    model_config = SettingsConfigDict(env_prefix="QUORUM_SLACK_")

    bot_token: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("SLACK_BOT_TOKEN", "QUORUM_SLACK_BOT_TOKEN"),
        description="xoxb- token: serve Slack.",
    )
    app_token: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("SLACK_APP_TOKEN", "QUORUM_SLACK_APP_TOKEN"),
        description="xapp- token: Socket Mode. Without it, HTTP events.",
    )
    signing_secret: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("SLACK_SIGNING_SECRET", "QUORUM_SLACK_SIGNING_SECRET"),
        description="Verifies HTTP events.",
    )
    api_url: str = Field("https://slack.com/api/", description="Slack Web API base URL.")
    port: int = Field(3000, ge=1, le=65535, description="HTTP events port.")
    channels: CsvStrs = Field(
        default_factory=list, description="Allowed channel ids (empty: every channel)."
    )
    kb: str | None = Field(
        None, description="Knowledge base for every Slack workspace (default: the team id)."
    )
    admins: CsvStrs = Field(
        default_factory=list,
        description="User ids who may add files in chat and /forget sources (empty: nobody).",
    )


def slack_settings(settings: Settings) -> SlackSettings:
    """Slack's settings within ``settings``."""
    return settings.platform(SlackSettings)
