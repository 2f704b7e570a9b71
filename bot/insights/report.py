"""What a knowledge base's people asked and how Quorum did, from the stored exchanges:
questions per day and platform, outcomes, 👍/👎, answer time, the sources and moments
cited most, deep research, and the answers people disliked. Pure arithmetic over
``LoggedAnswer`` rows; the session store reads them, ``bot.insights.gaps`` groups the
questions the archive fell short on."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.sessions.records import OUTCOMES, LoggedAnswer


@dataclass(frozen=True)
class Moment:
    """The closest thing the archive has to a gap: a cited-to-be moment."""

    title: str
    source_id: str
    start_s: float | None
    page: int | None
    link: str | None
    text: str
    similarity: float | None


@dataclass
class Gap:
    """Questions about one thing that the archive did not answer well."""

    label: str
    count: int
    reasons: dict[str, int]
    examples: list[LoggedAnswer]
    nearest: list[Moment] = field(default_factory=list)


@dataclass(frozen=True)
class Cited:
    """A source or a moment and how many answers cited it."""

    title: str
    count: int
    source_id: str = ""
    start_s: float | None = None
    page: int | None = None
    link: str | None = None


@dataclass
class Report:
    """Insights for one knowledge base over ``[since, until)``."""

    kb: str
    since: float
    until: float
    questions: int = 0
    days: list[tuple[str, dict[str, int]]] = field(default_factory=list)
    outcomes: dict[str, int] = field(default_factory=dict)
    up: int = 0
    down: int = 0
    median_ms: float | None = None
    p95_ms: float | None = None
    top_sources: list[Cited] = field(default_factory=list)
    top_moments: list[Cited] = field(default_factory=list)
    research: list[LoggedAnswer] = field(default_factory=list)
    disliked: list[LoggedAnswer] = field(default_factory=list)
    platforms: list[str] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    rows: list[LoggedAnswer] = field(default_factory=list)
    built_at: float = field(default_factory=time.time)


def day_of(ts: float) -> str:
    """The UTC day of a timestamp, ``YYYY-MM-DD``."""
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by the nearest-rank rule; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def build(
    kb: str, since: float, until: float, rows: Iterable[LoggedAnswer], top: int = 10
) -> Report:
    """The report over ``rows`` (already one knowledge base's, within the range)."""
    report = Report(kb=kb, since=since, until=until)
    per_day: dict[str, Counter[str]] = {}
    outcomes: Counter[str] = Counter({o: 0 for o in OUTCOMES})
    sources: Counter[str] = Counter()
    moments: Counter[tuple[str, float | None, int | None]] = Counter()
    meta: dict[str, dict[str, Any]] = {}
    moment_links: dict[tuple[str, float | None, int | None], str | None] = {}
    times: list[float] = []
    platforms: set[str] = set()
    for row in rows:
        report.rows.append(row)
        report.questions += 1
        platforms.add(row.platform)
        per_day.setdefault(day_of(row.created_at), Counter())[row.platform] += 1
        outcomes[row.outcome] += 1
        report.up += row.up
        report.down += row.down
        if row.total_ms is not None and row.kind != "help":
            times.append(row.total_ms)
        if row.mode == "deep":
            report.research.append(row)
        if row.down > row.up:
            report.disliked.append(row)
        for s in row.cited_sources():
            sid = str(s.get("source_id") or s.get("title") or "")
            sources[sid] += 1
            meta.setdefault(sid, s)
        for c in row.citations:
            sid = _source_id(row, c)
            key = (sid, _round(c.get("start_s")), c.get("page"))
            moments[key] += 1
            moment_links.setdefault(key, c.get("link"))
            meta.setdefault(sid, {"title": c.get("title", sid), "source_id": sid})
    report.days = _fill_days(per_day, since, until)
    report.outcomes = dict(outcomes)
    report.median_ms = percentile(times, 0.5)
    report.p95_ms = percentile(times, 0.95)
    report.platforms = sorted(platforms)
    report.top_sources = [
        Cited(title=str(meta[sid].get("title") or sid), count=n, source_id=sid)
        for sid, n in sources.most_common(top)
    ]
    report.top_moments = [
        Cited(
            title=str(meta.get(sid, {}).get("title") or sid),
            count=n,
            source_id=sid,
            start_s=start,
            page=page,
            link=moment_links.get((sid, start, page)),
        )
        for (sid, start, page), n in moments.most_common(top)
    ]
    report.research.sort(key=lambda r: r.created_at, reverse=True)
    report.disliked.sort(key=lambda r: r.created_at, reverse=True)
    return report


def _source_id(row: LoggedAnswer, citation: dict[str, Any]) -> str:
    by_n = {s.get("n"): s for s in row.sources}
    s = by_n.get(citation.get("source_n", citation.get("n")))
    if s is not None and s.get("source_id"):
        return str(s["source_id"])
    return str(citation.get("title") or "")


def _round(value: Any) -> float | None:
    return round(float(value)) if isinstance(value, int | float) else None


def _fill_days(
    per_day: dict[str, Counter[str]], since: float, until: float
) -> list[tuple[str, dict[str, int]]]:
    """Every day of the range, the quiet ones too (a chart with gaps hides them); a
    range longer than a year keeps only the days with questions."""
    if not per_day:
        return []
    first = max(since, min(_day_start(d) for d in per_day))
    last = min(until, time.time())
    days: list[str] = []
    if last - first <= 366 * 86400:
        t = _day_start(day_of(first))
        while t <= last:
            days.append(day_of(t))
            t += 86400
    wanted = sorted(set(days) | set(per_day))
    return [(d, dict(per_day.get(d, Counter()))) for d in wanted]


def _day_start(day: str) -> float:
    return datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
