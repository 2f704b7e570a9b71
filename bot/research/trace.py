"""The record of a research run: each tool call with its arguments and timings, each turn
of the loop, and ``TimedArchive``, which tells the archive's time from Quorum's own."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from bot.llm import Usage
from bot.models import Answer
from retrieval.archive import Archive
from retrieval.models import Hit, SearchFilters, SourceInfo

Stop = Literal["iterations", "tokens", "time", "error"]


@dataclass(frozen=True)
class TraceStep:
    """One tool call of a research run: what was asked, how long it took, what it gave."""

    turn: int
    tool: str
    args: dict[str, Any]
    ms: float
    archive_ms: float
    is_error: bool
    error: str | None
    passages: tuple[int, ...]


@dataclass(frozen=True)
class TurnTrace:
    """One turn of the loop: Claude's reply and the tool calls it asked for."""

    turn: int
    llm_ms: float
    tools_ms: float
    archive_ms: float
    total_ms: float
    input_tokens: int
    output_tokens: int
    stop_reason: str | None
    calls: int


@dataclass(frozen=True)
class ResearchResult:
    """The answer of a research run and how it got there."""

    answer: Answer
    trace: tuple[TraceStep, ...]
    turns: tuple[TurnTrace, ...] = ()
    usage: Usage = field(default_factory=Usage)
    stopped: Stop | None = None

    def to_json(self) -> dict[str, Any]:
        """The trace as JSON, for the session store (``ExchangeRecord.research_trace``)."""
        return {
            "version": 1,
            "stopped": self.stopped,
            "usage": asdict(self.usage),
            "steps": [{**asdict(s), "passages": list(s.passages)} for s in self.trace],
            "turns": [asdict(t) for t in self.turns],
        }


class TimedArchive:
    """An Archive that records when it was busy (to tell our time from the archive's)."""

    def __init__(self, inner: Archive, intervals: list[tuple[float, float]]) -> None:
        self._inner = inner
        self._intervals = intervals
        self.busy_ms = 0.0

    def _done(self, started: float) -> None:
        ended = time.perf_counter()
        self._intervals.append((started, ended))
        self.busy_ms += (ended - started) * 1000

    @property
    def kb(self) -> str:
        """The knowledge base of the wrapped archive."""
        return self._inner.kb

    async def search(
        self, query: str, filters: SearchFilters | None = None, k: int = 8
    ) -> list[Hit]:
        """Search, timed."""
        t = time.perf_counter()
        try:
            return await self._inner.search(query, filters, k)
        finally:
            self._done(t)

    async def neighbours(self, hit_id: str, before: int = 1, after: int = 1) -> list[Hit]:
        """Neighbours, timed."""
        t = time.perf_counter()
        try:
            return await self._inner.neighbours(hit_id, before, after)
        finally:
            self._done(t)

    async def transcript(
        self,
        source_id: str,
        start_s: float | None = None,
        end_s: float | None = None,
        offset: int = 0,
        limit: int = 200,
    ) -> list[Hit]:
        """A transcript page, timed."""
        t = time.perf_counter()
        try:
            return await self._inner.transcript(source_id, start_s, end_s, offset, limit)
        finally:
            self._done(t)

    async def sources(self) -> list[SourceInfo]:
        """Sources, timed."""
        t = time.perf_counter()
        try:
            return await self._inner.sources()
        finally:
            self._done(t)

    async def speakers(self) -> list[str]:
        """Speakers, timed."""
        t = time.perf_counter()
        try:
            return await self._inner.speakers()
        finally:
            self._done(t)


def union_ms(intervals: Sequence[tuple[float, float]], since: float = 0.0) -> float:
    """Milliseconds covered by the intervals that start at or after ``since``."""
    total, end = 0.0, since
    for a, b in sorted(i for i in intervals if i[0] >= since):
        if b > end:
            total += b - max(a, end)
            end = b
    return total * 1000
