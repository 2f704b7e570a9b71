"""What was asked of one knowledge base, as insights reads it: each exchange in a time
range with its thread's platform and its 👍/👎 counted, in the same SQL on both
databases."""

from __future__ import annotations

import json
from typing import Any

from bot.sessions.driver import Connection, Row
from bot.sessions.records import LoggedAnswer

_ASKED = """
SELECT e.id, e.created_at, s.platform, e.kb, e."user", e.question, e.answer, e.kind, e.mode,
       e.citations_json, e.sources_json, e.timings_json,
       SUM(CASE WHEN f.value > 0 THEN 1 ELSE 0 END) AS up,
       SUM(CASE WHEN f.value < 0 THEN 1 ELSE 0 END) AS down
FROM exchanges e
JOIN sessions s ON s.id = e.session_id
LEFT JOIN feedback f ON f.exchange_id = e.id
WHERE e.kb = ? AND e.created_at >= ? AND e.created_at < ?
GROUP BY e.id, s.platform
ORDER BY e.created_at, e.id
LIMIT ?
"""


def _json(raw: Any, empty: Any) -> Any:
    try:
        return empty if raw is None else json.loads(raw)
    except ValueError:  # a damaged row is read as empty, not a failed page
        return empty


def _logged(row: Row) -> LoggedAnswer:
    timings = _json(row["timings_json"], {})
    total = timings.get("total") if isinstance(timings, dict) else None
    return LoggedAnswer(
        id=int(row["id"]),
        created_at=float(row["created_at"]),
        platform=str(row["platform"]),
        kb=str(row["kb"]),
        user=str(row["user"]),
        question=str(row["question"]),
        answer=str(row["answer"]),
        kind=str(row["kind"]),
        mode=str(row["mode"]),
        citations=_json(row["citations_json"], []),
        sources=_json(row["sources_json"], []),
        total_ms=float(total) if isinstance(total, int | float) else None,
        up=int(row["up"] or 0),
        down=int(row["down"] or 0),
    )


async def asked(
    db: Connection, kb: str, since: float, until: float, limit: int
) -> list[LoggedAnswer]:
    """The exchanges of ``kb`` made in ``[since, until)``, oldest first, at most ``limit``."""
    rows = await db.fetch(_ASKED, kb, since, until, limit)
    return [_logged(row) for row in rows]
