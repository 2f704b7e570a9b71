"""Quorum's settings: one typed object, loaded once from ``QUORUM_*`` environment
variables and ``.env`` (secrets from their usual names: ``ANTHROPIC_API_KEY``, ...).
A bad value fails at start naming its variable.

A chat platform's own settings are a ``PlatformSettings`` model defined in its folder
(``adapters/<name>/settings.py``); ``Settings.platform`` loads one generically, from the
same environment and ``.env``, so the core lists no platform here. A store's are its
``StoreSettings`` (``retrieval/store/<name>/``), loaded the same way by
``Settings.store_settings`` for the store ``QUORUM_STORE`` names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast
from urllib.parse import urlsplit

from platformdirs import user_data_dir
from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from retrieval.errors import ConfigError
from retrieval.store import registry as stores
from retrieval.store.registry import StoreSettings

DEFAULT_MODEL = "claude-sonnet-5-5"
DEFAULT_FAST_MODEL = "claude-haiku-5-5"


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    if isinstance(value, int):
        return [value]
    return value


# A list read from one comma-separated variable: ``a,b,c``.
CsvStrs = Annotated[list[str], NoDecode, BeforeValidator(_split_csv)]
CsvInts = Annotated[list[int], NoDecode, BeforeValidator(_split_csv)]


class PlatformSettings(BaseSettings):
    """A chat platform's own settings, defined in its folder with its own ``env_prefix``
    (``QUORUM_<NAME>_``); loaded by ``Settings.platform``, never by the platform itself."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)


