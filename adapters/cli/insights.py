"""``quorum insights``: what a knowledge base's people asked, how the answers did, and where
the archive falls short, in the terminal (tables), as JSON or as CSV (one row a question)."""

from __future__ import annotations

import csv
import json
import sys
from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from adapters.chat.options import parse_date
from adapters.cli.app import JsonOpt, KbOpt, app, err, fail, kb_name, out, run
from adapters.cli.terminal import plain
from adapters.shapes import asked_json, report_json
from bot.config import Settings
from bot.insights import Insights, Report, day_range
from bot.wiring import open_retrieval, open_session_store
from retrieval.errors import InvalidInput
from retrieval.links.links import format_timestamp

CSV_COLUMNS = (
    "at",
    "platform",
    "question",
    "outcome",
    "mode",
    "up",
    "down",
    "total_ms",
    "shortfall",
    "gap",
)


def range_of(days: int, since: str | None, until: str | None) -> tuple[float, float | None]:
    """``--since``/``--until`` (YYYY-MM-DD, UTC) or the last ``--days`` days."""
    if days < 1:
        raise InvalidInput(f"--days must be at least 1, not {days}.")
    first = parse_date(since, f"--since {since!r}")
    last = parse_date(until, f"--until {until!r}")
    return day_range(days, first, last, spell="--{}")


@app.command("insights")
def insights_cmd(
    kb: KbOpt = None,
    days: Annotated[int, typer.Option(help="The last N days (default 30).")] = 30,
    since: Annotated[str | None, typer.Option(help="From this day (YYYY-MM-DD, UTC).")] = None,
    until: Annotated[str | None, typer.Option(help="To this day, included.")] = None,
    gaps: Annotated[
        bool, typer.Option("--gaps/--no-gaps", help="Group what went unanswered.")
    ] = True,
    as_json: JsonOpt = False,
    as_csv: Annotated[
        bool, typer.Option("--csv", help="One CSV row per question instead of tables.")
    ] = False,
) -> None:
    """What people asked, how the answers did, and where the archive falls short: the
    unanswered, disliked and weakly supported questions grouped by meaning, each with the
    closest moments the archive has."""
    if as_json and as_csv:
        raise fail("Pick one of --json and --csv.")

    async def go(settings: Settings) -> tuple[Report, bool]:
        name = kb_name(settings, kb)
        start, end = range_of(days, since, until)
        async with (
            open_retrieval(settings, one_shot=True) as r,
            open_session_store(settings) as sessions,
        ):
            insights = Insights(sessions=sessions, embedder=r.embedder, archives=r.search.archive)
            with Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                console=err,
                transient=True,
                disable=not err.is_terminal,
            ) as bar:
                task = bar.add_task("reading the log", total=None)

                def progress(what: str, done: int, total: int) -> None:
                    bar.update(task, description=what, completed=done, total=total)

                report = await insights.report(name, start, end, gaps=gaps, progress=progress)
        return report, settings.insights_users

    report, users = run(go)
    if as_json:
        sys.stdout.write(json.dumps(report_json(report, users), indent=2) + "\n")
    elif as_csv:
        write_csv(report, users)
    else:
        show(report)


def write_csv(report: Report, users: bool) -> None:
    """Every question of the report's range, one row each (with its gap, if any)."""
    gap_of = {r.id: g.label for g in report.gaps for r in g.examples}
    columns = (*CSV_COLUMNS, "user") if users else CSV_COLUMNS
    writer = csv.DictWriter(sys.stdout, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    for row in report.rows:
        shaped = asked_json(row, users)
        shaped["gap"] = gap_of.get(row.id, "")
        writer.writerow({k: inert(v) for k, v in shaped.items()})


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def inert(value: object) -> object:
    """A text cell a spreadsheet would run as a formula, quoted so it opens as text (OWASP's
    CSV injection advice: a leading single quote); numbers and other text as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def show(report: Report) -> None:
    """The report as terminal tables."""
    if not report.questions:
        out.print(f"No questions were asked of {report.kb} in this range.")
        return
    o = report.outcomes
    head = Table(title=f"{report.kb}: {_day(report.since)} to {_day(report.until)}")
    for col in ("questions", "answered", "extractive", "nothing found", "errors", "👍", "👎"):
        head.add_column(col, justify="right")
    head.add_column("answer time p50 / p95", justify="right")
    head.add_row(
        str(report.questions),
        *(str(o.get(k, 0)) for k in ("answered", "extractive", "nothing_found", "error")),
        str(report.up),
        str(report.down),
        f"{_ms(report.median_ms)} / {_ms(report.p95_ms)}",
    )
    out.print(head)
    days = Table(title="Questions per day")
    days.add_column("day")
    for p in report.platforms:
        days.add_column(p, justify="right")
    for day, counts in report.days[-14:]:
        days.add_row(day, *(str(counts.get(p, 0)) for p in report.platforms))
    out.print(days)
    if report.gaps:
        gaps = Table(title="Where the archive falls short")
        for col in ("asked", "about", "why", "closest moment"):
            gaps.add_column(col)
        for g in report.gaps:
            near = g.nearest[0] if g.nearest else None
            where = "nothing close" if near is None else f"{near.title} @ {_at(near)}"
            why = ", ".join(f"{n} {k}" for k, n in g.reasons.items())
            gaps.add_row(
                str(g.count), plain(g.label), why, plain(where, near.link if near else None)
            )
        out.print(gaps)
    if report.top_moments:
        cited = Table(title="Cited most")
        for col in ("times", "moment"):
            cited.add_column(col)
        for c in report.top_moments:
            label = c.title if c.start_s is None and c.page is None else f"{c.title} @ {_at(c)}"
            cited.add_row(str(c.count), plain(label, c.link))
        out.print(cited)


def _at(m: object) -> str:
    start = getattr(m, "start_s", None)
    page = getattr(m, "page", None)
    if start is not None:
        return format_timestamp(float(start))
    return f"p. {page}" if page is not None else ""


def _ms(ms: float | None) -> str:
    return "–" if ms is None else f"{ms / 1000:.1f} s"


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")
