"""The JSON shapes of search hits, answers, sources and insights, one for the commands'
``--json`` and the HTTP API alike: links, seconds and pages as the user would open them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from bot.cite.citations import citation_json, source_json
from bot.holdings import Held
from bot.insights import Cited, Report
from bot.models import Answer
from bot.sessions.records import LoggedAnswer
from retrieval.models import Hit, SourceInfo


def hit_json(hit: Hit) -> dict[str, Any]:
    """The JSON shape of a hit, as printed by ``quorum search --json``."""
    s = hit.source
    return {
        "id": hit.id,
        "text": hit.segment.text,
        "score": round(hit.score, 4),
        "speaker": hit.segment.speaker,
        "speakers": list(hit.segment.speakers),
        "start_s": hit.segment.start_s,
        "end_s": hit.segment.end_s,
        "page": hit.segment.page,
        "heading": hit.segment.heading,
        "lesson": hit.segment.lesson,
        "level": hit.segment.level,
        "link": hit.link,
        "view": hit.source.view,
        "source": {
            "id": s.id,
            "title": s.title,
            "url": s.url,
            "kind": s.kind,
            "recorded_at": s.recorded_at.isoformat() if s.recorded_at else None,
        },
    }


def answer_json(answer: Answer) -> dict[str, Any]:
    """The JSON shape of an Answer: text, kind, mode, citations (links, seconds), sources."""
    return {
        "text": answer.text,
        "kind": answer.kind,
        "mode": answer.mode,
        "note": answer.note,
        "standalone_query": answer.standalone_query,
        "exchange_id": answer.exchange_id,
        "timings": answer.timings,
        "citations": [citation_json(c) for c in answer.citations],
        "sources": [source_json(s) for s in answer.sources],
    }


def held_json(held: Held) -> dict[str, Any]:
    """A source as ``quorum sources --json`` and the API list it: what it is, its size, who
    added it and when, and whether Quorum keeps a copy of its media or its transcript."""
    return {**info_json(held.info), **held.json()}


def info_json(info: SourceInfo) -> dict[str, Any]:
    """A stored source as every listing shows it: what it is, when, who speaks, its size."""
    s = info.source
    return {
        "id": s.id,
        "title": s.title,
        "kind": s.kind,
        "url": s.url,
        "recorded_at": s.recorded_at.isoformat() if s.recorded_at else None,
        "speakers": list(s.speakers),
        "segments": info.segments,
    }


def asked_json(row: LoggedAnswer, users: bool) -> dict[str, Any]:
    """One logged question as insights show it; who asked only when ``users`` (the admin
    opted in with QUORUM_INSIGHTS_USERS)."""
    out: dict[str, Any] = {
        "id": row.id,
        "at": datetime.fromtimestamp(row.created_at, UTC).isoformat(timespec="seconds"),
        "platform": row.platform,
        "question": row.question,
        "outcome": row.outcome,
        "mode": row.mode,
        "up": row.up,
        "down": row.down,
        "total_ms": row.total_ms,
        "shortfall": row.shortfall,
        "answer": row.answer,
        "citations": [
            {k: c.get(k) for k in ("n", "title", "link", "start_s", "page", "quote", "support")}
            for c in row.citations
        ],
    }
    if users:
        out["user"] = row.user
    return out


def cited_json(c: Cited) -> dict[str, Any]:
    """A source or moment and how often answers cited it."""
    return {
        "title": c.title,
        "source_id": c.source_id,
        "start_s": c.start_s,
        "page": c.page,
        "link": c.link,
        "count": c.count,
    }


def report_json(report: Report, users: bool = False) -> dict[str, Any]:
    """Insights as ``quorum insights --json`` and ``GET /api/insights`` return them."""

    def when(ts: float) -> str:
        return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")

    return {
        "kb": report.kb,
        "since": when(report.since),
        "until": when(report.until),
        "built_at": when(report.built_at),
        "questions": report.questions,
        "outcomes": report.outcomes,
        "feedback": {"up": report.up, "down": report.down},
        "answer_ms": {"median": report.median_ms, "p95": report.p95_ms},
        "per_day": [{"day": day, **counts} for day, counts in report.days],
        "platforms": report.platforms,
        "top_sources": [cited_json(c) for c in report.top_sources],
        "top_moments": [cited_json(c) for c in report.top_moments],
        "gaps": [
            {
                "label": g.label,
                "count": g.count,
                "reasons": g.reasons,
                "examples": [asked_json(r, users) for r in g.examples],
                "nearest": [
                    {
                        "title": m.title,
                        "source_id": m.source_id,
                        "start_s": m.start_s,
                        "page": m.page,
                        "link": m.link,
                        "text": m.text,
                        "similarity": m.similarity,
                    }
                    for m in g.nearest
                ],
            }
            for g in report.gaps
        ],
        "research": [asked_json(r, users) for r in report.research[:50]],
        "disliked": [asked_json(r, users) for r in report.disliked[:50]],
    }
