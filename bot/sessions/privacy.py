"""What the session store does for privacy, in the same SQL on both databases: the audit
trail (who added, updated and removed which source, kept beyond the sources), the expiry
of old questions and searches (``QUORUM_RETAIN_QUERIES_DAYS``), and the scrubbing of
stored answers that quoted a source when that source is forgotten."""

from __future__ import annotations

import json
import time
from typing import Any

from bot.models import Actor
from bot.sessions.driver import Connection, Row
from bot.sessions.records import AuditEntry

AUDIT_COLUMNS = "at, action, kb, source_id, title, via, actor, detail"


async def record(db: Connection, entry: AuditEntry) -> None:
    """Add ``entry`` to the audit trail (stamped now unless it says when)."""
    await db.execute(
        f"INSERT INTO audit ({AUDIT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        entry.at or time.time(),
        entry.action,
        entry.kb,
        entry.source_id,
        entry.title,
        entry.actor.via,
        entry.actor.who,
        entry.detail,
    )


def _entry(row: Row) -> AuditEntry:
    return AuditEntry(
        action=row["action"],
        kb=row["kb"],
        source_id=row["source_id"],
        actor=Actor(row["via"], row["actor"]),
        title=row["title"],
        detail=row["detail"],
        at=float(row["at"]),
    )


async def entries(
    db: Connection, kb: str | None = None, source_id: str | None = None, limit: int = 100
) -> list[AuditEntry]:
    """The latest ``limit`` audit entries (of one knowledge base, one source), newest first."""
    where, args = [], []
    for column, value in (("kb", kb), ("source_id", source_id)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    rows = await db.fetch(
        f"SELECT {AUDIT_COLUMNS} FROM audit{clause} ORDER BY at DESC, id DESC LIMIT ?",
        *args,
        limit,
    )
    return [_entry(row) for row in rows]


async def first_added(db: Connection, kb: str) -> dict[str, AuditEntry]:
    """Per source of ``kb``, the entry that added it since it was last removed."""
    rows = await db.fetch(f"SELECT {AUDIT_COLUMNS} FROM audit WHERE kb = ? ORDER BY at, id", kb)
    added: dict[str, AuditEntry] = {}
    for row in rows:
        if row["action"] == "added":
            added.setdefault(row["source_id"], _entry(row))
        elif row["action"] in ("removed", "expired"):
            added.pop(row["source_id"], None)
    return added


async def old_questions(db: Connection, before: float, apply: bool) -> dict[str, int]:
    """How many questions (with their answers and feedback) and searches were made before
    ``before``; deleted too when ``apply``."""
    counts = {}
    for table in ("exchanges", "query_log"):
        (row,) = await db.fetch(f"SELECT count(*) AS n FROM {table} WHERE created_at < ?", before)
        counts[table] = int(row["n"])
    if apply:
        await db.execute("DELETE FROM query_log WHERE created_at < ?", before)
        await db.execute("DELETE FROM exchanges WHERE created_at < ?", before)
        await db.execute(
            "DELETE FROM sessions WHERE updated_at < ? AND NOT EXISTS"
            " (SELECT 1 FROM exchanges WHERE exchanges.session_id = sessions.id)",
            before,
        )
    return {"questions": counts["exchanges"], "searches": counts["query_log"]}


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching itself anywhere (``\\`` escapes)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def cited_ids(sources: Any, trace: Any) -> set[str]:
    """The source ids an answer drew on, read from its structure: each numbered source's
    ``source_id`` and the ids its research steps named (``source_id``, ``source_ids``)."""
    ids: set[str] = set()
    for s in sources if isinstance(sources, list) else ():
        if isinstance(s, dict) and isinstance(s.get("source_id"), str):
            ids.add(s["source_id"])
    steps = trace.get("steps") if isinstance(trace, dict) else None
    for step in steps if isinstance(steps, list) else ():
        args = step.get("args") if isinstance(step, dict) else None
        if not isinstance(args, dict):
            continue
        if isinstance(args.get("source_id"), str):
            ids.add(args["source_id"])
        if isinstance(args.get("source_ids"), list):
            ids.update(i for i in args["source_ids"] if isinstance(i, str))
    return ids


def _loads(raw: str | None) -> Any:
    try:
        return None if raw is None else json.loads(raw)
    except ValueError:  # not ours to read: judged by the prefilter alone
        return None


SCRUBBED = (
    "answer = '', sources_json = '[]', citations_json = '[]', research_trace_json = NULL,"
    " standalone_query = NULL"
)
"""An exchange that loses every word taken from a source (its question stays)."""


async def scrub_answers(db: Connection, kb: str, source_id: str) -> int:
    """Stored answers of ``kb`` that cited ``source_id`` keep their question but lose
    every word taken from the source: the answer, its sources, citations, research trace
    and rewritten query. Later questions of the same thread lose their rewritten queries
    (a follow-up is rewritten from the answer before it), and the searches of both lose
    their text in the query log. Another knowledge base's source of the same id is
    another recording: its answers stay. An exchange stored before exchanges recorded
    their knowledge base is scrubbed.

    Matched on the stored structure, exactly: ``search`` is not ``search.md``'s tool
    name, ``Budget`` is not ``budget``. LIKE only narrows the rows read (it ignores case
    on SQLite, hence the exact check after it)."""
    named = _like(json.dumps(source_id, ensure_ascii=False))
    rows = await db.fetch(
        "SELECT id, session_id, sources_json, research_trace_json FROM exchanges"
        " WHERE (kb = ? OR kb IS NULL) AND (sources_json LIKE ? ESCAPE '\\'"
        " OR research_trace_json LIKE ? ESCAPE '\\')",
        kb,
        named,
        named,
    )
    hit = [
        r
        for r in rows
        if source_id in cited_ids(_loads(r["sources_json"]), _loads(r["research_trace_json"]))
    ]
    for r in hit:
        await db.execute(f"UPDATE exchanges SET {SCRUBBED} WHERE id = ?", r["id"])
        # What was asked after it in its thread was rewritten from its answer.
        await db.execute(
            "UPDATE exchanges SET standalone_query = NULL WHERE session_id = ? AND id > ?"
            " AND standalone_query IS NOT NULL",
            r["session_id"],
            r["id"],
        )
        await db.execute(
            "UPDATE query_log SET query = '' WHERE query <> '' AND exchange_id IN"
            " (SELECT id FROM exchanges WHERE session_id = ? AND id >= ?)",
            r["session_id"],
            r["id"],
        )
    return len(hit)


async def removed_since(
    db: Connection, kb: str | None, source_ids: set[str], since: float
) -> set[str]:
    """Which of ``source_ids`` were removed from ``kb`` (or expired) at or after ``since``."""
    if not source_ids or kb is None:
        return set()
    rows = await db.fetch(
        "SELECT DISTINCT source_id FROM audit WHERE kb = ? AND at >= ?"
        " AND action IN ('removed', 'expired')",
        kb,
        since,
    )
    return {r["source_id"] for r in rows} & source_ids


async def last_removal(db: Connection, kb: str) -> float:
    """When a source of ``kb`` was last removed or expired (0 when never)."""
    (row,) = await db.fetch(
        "SELECT max(at) AS at FROM audit WHERE kb = ? AND action IN ('removed', 'expired')", kb
    )
    return float(row["at"] or 0.0)
