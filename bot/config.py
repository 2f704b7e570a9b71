"""Quorum's settings: one typed object, loaded once from ``QUORUM_*`` environment
variables and ``.env`` (secrets from their usual names: ``ANTHROPIC_API_KEY``,
``SLACK_BOT_TOKEN``, ...). A bad value fails at start naming its variable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from platformdirs import user_data_dir
from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from retrieval.errors import ConfigError

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_FAST_MODEL = "claude-haiku-5-5"


class Settings(BaseSettings):
    """Every knob Quorum has. Field docs are the reference for README's configuration table."""

    model_config = SettingsConfigDict(
        env_prefix="QUORUM_", env_file=".env", extra="ignore", populate_by_name=True
    )

    # --- storage
    data_dir: Path = Field(
        default_factory=lambda: Path(user_data_dir("quorum")),
        description="Where Quorum keeps its data (embedded Weaviate, the SQLite session store).",
    )
    database_url: SecretStr | None = Field(
        None,
        description="postgresql://user:password@host:5432/db: sessions, feedback and event "
        "claims in PostgreSQL, shared by replicas. Unset: SQLite in QUORUM_DATA_DIR.",
    )
    default_kb: str = Field("default", description="Knowledge base used when none is given.")

    # --- Weaviate
    weaviate_mode: Literal["embedded", "local", "cloud"] = Field(
        "embedded", description="embedded: Quorum runs weaviate-server; local/cloud: by URL."
    )
    weaviate_url: str | None = Field(None, description="Weaviate URL for local/cloud mode.")
    weaviate_grpc_port: int | None = Field(
        None, description="gRPC port (default 50051, 443 for https)."
    )
    weaviate_api_key: SecretStr | None = Field(None, description="API key for Weaviate Cloud.")
    weaviate_binary: str | None = Field(None, description="Path of weaviate-server to run.")
    weaviate_timeout_s: float = Field(30.0, gt=0, description="Timeout of one Weaviate query.")
    weaviate_replicas: int = Field(
        1,
        ge=1,
        le=64,
        description="Copies of each object in a Weaviate cluster (replication factor): 3 keeps "
        "answering with one node down. Reads and writes then use QUORUM consistency.",
    )

    # --- embedding, search, chunking
    embed_model_path: Path | None = Field(
        None, description="Folder of a sentence-transformers model (default: packaged MiniLM)."
    )
    embed_batch_size: int = Field(64, ge=1, le=1024, description="Texts per encode batch.")
    embed_backend: Literal["onnx", "torch"] = Field(
        "onnx",
        description="onnx: ONNX Runtime on the export `make install` made (starts fast); "
        "torch: sentence-transformers on torch. onnx falls back to torch when it cannot run.",
    )
    embed_onnx_path: Path | None = Field(
        None, description="ONNX export of the embedding model (default: the installed one)."
    )
    rerank_model_path: Path | None = Field(
        None, description="Folder of a cross-encoder model: rerank hits with it (off by default)."
    )
    whisper_model: str | None = Field(
        None,
        description="Whisper model for audio and video: a local CTranslate2 model folder, or "
        "a faster-whisper model name (small.en, ...) where the machine may download it "
        "(default: the packaged tiny.en).",
    )
    hybrid_alpha: float = Field(
        0.5, ge=0.0, le=1.0, description="0 = keyword (BM25) only, 1 = vector only."
    )
    chunk_seconds: float = Field(60.0, gt=0, description="Length of a transcript window.")
    chunk_overlap_seconds: float = Field(10.0, ge=0, description="Overlap of transcript windows.")
    chunk_chars: int = Field(1200, ge=200, description="Length of a document window.")
    chunk_overlap_chars: int = Field(150, ge=0, description="Overlap of document windows.")

    # --- answers (Claude)
    anthropic_api_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("ANTHROPIC_API_KEY", "QUORUM_ANTHROPIC_API_KEY"),
        description="Claude API key; without it answers are extractive (quoted passages).",
    )
    anthropic_base_url: str | None = Field(
        None,
        validation_alias=AliasChoices("ANTHROPIC_BASE_URL", "QUORUM_ANTHROPIC_BASE_URL"),
        description="Messages API base URL (an emulator in tests).",
    )
    model: str = Field(DEFAULT_MODEL, description="Claude model that writes answers.")
    fast_model: str = Field(DEFAULT_FAST_MODEL, description="Cheaper model for query rewriting.")
    expand_queries: bool = Field(
        False, description="With a key: the fast model rephrases hard questions (results fused)."
    )
    claude_rerank: bool = Field(
        False, description="With a key: the fast model reorders the top 20 hits (costs a call)."
    )
    llm_timeout_s: float = Field(60.0, gt=0, description="Timeout of one Claude request.")
    llm_max_retries: int = Field(2, ge=0, le=10, description="Retries on 429/5xx/overloaded.")
    answer_max_tokens: int = Field(1200, ge=64, description="Longest answer, in tokens.")
    context_token_budget: int = Field(6000, ge=500, description="Tokens of sources per answer.")
    history_turns: int = Field(5, ge=0, le=50, description="Exchanges of thread history kept.")
    search_k: int = Field(8, ge=1, le=50, description="Hits fetched per quick answer.")
    max_question_chars: int = Field(4000, ge=10, description="Longest accepted question.")

    # --- deep research
    research_mode: Literal["quick", "deep", "auto"] = Field(
        "quick", description="Default mode: quick, deep, or auto (hard questions go deep)."
    )
    research_max_iterations: int = Field(8, ge=1, le=30, description="Tool-use turns at most.")
    research_token_budget: int = Field(60000, ge=1000, description="Input+output tokens at most.")
    research_time_budget_s: float = Field(120.0, gt=0, description="Wall-clock budget.")

    # --- Slack
    slack_bot_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_BOT_TOKEN", "QUORUM_SLACK_BOT_TOKEN")
    )
    slack_app_token: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("SLACK_APP_TOKEN", "QUORUM_SLACK_APP_TOKEN"),
        description="xapp- token: Socket Mode. Without it, HTTP events.",
    )
    slack_signing_secret: SecretStr | None = Field(
        None, validation_alias=AliasChoices("SLACK_SIGNING_SECRET", "QUORUM_SLACK_SIGNING_SECRET")
    )
    slack_api_url: str = Field("https://slack.com/api/", description="Slack Web API base URL.")
    slack_port: int = Field(3000, ge=1, le=65535, description="HTTP events port.")
    slack_channels: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Allowed channel ids (empty: every channel)."
    )
    slack_kb: str | None = Field(
        None, description="Knowledge base for every Slack workspace (default: the team id)."
    )
    slack_admins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="User ids who may add files in chat and /forget sources (empty: nobody).",
    )

    # --- Discord
    discord_token: SecretStr | None = Field(
        None, validation_alias=AliasChoices("DISCORD_TOKEN", "QUORUM_DISCORD_TOKEN")
    )
    discord_api_url: str | None = Field(None, description="Discord REST API base URL.")
    discord_guild_id: int | None = Field(None, description="Guild to sync commands to (fast).")
    discord_guilds: Annotated[list[int], NoDecode] = Field(
        default_factory=list, description="Allowed guild ids (empty: every guild)."
    )
    discord_channels: Annotated[list[int], NoDecode] = Field(
        default_factory=list, description="Allowed channel ids (empty: every channel)."
    )
    discord_kb: str | None = Field(
        None, description="Knowledge base for every Discord guild (default: the guild id)."
    )
    discord_admin_role: str | None = Field(
        None,
        description="Role (id or name) whose members may add and forget sources; members "
        "with the Manage Server permission always may.",
    )

    # --- running (quorum serve)
    http_host: str = Field("0.0.0.0", description="Address of the ops and API HTTP server.")
    http_port: int = Field(
        8088, ge=0, le=65535, description="Port of /healthz, /readyz, /metrics and /api."
    )
    shutdown_s: float = Field(
        20.0, gt=0, description="SIGTERM/SIGINT: seconds to finish answers and exit."
    )
    public_url: str | None = Field(
        None,
        description="Where people reach this server's pages (the address in every link to a "
        "recording or document page). Unset: http://localhost:<QUORUM_HTTP_PORT>.",
    )
    link_secret: SecretStr | None = Field(
        None,
        description="Signs page links (at least 16 characters; set the same on every "
        "replica). Unset: a random secret kept in QUORUM_DATA_DIR/link-secret. Changing it "
        "revokes every link.",
    )
    link_ttl_days: float = Field(
        30.0, gt=0, le=3650, description="How many days a page link works after its answer."
    )
    keep_media: bool = Field(
        False,
        description="Keep a copy of each recording `quorum ingest` reads in QUORUM_DATA_DIR/"
        "media, so its page plays after the original file moves. Unset: served from where it "
        "was ingested while it is there.",
    )
    api_tokens: SecretStr | None = Field(
        None, description="JSON API bearer tokens, token:kb pairs: tok1:kb1,tok2:kb2."
    )

    post_summaries: str | None = Field(
        None,
        description="Post each newly ingested recording's summary here: slack:CHANNEL or "
        "discord:CHANNEL_ID, comma-separated for several.",
    )

    # --- chat uploads
    upload_max_mb: int = Field(
        200, ge=1, description="Largest file accepted from a chat upload, in megabytes."
    )

    @field_validator(
        "slack_channels", "slack_admins", "discord_guilds", "discord_channels", mode="before"
    )
    @classmethod
    def _split_csv(cls, value: object) -> object:
        if isinstance(value, str):
            return [v.strip() for v in value.split(",") if v.strip()]
        if isinstance(value, int):
            return [value]
        return value

    @field_validator("link_secret")
    @classmethod
    def _long_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters long")
        return value

    @field_validator("public_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return value

    @property
    def page_url(self) -> str:
        """The public address of the pages: QUORUM_PUBLIC_URL or localhost's port."""
        return (self.public_url or f"http://localhost:{self.http_port}").rstrip("/")

    @property
    def media_dir(self) -> Path:
        """Recordings kept for their pages (``QUORUM_KEEP_MEDIA``, the demo's audio)."""
        return self.data_dir / "media"

    @property
    def sessions_path(self) -> Path:
        """The SQLite session store."""
        return self.data_dir / "sessions.sqlite3"


def _var_name(loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else "?"
    info = Settings.model_fields.get(field)
    alias = info.validation_alias if info else None
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"QUORUM_{field.upper()}"


def load_settings(**overrides: object) -> Settings:
    """Load settings, turning validation errors into one ConfigError naming the variable."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"{_var_name(first['loc'])}: {first['msg']}.") from exc
