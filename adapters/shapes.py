"""The JSON shapes of search hits and answers, one for ``quorum search/ask --json`` and the
HTTP API alike: links, seconds and pages as the user would open them."""

from __future__ import annotations

from typing import Any

from bot.cite.citations import citation_json, source_json
from bot.holdings import Held
from bot.models import Answer
from retrieval.models import Hit


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
    s = held.info.source
    return {
        "id": s.id,
        "title": s.title,
        "kind": s.kind,
        "url": s.url,
        "recorded_at": s.recorded_at.isoformat() if s.recorded_at else None,
        "speakers": list(s.speakers),
        "segments": held.info.segments,
        **held.json(),
    }
