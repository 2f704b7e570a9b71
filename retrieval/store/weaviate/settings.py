"""``WeaviateSettings``: Weaviate's own settings, ``QUORUM_WEAVIATE_*`` (read by
``bot.config.Settings.store_settings`` when ``QUORUM_STORE`` is ``weaviate``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from retrieval.store.base import StoreInfo
from retrieval.store.registry import StoreSettings

WeaviateMode = Literal["embedded", "local", "cloud"]

DATA_DIR_NAMES = ("weaviate-server", "weaviate")
"""What Weaviate keeps under the data dir: the server's state and data, or the embedded
client's data."""


class WeaviateSettings(StoreSettings):
    """Where Weaviate is: run by Quorum (embedded) or reached by URL (local, cloud)."""

    model_config = SettingsConfigDict(
        env_prefix="QUORUM_WEAVIATE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    mode: WeaviateMode = Field(
        "embedded", description="embedded: Quorum runs weaviate-server; local/cloud: by URL."
    )
    url: str | None = Field(None, description="Weaviate URL for local/cloud mode.")
    grpc_port: int | None = Field(None, description="gRPC port (default 50051, 443 for https).")
    api_key: SecretStr | None = Field(None, description="API key for Weaviate Cloud.")
    binary: str | None = Field(None, description="Path of weaviate-server to run.")
    timeout_s: float = Field(30.0, gt=0, description="Timeout of one Weaviate query.")
    replicas: int = Field(
        1,
        ge=1,
        le=64,
        description="Copies of each object in a Weaviate cluster (replication factor): 3 keeps "
        "answering with one node down. Reads and writes then use QUORUM consistency.",
    )

    def where(self, info: StoreInfo) -> str:
        """ "embedded", or the URL of the server reached."""
        return "embedded" if self.mode == "embedded" else info.url

    def fix(self) -> str:
        """The setting to look at when Weaviate cannot be opened."""
        if self.mode == "embedded":
            return "Run `make install` (it builds weaviate-server) or set QUORUM_WEAVIATE_BINARY."
        return "Check QUORUM_WEAVIATE_URL (and QUORUM_WEAVIATE_API_KEY) and that it runs."
