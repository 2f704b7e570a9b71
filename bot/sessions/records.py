"""What the session store keeps: exchanges as history, everything stored about an answer,
the query log's records, and an exchange as insights reads it (``LoggedAnswer``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from bot.models import Actor

EVENT_TTL_S = 24 * 3600.0
"""How long a processed event id is remembered."""

HISTORY_KINDS = ("answer", "extractive", "nothing_found")


@dataclass(frozen=True)
class Exchange:
    """One question and its answer in a thread, as history."""

    id: int
    question: str
    standalone_query: str | None
    answer: str
    kind: str
    mode: str
    created_at: float


@dataclass(frozen=True)
class ExchangeRecord:
    """Everything stored about one answered question."""

    user: str
    question: str
    answer: str
    kind: str
    mode: str
    standalone_query: str | None = None
    sources: Sequence[dict[str, Any]] = ()
    citations: Sequence[dict[str, Any]] = ()
    timings: dict[str, float] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    research_trace: Any = None
    kb: str | None = None
    asked_at: float | None = None  # when the question came: a removal since then scrubs it

    def row(self, session_id: int, created_at: float) -> tuple[Any, ...]:
        """The values of an ``exchanges`` row, in ``EXCHANGE_COLUMNS`` order."""
        return (
            session_id,
            self.user,
            self.question,
            self.standalone_query,
            self.answer,
            self.kind,
            self.mode,
            as_json(list(self.sources)),
            as_json(list(self.citations)),
            as_json(self.timings),
            self.input_tokens,
            self.output_tokens,
            None if self.research_trace is None else as_json(self.research_trace),
            created_at,
            self.kb,
        )


# "user" is quoted: PostgreSQL reserves the word, SQLite reads the quotes the same way.
EXCHANGE_COLUMNS = (
    'session_id, "user", question, standalone_query, answer, kind, mode, sources_json,'
    " citations_json, timings_json, input_tokens, output_tokens, research_trace_json,"
    " created_at, kb"
)


@dataclass(frozen=True)
class QueryRecord:
    """One search, for the query log."""

    kb: str
    query: str
    filters: dict[str, Any]
    hit_ids: Sequence[str]
    retrieval_ms: float


AuditAction = Literal["added", "updated", "removed", "expired", "speakers"]


@dataclass(frozen=True)
class AuditEntry:
    """One line of the audit trail: ``action`` on a source of ``kb`` by ``actor``."""

    action: AuditAction
    kb: str
    source_id: str
    actor: Actor
    title: str = ""
    detail: str = ""
    at: float = 0.0  # set by the store when 0


OUTCOMES = ("answered", "extractive", "nothing_found", "error")
"""How a question ended, as insights counts it (a greeting or help is "answered")."""

LOW_SUPPORT = 0.35
"""A cited answer whose best citation's support is below this leaned on a weak passage."""


@dataclass(frozen=True)
class LoggedAnswer:
    """One stored question and its answer, as insights reads it."""

    id: int
    created_at: float
    platform: str
    kb: str
    user: str
    question: str
    answer: str
    kind: str
    mode: str
    citations: Sequence[dict[str, Any]] = ()
    sources: Sequence[dict[str, Any]] = ()
    total_ms: float | None = None
    up: int = 0
    down: int = 0

    @property
    def outcome(self) -> str:
        """One of ``OUTCOMES``."""
        if self.kind in ("nothing_found", "error", "extractive"):
            return self.kind
        return "answered"

    @property
    def support(self) -> float | None:
        """The best citation's support, None when nothing was cited or measured."""
        values = [c["support"] for c in self.citations if isinstance(c.get("support"), int | float)]
        return max(values) if values else None

    @property
    def shortfall(self) -> str | None:
        """Why this question counts as one the archive fell short on, or None:
        "unanswered" (nothing found), "disliked" (more 👎 than 👍) or "low support"."""
        if self.kind == "nothing_found":
            return "unanswered"
        if self.down > self.up:
            return "disliked"
        support = self.support
        if self.kind in ("answer", "extractive") and support is not None and support < LOW_SUPPORT:
            return "low support"
        return None

    def cited_sources(self) -> list[dict[str, Any]]:
        """The numbered sources its citations point at, each once, in citation order."""
        by_n = {s.get("n"): s for s in self.sources}
        seen: list[dict[str, Any]] = []
        for c in self.citations:
            s = by_n.get(c.get("source_n", c.get("n")))
            if s is not None and s not in seen:
                seen.append(s)
        return seen


def without_quotes(record: ExchangeRecord) -> ExchangeRecord:
    """``record`` keeping the question but none of the answer's words: no answer text, no
    citation quotes, no research trace (``QUORUM_KEEP_ANSWERS=false``)."""
    return replace(
        record,
        answer="",
        citations=[{k: v for k, v in c.items() if k != "quote"} for c in record.citations],
        research_trace=None,
    )


def forgotten(record: ExchangeRecord) -> ExchangeRecord:
    """``record`` without anything a removed source gave it: its question alone."""
    return replace(
        record,
        answer="",
        standalone_query=None,
        sources=[],
        citations=[],
        research_trace=None,
    )


def as_json(value: Any) -> str:
    """Compact JSON for a column (dates and other objects as strings)."""
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def clip(text: str, limit: int) -> str:
    """``text`` if it fits ``limit``, else its start and how long it was: a rejected
    over-long question is recorded, not stored in full."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... [{len(text):,} characters, cut to {limit:,}]"
