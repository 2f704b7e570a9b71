"""Quorum's error tree, as the core sees it. Every error a user can see is one of these::

    QuorumError
     ├── ConfigError        a setting is missing or invalid (names the variable)
     ├── InvalidInput       a bad argument or question (says what is wrong)
     ├── IngestError        a file could not be read (names the file and why)
     ├── SearchUnavailable  Weaviate cannot be reached or failed (names the URL)
     ├── LLMError           the model failed after retries, timed out, or refused the request
     ├── FetchError         a connector's download failed and is worth trying again (says why)
     └── DatabaseUnavailable  the session database is locked or unreachable for now (names it)

The first five live in ``retrieval.errors`` (retrieval never imports ``bot``) and are
re-exported here so the core and the adapters import one module. Vendor exceptions are
translated at their seam (the model SDKs' errors in ``bot/llm/claude.py`` and
``bot/llm/openai_compat.py``; a session database's lock or lost server in its driver,
``bot/sessions/sqlite.py`` and ``bot/sessions/postgres.py``), ``raise ... from exc``.
"""

from __future__ import annotations

from retrieval.errors import (
    ConfigError,
    IngestError,
    InvalidInput,
    QuorumError,
    SearchUnavailable,
)

__all__ = [
    "ConfigError",
    "DatabaseUnavailable",
    "FetchError",
    "IngestError",
    "InvalidInput",
    "LLMError",
    "QuorumError",
    "SearchUnavailable",
]


class LLMError(QuorumError):
    """The model could not answer: overloaded, rate-limited, failing, timed out or refused.

    ``retryable`` is True for trouble that passes (429, 5xx, 529, timeouts, connection
    errors) and False for a request the model's server rejects (400, 401, 403, 404).
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class FetchError(QuorumError):
    """A connector's download failed in a way that may pass (a cut connection, a stalled
    or slow server): one sentence, and the job is tried again. One that cannot pass is
    ``bot.write.Unfetchable``."""


class DatabaseUnavailable(QuorumError):
    """The session database cannot be used for now: another process holds its write lock
    past the busy timeout, or its server cannot be reached. One sentence naming the file or
    the server (never a password); nothing was written, so trying again is safe."""
