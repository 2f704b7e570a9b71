"""Answers in a terminal (rich): the Markdown text with its ``[n]`` markers as links, a
sources list with clickable deep links, a note, and a timing line; and the JSON shape of
an Answer for ``quorum ask --json``."""

from __future__ import annotations

from rich.console import Console
from rich.markdown import Markdown
from rich.style import Style
from rich.table import Table
from rich.text import Text

from adapters.chat.view import link_markers, transcript_link
from bot.cite.citations import at_second
from bot.models import Answer, Citation
from retrieval.links.links import format_timestamp
from retrieval.models import Hit
from retrieval.write.summary import LABELS, read_lines

TIMING_ORDER = (
    "history",
    "rewrite",
    "search",
    "expand",
    "assemble",
    "llm",
    "extractive",
    "render",
    "store",
    "total",
)


def plain(text: str, url: str | None = None) -> Text:
    """Text from a file or a user, never read as Rich markup; a link when ``url`` is given."""
    return Text(text, style=Style(link=url)) if url else Text(text)


def failure_line(path: str, reason: str | None) -> Text:
    """``failed PATH: REASON`` for an ingest report, the path and reason as plain text."""
    return Text.assemble(("failed", "red"), f" {path}: {reason}")


def linked_markdown(text: str, citations: tuple[Citation, ...]) -> str:
    """``[2]`` -> ``[[2]](link)`` so terminals that support it make the marker clickable."""

    def one(n: int, c: Citation) -> str:
        return f"[\\[{n}\\]]({c.link})" if c.link else f"\\[{n}\\]"

    return link_markers(text, {c.n: c for c in citations}, one, "".join)


def timing_line(answer: Answer) -> str:
    """``quick · extractive · search 41 ms · ... · total 63 ms``."""
    parts = [answer.mode, answer.kind.replace("_", " ")]
    for key in TIMING_ORDER:
        if key in answer.timings:
            parts.append(f"{key} {answer.timings[key]:,.0f} ms")
    return " \u00b7 ".join(parts)


def render_answer(console: Console, answer: Answer, *, timings: bool = True) -> None:
    """Print an answer: text, note, the sources it cites with their links, timings."""
    if answer.kind == "error":
        console.print(Text(answer.text, style="bold red"))
    else:
        console.print(Markdown(linked_markdown(answer.text, answer.citations)))
    if answer.note:
        console.print(Text(answer.note, style="italic yellow"))
    cited = list(answer.citations)
    if cited:
        console.print()
        console.print(Text("Sources", style="bold"))
        for c in cited:
            line = Text(f"[{c.n}] ", style="cyan")
            line.append(c.label, style="bold")
            if c.speaker:
                line.append(f" \u00b7 {c.speaker}", style="dim")
            if c.link:
                line.append("  ")
                line.append(c.link, style=f"link {c.link} underline blue")
            page = transcript_link(answer, c)
            if page:
                line.append("  transcript: ", style="dim")
                line.append(page, style=f"link {page} underline blue")
            # Never fold a link across lines: it must stay clickable and copyable.
            console.print(line, soft_wrap=True)
    if timings and answer.timings:
        console.print(Text(timing_line(answer), style="dim"), soft_wrap=True)


def summary_table(hit: Hit) -> Table:
    """A stored summary as a table: each line with its moment (or page) and link."""
    table = Table(title=f"{hit.source.title}: summary", show_lines=False)
    for col in ("", "when", "summary", "link"):
        table.add_column(col, overflow="fold")
    for line in read_lines(hit.segment):
        when, link = "", ""
        if line.start_s is not None:
            when = format_timestamp(line.start_s)
            link = at_second(hit, line.start_s)[1] or ""
        elif line.page is not None:
            when = f"p. {line.page}"
        table.add_row(LABELS[line.section], when, line.text, link)
    return table