P = TypeVar("P", bound=PlatformSettings)
Part = TypeVar("Part", bound=BaseSettings)


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

    # --- privacy and retention (applied daily by `quorum serve`, or `quorum retention`)
    retain_sources_days: int | None = Field(
        None,
        ge=1,
        description="Forget each source this many days after it was added (unset: keep).",
    )
    retain_transcripts_days: int | None = Field(
        None,
        ge=1,
        description="Delete kept transcripts (the transcripts/ cache) older than this (unset: "
        "keep; a re-ingest of the same audio then transcribes it again).",
    )
    retain_queries_days: int | None = Field(
        None,
        ge=1,
        description="Delete questions, answers, feedback and searches older than this "
        "(unset: keep).",
    )
    keep_answers: bool = Field(
        True,
        description="false: store each question without its answer's words (no answer text, "
        "quotes or research trace).",
    )

    # --- the store (its own settings live in its package: ``store_settings``)
    store: str = Field(
        stores.names()[0],
        description="Where passages are kept: a store named in retrieval/store/registry.py "
        "(the first one unless set).",
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
    diarize: Literal["auto", "off"] = Field(
        "auto",
        description="auto: every recording Quorum transcribes gets speakers (Speaker 1, 2, "
        "...; CAM++ on ONNX Runtime), unless its transcript brings its own; off: none.",
    )
    speaker_onnx_path: Path | None = Field(
        None, description="ONNX export of the speaker model (default: the installed one)."
    )
    voices: bool = Field(
        False,
        description="on: keep each recording's speakers as voiceprints (biometric data) under "
        "the data dir, to recognise them in later recordings; removed with their source.",
    )
    hybrid_alpha: float = Field(
        0.5, ge=0.0, le=1.0, description="0 = keyword (BM25) only, 1 = vector only."
    )
    chunk_seconds: float = Field(60.0, gt=0, description="Length of a transcript window.")
    chunk_overlap_seconds: float = Field(10.0, ge=0, description="Overlap of transcript windows.")
    chunk_chars: int = Field(1200, ge=200, description="Length of a document window.")
    chunk_overlap_chars: int = Field(150, ge=0, description="Overlap of document windows.")

    # --- answers (the model: Claude, or any OpenAI-compatible server)
    llm: Literal["claude", "openai", "none"] | None = Field(
        None,
        description="Which model writes answers: claude, openai (an OpenAI-compatible server: "
        "Ollama, vLLM, llama.cpp, LM Studio) or none (extractive). Unset: claude when "
        "ANTHROPIC_API_KEY is set, openai when QUORUM_OPENAI_BASE_URL is.",
    )
    openai_base_url: str | None = Field(
        None,
        description="Chat Completions base URL of an OpenAI-compatible server, such as "
        "http://localhost:11434/v1 (Ollama) or http://localhost:8000/v1 (vLLM).",
    )
    openai_api_key: SecretStr | None = Field(
        None, description="The server's API key, if it wants one (local servers do not)."
    )
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
    model: str = Field(
        DEFAULT_MODEL,
        description="Model that writes answers (with QUORUM_LLM=openai: the name the server "
        "serves, such as qwen2.5:7b-instruct; required).",
    )
    fast_model: str = Field(
        DEFAULT_FAST_MODEL,
        description="Cheaper model for rewriting, expansion, rerank and summaries (with "
        "QUORUM_LLM=openai: defaults to QUORUM_MODEL).",
    )
    expand_queries: bool = Field(
        False, description="With a key: the fast model rephrases hard questions (results fused)."
    )
    model_rerank: bool = Field(
        False,
        description="With a model: its fast model reorders the top 20 hits (costs a call). "
        "QUORUM_CLAUDE_RERANK, its older name, still works.",
        validation_alias=AliasChoices("QUORUM_MODEL_RERANK", "QUORUM_CLAUDE_RERANK"),
    )
    llm_timeout_s: float = Field(
        60.0, gt=0, description="Deadline of one model request, retries included."
    )
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
    # --- ingest jobs (bot/jobs)
    serve_workers: int = Field(
        1,
        ge=0,
        le=32,
        description="Worker processes `quorum serve` runs for ingest jobs (a decoder's crash "
        "or out-of-memory kills a worker, never the bot). 0: none here; `quorum worker` runs "
        "them on other machines (PostgreSQL).",
    )
    job_timeout_s: float = Field(
        30.0,
        ge=2,
        description="A running job whose worker sent no heartbeat for this long is taken "
        "up again by another worker.",
    )
    job_attempts: int = Field(
        3, ge=1, le=20, description="Tries of one job (a dead worker or an outage) before it fails."
    )
    jobs_max_transcribing: int = Field(
        0,
        ge=0,
        description="Transcriptions running at once over every worker (0: one per worker); "
        "documents and removals never wait behind them.",
    )
    worker_memory_mb: int | None = Field(
        None,
        ge=64,
        description="A worker's address-space limit (RLIMIT_AS) in MB: a decoder that would "
        "exhaust the machine's memory kills that worker alone. Unset: no limit.",
    )
    media_max_mb: int | None = Field(
        None,
        ge=1,
        description="Largest the media store may grow, in megabytes: what pages play and "
        "offer (each ingested recording, or its AAC rendition, and each PDF or text document, "
        "kept in QUORUM_DATA_DIR/media at ingest). Past it the oldest kept files go first "
        "(their pages show the transcript only). Unset: no bound.",
    )
    media_retain_days: int | None = Field(
        None,
        ge=1,
        description="Days a kept recording or document stays in the media store (checked "
        "at ingest and by retention); its source stays searchable. Unset: while its source is.",
    )
    api_tokens: SecretStr | None = Field(
        None, description="JSON API bearer tokens, token:kb pairs: tok1:kb1,tok2:kb2."
    )
    admin_tokens: SecretStr | None = Field(
        None,
        description="Admin bearer tokens for insights (the page and GET /api/insights), "
        "token:kb pairs like QUORUM_API_TOKENS: each sees its own knowledge base only.",
    )
    insights_users: bool = Field(
        False,
        description="Show who asked in insights (off: counts and questions, no user ids).",
    )

    post_summaries: str | None = Field(
        None,
        description="Post each newly ingested recording's summary here: PLATFORM:CHANNEL "
        "(a chat platform's name and one of its channels), =KB after one for that knowledge "
        "base's recordings only, comma-separated for several.",
    )

    # --- chat uploads
    upload_max_mb: int = Field(
        200, ge=1, description="Largest file accepted from a chat upload, in megabytes."
    )

    # --- Zoom cloud recordings (POST /hooks/zoom; bot/connectors/zoom.py)
    zoom_secret_token: SecretStr | None = Field(
        None,
        description="The Secret Token of your Zoom app's event subscription: signs each "
        "webhook Zoom sends to POST /hooks/zoom. Unset: the endpoint is off.",
    )
    zoom_kb: str | None = Field(
        None, description="Knowledge base a Zoom recording goes to (unset: QUORUM_DEFAULT_KB)."
    )
    zoom_kbs: str | None = Field(
        None,
        description="Per-host knowledge bases, host-email:kb pairs: alice@example.com:eng,"
        "bob@example.com:sales; a host not listed goes to QUORUM_ZOOM_KB.",
    )
    zoom_follow_deletes: bool = Field(
        False,
        description="Forget a recording when it is deleted or trashed in Zoom "
        "(recording.deleted, recording.trashed). Off: Quorum keeps it.",
    )
    zoom_download_hosts: CsvStrs = Field(
        default_factory=lambda: ["zoom.us", "zoomgov.com"],
        description="Hosts (and their subdomains) a Zoom event's download URLs may name; "
        "an event naming any other is refused, even when signed.",
    )
    zoom_download_max_mb: int = Field(
        4096, ge=1, description="Largest Zoom recording file downloaded, in megabytes."
    )
    zoom_download_timeout_s: float = Field(
        3600.0, gt=0, description="Longest one Zoom download may take, in seconds."
    )
    zoom_download_stall_s: float = Field(
        60.0, gt=0, description="A Zoom download that sends nothing for this long is cut off."
    )

    # load_settings' overrides no field here takes: a platform's or a store's, under its prefix
    _overrides: dict[str, Any] = PrivateAttr(default_factory=dict)
    _parts: dict[type[BaseSettings], BaseSettings] = PrivateAttr(default_factory=dict)

    @property
    def llm_backend(self) -> Literal["claude", "openai"] | None:
        """The model backend in use (None: extractive answers); see ``check_llm``."""
        if self.llm == "none":
            return None
        if self.llm is not None:
            return self.llm
        if self.anthropic_api_key is not None and self.anthropic_api_key.get_secret_value():
            return "claude"
        return "openai" if self.openai_base_url else None

    @property
    def openai_fast_model(self) -> str:
        """The fast model on an OpenAI-compatible server: QUORUM_FAST_MODEL, or the answer
        model when it is unset."""
        return self.fast_model if "fast_model" in self.model_fields_set else self.model

    @field_validator("store")
    @classmethod
    def _registered_store(cls, value: str) -> str:
        if value not in stores.names():
            raise ValueError(f"must be one of {', '.join(stores.names())}")
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
        """What pages serve, kept at ingest (``retrieval.links.kept_media``), the demo's audio."""
        return self.data_dir / "media"

    @property
    def sessions_path(self) -> Path:
        """The SQLite session store."""
        return self.data_dir / "sessions.sqlite3"

    def platform(self, kind: type[P]) -> P:
        """A platform's settings (``part``)."""
        return self.part(kind)

    def store_settings(self) -> StoreSettings:
        """The settings of the store ``QUORUM_STORE`` names (``part``)."""
        return self.part(stores.kind(self.store).settings)

    def part(self, kind: type[Part]) -> Part:
        """A platform's or a store's settings, loaded once: the environment and ``.env``
        under its prefix, and ``load_settings``' overrides named with it (``<name>_kb=`` is
        ``kb`` of the model whose prefix is ``QUORUM_<NAME>_``). A bad value: a
        ConfigError."""
        if kind not in self._parts:
            prefix = _prefix(kind).removeprefix("QUORUM_").lower()
            mine = {
                k.removeprefix(prefix): v
                for k, v in self._overrides.items()
                if k.startswith(prefix)
            }
            self._parts[kind] = _validated(kind, mine)
        return cast(Part, self._parts[kind])


def _prefix(model: type[BaseSettings]) -> str:
    return str(model.model_config.get("env_prefix") or "")


def _var_name(model: type[BaseSettings], loc: tuple[int | str, ...]) -> str:
    field = str(loc[0]) if loc else "?"
    info = model.model_fields.get(field)
    alias = info.validation_alias if info else None
    if isinstance(alias, AliasChoices):
        return str(alias.choices[0])
    return f"{_prefix(model)}{field.upper()}"


M = TypeVar("M", bound=BaseSettings)


def _validated(model: type[M], values: dict[str, Any]) -> M:
    try:
        return model(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ConfigError(f"{_var_name(model, first['loc'])}: {first['msg']}.") from exc


def check_llm(settings: Settings) -> None:
    """A model setting that cannot work stops start-up with one line naming the variable."""
    has_key = settings.anthropic_api_key is not None and bool(
        settings.anthropic_api_key.get_secret_value()
    )
    base = settings.openai_base_url
    if settings.llm is None and has_key and base:
        raise ConfigError(
            "QUORUM_LLM: both ANTHROPIC_API_KEY and QUORUM_OPENAI_BASE_URL are set; "
            "set QUORUM_LLM=claude or QUORUM_LLM=openai."
        )
    if settings.llm == "claude" and not has_key:
        raise ConfigError("ANTHROPIC_API_KEY: QUORUM_LLM=claude needs a Claude API key.")
    if settings.llm_backend != "openai":
        return
    if not base:
        raise ConfigError(
            "QUORUM_OPENAI_BASE_URL: QUORUM_LLM=openai needs the server's URL, such as "
            "http://localhost:11434/v1 (Ollama)."
        )
    parts = urlsplit(base)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            "QUORUM_OPENAI_BASE_URL must look like http://host:11434/v1 (got a URL without "
            "http(s) and a host)."
        )
    if "model" not in settings.model_fields_set:
        raise ConfigError(
            "QUORUM_MODEL: name the model the server serves (such as qwen2.5:7b-instruct on "
            "Ollama); the default is a Claude model."
        )


def load_settings(**overrides: object) -> Settings:
    """Load settings, turning validation errors into one ConfigError naming the variable.
    Overrides that name no field of ``Settings`` are kept for ``Settings.part`` (a
    platform's or the store's: ``weaviate_url=`` is the Weaviate store's ``url``)."""
    settings = _validated(
        Settings, {k: v for k, v in overrides.items() if k in Settings.model_fields}
    )
    settings._overrides = {k: v for k, v in overrides.items() if k not in Settings.model_fields}
    check_llm(settings)
    settings.store_settings()  # the chosen store's settings fail at start too
    return settings
