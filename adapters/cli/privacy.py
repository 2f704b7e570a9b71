"""``quorum audit`` (who added, updated and removed which source, when, from where) and
``quorum retention`` (what the ``QUORUM_RETAIN_*`` settings delete: a dry run by default,
``--apply`` to delete)."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.table import Table

from adapters.cli.app import JsonOpt, app, fail, out, run
from adapters.cli.terminal import plain
from bot.config import Settings
from bot.errors import ConfigError
from bot.retention import Plan, plan
from bot.sessions import AuditEntry
from bot.wiring import open_holdings, open_session_store, retain


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds")


@app.command("audit")
def audit_cmd(
    kb: Annotated[str | None, typer.Option(help="Only this knowledge base.")] = None,
    source: Annotated[str | None, typer.Option(help="Only this source id.")] = None,
    limit: Annotated[int, typer.Option(help="How many entries, newest first.")] = 100,
    as_json: JsonOpt = False,
) -> None:
    """Who added, updated and removed which source (and renamed its speakers), when and
    from where (kept after the sources themselves are gone)."""
    if limit < 1:
        raise fail(f"--limit must be at least 1, not {limit}.")

    async def go(settings: Settings) -> list[AuditEntry]:
        async with open_session_store(settings) as sessions:
            return await sessions.audit(kb, source, limit)

    entries = run(go)
    if as_json:
        rows = [
            {
                "at": _when(e.at),
                "action": e.action,
                "kb": e.kb,
                "source_id": e.source_id,
                "title": e.title,
                "via": e.actor.via,
                "by": e.actor.who,
                "detail": e.detail,
            }
            for e in entries
        ]
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    if not entries:
        out.print("The audit trail is empty.")
        return
    table = Table()
    for col in ("when (UTC)", "action", "kb", "source", "title", "by", "detail"):
        table.add_column(col)
    for e in entries:
        table.add_row(
            _when(e.at),
            e.action,
            plain(e.kb),
            plain(e.source_id),
            plain(e.title),
            plain(str(e.actor)),
            plain(e.detail),
        )
    out.print(table)


@app.command("retention")
def retention_cmd(
    apply: Annotated[
        bool, typer.Option("--apply/--dry-run", help="Delete, or only say what would go.")
    ] = False,
) -> None:
    """Apply QUORUM_RETAIN_SOURCES_DAYS, _TRANSCRIPTS_DAYS, _QUERIES_DAYS and
    QUORUM_MEDIA_RETAIN_DAYS: say what has outlived its days (--dry-run, the default) or
    delete it (--apply)."""

    async def go(settings: Settings) -> Plan:
        days = retain(settings)
        if not days.any:
            raise ConfigError(
                "No retention is set: set QUORUM_RETAIN_SOURCES_DAYS, "
                "QUORUM_RETAIN_TRANSCRIPTS_DAYS, QUORUM_RETAIN_QUERIES_DAYS or "
                "QUORUM_MEDIA_RETAIN_DAYS."
            )
        async with open_holdings(settings, one_shot=True) as holdings:
            return await plan(holdings, days, apply)

    for line in run(go).lines():
        out.print(plain(line))
