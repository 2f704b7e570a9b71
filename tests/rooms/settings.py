"""The rooms platform's settings: ``ROOMS_TOKEN`` and ``QUORUM_ROOMS_*``."""

from __future__ import annotations

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import SettingsConfigDict

from bot.config import CsvStrs, PlatformSettings


class RoomsSettings(PlatformSettings):
    """Everything Quorum needs to know to be in rooms."""

    model_config = SettingsConfigDict(env_prefix="QUORUM_ROOMS_")

    token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("ROOMS_TOKEN", "QUORUM_ROOMS_TOKEN")
    )
    rooms: CsvStrs = Field(default_factory=list, description="Allowed rooms (empty: every room).")
    kb: str | None = Field(None, description="Knowledge base (default: the workspace).")
    poll_s: float = Field(1.0, gt=0, description="Seconds between polls of the inbox.")
