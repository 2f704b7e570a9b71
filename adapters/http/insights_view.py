"""The HTML of the insights page: the numbers an admin reads first, a chart of questions
per day by platform, how the answers ended, where the archive falls short (each gap with
its questions and the closest moments, linked to their pages), what was cited most, and
the answers people disliked. Server-rendered in the shared shell
(``adapters.http.shell``) with inline SVG charts and no script."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from html import escape
from urllib.parse import urlencode

from adapters.http.shell import csp, header, page
from bot.insights import Gap, Report
from bot.sessions.records import LoggedAnswer
from retrieval.links.links import format_timestamp

Href = Callable[[str, float | None, int | None], str | None]
"""A moment's link: (source id, second, page) -> a signed page URL."""

# The form posts the admin token to this origin; nothing else runs on the page.
CSP = csp(form_action="'self'")

PLATFORM_COLOURS = ("#4f46e5", "#0ea5e9", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6")
OUTCOME_COLOURS = {
    "answered": "#10b981",
    "extractive": "#0ea5e9",
    "nothing_found": "#f59e0b",
    "error": "#ef4444",
}
OUTCOME_NAMES = {
    "answered": "answered",
    "extractive": "quoted (no model)",
    "nothing_found": "nothing found",
    "error": "errors",
}
RANGES = (7, 30, 90, 365)


def login(error: str | None = None) -> str:
    """The form an admin opens insights with: the admin token, posted once, traded for a
    signed link (the token never rides in a URL)."""
    shown = f'<p class=err role="alert">{escape(error)}</p>' if error else ""
    about = "For the people who run Quorum: what your team asks and where the archive falls short."
    return page(
        "Insights",
        header("Quorum insights", about)
        + f'{shown}<form method=post action="/insights"><label for=token>Admin token '
        "(QUORUM_ADMIN_TOKENS)</label><input id=token name=token type=password required "
        "autocomplete=off autofocus><button type=submit>Open</button></form>",
        narrow=True,
    )


def _day(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def _ms(ms: float | None) -> str:
    return "–" if ms is None else f"{ms / 1000:.1f} s"


def _card(value: str, label: str) -> str:
    return f"<div class=card><b>{escape(value)}</b><span>{escape(label)}</span></div>"


def _link(href: str | None, text: str) -> str:
    if not href:
        return escape(text)
    return f'<a href="{escape(href)}" rel="noopener noreferrer">{escape(text)}</a>'


def _swatch(colour: str) -> str:
    """A legend's colour square (an SVG attribute, not an inline style the CSP refuses)."""
    return (
        f'<svg class=sw viewBox="0 0 10 10" aria-hidden="true">'
        f'<rect width="10" height="10" rx="2" fill="{colour}"/></svg>'
    )


def per_day_chart(report: Report) -> str:
    """Questions per day, one bar a day stacked by platform, as inline SVG."""
    days = report.days
    if not days:
        return "<p>No questions in this range.</p>"
    platforms = report.platforms
    colour = {p: PLATFORM_COLOURS[i % len(PLATFORM_COLOURS)] for i, p in enumerate(platforms)}
    top = max(sum(c.values()) for _, c in days) or 1
    width, height, left, bottom, top_pad = 720, 190, 32, 22, 12
    step = (width - left) / len(days)
    bar = max(1.0, step * 0.8)
    parts = [
        f'<svg viewBox="0 0 {width} {height}" role="img" aria-label="Questions per day, '
        f'{len(days)} days, at most {top} a day">'
    ]
    for frac in (0.0, 0.5, 1.0):
        y = (height - bottom - top_pad) * (1 - frac) + top_pad
        parts.append(
            f'<line x1="{left}" x2="{width}" y1="{y:.1f}" y2="{y:.1f}" stroke="#8884"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{round(top * frac)}</text>'
        )
    scale = (height - bottom - top_pad) / top
    label_every = max(1, len(days) // 8)
    for i, (day, counts) in enumerate(days):
        x = left + i * step + (step - bar) / 2
        y = height - bottom
        for p in platforms:
            n = counts.get(p, 0)
            if not n:
                continue
            h = n * scale
            y -= h
            parts.append(
                f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}" '
                f'fill="{colour[p]}"><title>{escape(day)}: {n} on {escape(p)}</title></rect>'
            )
        if i % label_every == 0:
            parts.append(
                f'<text x="{x + bar / 2:.1f}" y="{height - 6}" text-anchor="middle">'
                f"{escape(day[5:])}</text>"
            )
    parts.append("</svg>")
    legend = "".join(f"<span>{_swatch(colour[p])}{escape(p)}</span>" for p in platforms)
    return "".join(parts) + f'<div class=legend aria-hidden="true">{legend}</div>'


def outcome_chart(report: Report) -> str:
    """How the questions ended, one stacked bar with a legend."""
    total = sum(report.outcomes.values()) or 1
    parts = ['<svg viewBox="0 0 720 26" role="img" aria-label="How questions ended">']
    x = 0.0
    for key, n in report.outcomes.items():
        w = 720 * n / total
        if w:
            parts.append(
                f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="26" '
                f'fill="{OUTCOME_COLOURS.get(key, "#888")}"><title>{OUTCOME_NAMES.get(key, key)}'
                f": {n}</title></rect>"
            )
        x += w
    parts.append("</svg>")
    legend = "".join(
        f"<span>{_swatch(OUTCOME_COLOURS.get(k, '#888'))}"
        f"{escape(OUTCOME_NAMES.get(k, k))} {n} ({100 * n / total:.0f}%)</span>"
        for k, n in report.outcomes.items()
    )
    return "".join(parts) + f"<div class=legend>{legend}</div>"


def _asked(row: LoggedAnswer, users: bool, href: Href) -> str:
    """One question, its answer and citations behind a click."""
    who = f" · {escape(row.user)}" if users and row.user else ""
    votes = "".join(f", {n} {word}" for n, word in ((row.up, "liked"), (row.down, "disliked")) if n)
    cites = "".join(
        "<li>"
        + _link(
            href(_source_of(row, c), c.get("start_s"), c.get("page")),
            f"[{c.get('n')}] {c.get('title') or ''}" + _at(c.get("start_s"), c.get("page")),
        )
        + (f" <q>{escape(str(c['quote']))}</q>" if c.get("quote") else "")
        + "</li>"
        for c in row.citations
    )
    answer = escape(row.answer) if row.answer else "<em>(answer not kept)</em>"
    return (
        f"<details><summary>{escape(row.question)}<span class=meta> — {_day(row.created_at)}, "
        f"{escape(row.platform)}{who}{votes}</span></summary>"
        f"<p>{answer}</p>{'<ol>' + cites + '</ol>' if cites else ''}</details>"
    )


def _source_of(row: LoggedAnswer, citation: dict[str, object]) -> str:
    n = citation.get("source_n", citation.get("n"))
    for s in row.sources:
        if s.get("n") == n:
            return str(s.get("source_id") or "")
    return ""


def _at(start: object, page: object) -> str:
    if isinstance(start, int | float):
        return f" @ {format_timestamp(float(start))}"
    return f" p. {page}" if isinstance(page, int) else ""


def _gap(gap: Gap, users: bool, href: Href) -> str:
    why = ", ".join(f"{n} {k}" for k, n in gap.reasons.items())
    near = "".join(
        f"<p class=near>{_closeness(m.similarity)}: "
        + _link(href(m.source_id, m.start_s, m.page), f"{m.title}{_at(m.start_s, m.page)}")
        + f" <q>{escape(m.text[:220])}{'…' if len(m.text) > 220 else ''}</q></p>"
        for m in gap.nearest[:1]
    )
    asked = "".join(_asked(r, users, href) for r in gap.examples)
    times = "once" if gap.count == 1 else f"{gap.count} times"
    return (
        f"<section class=gap><h3>“{escape(gap.label)}” <span class=count>asked {times}</span>"
        f"</h3><p class=meta>{escape(why)}</p>"
        f"{near or '<p class=near>Nothing in the archive comes close.</p>'}{asked}</section>"
    )


CLOSE = 0.45
"""A nearest moment at least this alike (cosine) may answer the gap; below it, the moment
only shares a word or two with the questions."""


def _closeness(similarity: float | None) -> str:
    if similarity is None or similarity >= CLOSE:
        return "Closest moment"
    return "Nothing close; the nearest only touches it"


def report_page(
    report: Report,
    *,
    days: int | None,
    range_href: Callable[[int], str],
    href: Href,
    users: bool,
) -> str:
    """The insights page for one knowledge base and range."""
    o = report.outcomes
    nav = "".join(
        f"<strong>{d} days</strong>"
        if d == days
        else f'<a href="{escape(range_href(d))}">{d} days</a>'
        for d in RANGES
    )
    head = (
        f"<header><h1>Insights: {escape(report.kb)}</h1>"
        f"<p class=meta>{_day(report.since)} to {_day(report.until)} · built "
        f"{datetime.fromtimestamp(report.built_at, UTC):%H:%M} UTC</p>"
        f'<nav class=range aria-label="Range">{nav}</nav></header>'
    )
    cards = (
        "<div class=cards>"
        + _card(str(report.questions), "questions")
        + _card(str(o.get("answered", 0) + o.get("extractive", 0)), "answered")
        + _card(str(o.get("nothing_found", 0)), "nothing found")
        + _card(f"{report.up} / {report.down}", "liked / disliked")
        + _card(_ms(report.median_ms), "median answer time")
        + _card(_ms(report.p95_ms), "p95 answer time")
        + "</div>"
    )
    body = [head, "<main>", cards]
    if not report.questions:
        body.append("<p>No questions were asked of this knowledge base in this range.</p>")
    else:
        body += ["<h2>Questions per day</h2>", per_day_chart(report)]
        body += ["<h2>How they ended</h2>", outcome_chart(report)]
        body.append("<h2>Where the archive falls short</h2>")
        body += [_gap(g, users, href) for g in report.gaps] or [
            "<p>Every question found an answer people did not dislike.</p>"
        ]
        body.append(_cited(report, href))
        body += _listed("Disliked answers", report.disliked, users, href)
        body += _listed("Deep research", report.research, users, href)
    body.append("</main>")
    return page(f"Insights: {report.kb}", "".join(body), narrow=True)


def _cited(report: Report, href: Href) -> str:
    if not report.top_moments:
        return ""
    rows = "".join(
        f"<tr><td class=n>{c.count}</td><td>"
        + _link(href(c.source_id, c.start_s, c.page), f"{c.title}{_at(c.start_s, c.page)}")
        + "</td></tr>"
        for c in report.top_moments
    )
    sources = "".join(
        f"<tr><td class=n>{c.count}</td><td>"
        f"{_link(href(c.source_id, None, None), c.title)}</td></tr>"
        for c in report.top_sources
    )
    return (
        "<h2>Cited most</h2><table><thead><tr><th>times</th><th>moment</th></tr></thead>"
        f"<tbody>{rows}</tbody></table><h2>Sources that carry the load</h2><table><thead>"
        f"<tr><th>answers</th><th>source</th></tr></thead><tbody>{sources}</tbody></table>"
    )


def _listed(title: str, rows: Sequence[LoggedAnswer], users: bool, href: Href) -> list[str]:
    if not rows:
        return []
    shown = "".join(_asked(r, users, href) for r in rows[:50])
    more = f"<p class=meta>and {len(rows) - 50} more</p>" if len(rows) > 50 else ""
    return [f"<h2>{escape(title)} ({len(rows)})</h2>", shown, more]


def range_query(days: int) -> str:
    """The query string of a range link."""
    return "?" + urlencode({"days": days})
