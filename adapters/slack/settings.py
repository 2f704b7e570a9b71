"""Slack's settings (``SLACK_*`` secrets, ``QUORUM_SLACK_*`` knobs), loaded by
``Settings.platform``: ``slack_settings(settings).kb``."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr
from pydantic_settings import NoDecode, SettingsConfigDict

from bot.config import CsvStrs, PlatformSettings, Settings


def _pairs(value: object) -> object:
    """``C0SALES:sales, C0ENG:eng`` -> ``{"C0SALES": "sales", "C0ENG": "eng"}``."""
    if not isinstance(value, str):
        return value
    out: dict[str, str] = {}
    for item in filter(None, (i.strip() for i in value.split(","))):
        channel, _, kb = (part.strip() for part in item.partition(":"))
        if not channel or not kb:
            raise ValueError(f"{item!r} is not CHANNEL:KB (e.g. C0123ABC:sales)")
        out[channel] = kb
    return out


EVENTS_PATH = "/slack/events"
ChannelKbs = Annotated[dict[str, str], NoDecode, BeforeValidator(_pairs)]


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
    port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="HTTP events on a port of their own (default: quorum serve's port, at "
        "/slack/events).",
    )
    channels: CsvStrs = Field(
        default_factory=list, description="Allowed channel ids (empty: every channel)."
    )
    kb: str | None = Field(
        None, description="Knowledge base for every Slack workspace (default: the team id)."
    )
    stream: Literal["panel", "all", "off"] = Field(
        "panel",
        description="Where answers stream natively: the assistant panel, every thread, or "
        "nowhere (a placeholder that is edited, as when Slack refuses a stream).",
    )
    channel_kbs: ChannelKbs = Field(
        default_factory=dict,
        description="CHANNEL:KB pairs: questions asked in (or beside) a channel use its KB.",
    )
    admins: CsvStrs = Field(
        default_factory=list,
        description="User ids who may add files in chat and /forget sources (empty: nobody).",
    )


def events_path(own: SlackSettings) -> str | None:
    """Where Slack's HTTP events arrive on ``quorum serve``'s port: ``/slack/events``, unless
    Socket Mode (SLACK_APP_TOKEN) or a port of their own (QUORUM_SLACK_PORT) takes them."""
    return EVENTS_PATH if own.app_token is None and own.port is None else None


def slack_settings(settings: Settings) -> SlackSettings:
    """Slack's settings within ``settings``."""
    return settings.platform(SlackSettings)
