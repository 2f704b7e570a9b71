"""What the session store does for privacy, in the same SQL on both databases: the audit
trail (who added, updated and removed which source, kept beyond the sources), the expiry
of old questions and searches (``QUORUM_RETAIN_QUERIES_DAYS``), and the scrubbing of
stored answers that quoted a source when that source is forgotten."""

from __future__ import annotations

import json
import time

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


async def scrub_answers(db: Connection, kb: str, source_id: str) -> int:
    """Stored answers of ``kb`` that cited ``source_id`` keep their question but lose every
    word taken from the source: the answer, its sources, citations and research trace.
    Another knowledge base's source of the same id is another recording: its answers stay.
    An exchange stored before exchanges recorded their knowledge base is scrubbed."""
    named = json.dumps(source_id, ensure_ascii=False)
    return await db.execute(
        "UPDATE exchanges SET answer = '', sources_json = '[]', citations_json = '[]',"
        " research_trace_json = NULL WHERE (kb = ? OR kb IS NULL)"
        " AND (sources_json LIKE ? ESCAPE '\\' OR research_trace_json LIKE ? ESCAPE '\\')",
        kb,
        _like(f'"source_id":{named}'),
        _like(named),
    )
