"""What the session store keeps: exchanges as history, everything stored about an answer,
and the query log's records."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from bot.models import Actor

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
        )


# "user" is quoted: PostgreSQL reserves the word, SQLite reads the quotes the same way.
EXCHANGE_COLUMNS = (
    'session_id, "user", question, standalone_query, answer, kind, mode, sources_json,'
    " citations_json, timings_json, input_tokens, output_tokens, research_trace_json,"
    " created_at"
)


@dataclass(frozen=True)
class QueryRecord:
    """One search, for the query log."""

    kb: str
    query: str
    filters: dict[str, Any]
    hit_ids: Sequence[str]
    retrieval_ms: float


AuditAction = Literal["added", "updated", "removed", "expired"]


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


def without_quotes(record: ExchangeRecord) -> ExchangeRecord:
    """``record`` keeping the question but none of the answer's words: no answer text, no
    citation quotes, no research trace (``QUORUM_KEEP_ANSWERS=false``)."""
    return replace(
        record,
        answer="",
        citations=[{k: v for k, v in c.items() if k != "quote"} for c in record.citations],
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
