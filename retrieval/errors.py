"""Quorum's error tree. Every error a user can see is one of these::

    QuorumError
     ├── ConfigError        a setting is missing or invalid (names the variable)
     ├── InvalidInput       a bad argument or question (says what is wrong)
     ├── IngestError        a file could not be read (names the file and why)
     ├── SearchUnavailable  Weaviate cannot be reached or failed (names the URL)
     └── LLMError           Claude failed after retries (defined in bot.errors)

Vendor exceptions are translated at the seam (``raise SearchUnavailable(...) from exc``);
the message is one sentence a user can act on, the traceback goes to the log.
"""

from __future__ import annotations


class QuorumError(Exception):
    """Base of every error Quorum reports to a user."""


class ConfigError(QuorumError):
    """A setting is missing or invalid."""


class InvalidInput(QuorumError):
    """A user-supplied argument or question is not acceptable."""


class IngestError(QuorumError):
    """A source file could not be read or parsed."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class SearchUnavailable(QuorumError):
    """The search backend (Weaviate) cannot be reached or failed."""
