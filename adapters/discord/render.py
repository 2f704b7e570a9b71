"""Turning a core ``Answer`` into Discord messages: citations as masked links, sources in
an embed, and the whole cut into messages that fit Discord's limits.

Limits (https://discord.com/developers/docs/resources/message#create-message): content
2000 characters; at most 10 embeds; an embed's title 256, description 4096, 25 fields of
name 256 / value 1024, footer 2048; and 6000 characters across all embeds of a message.
Text is cut at paragraph, then line, then sentence, then word boundaries, never inside a
link, and a code block cut in two is closed and reopened.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import discord

from adapters.chat import conversation as chat
from adapters.chat.view import SourceLine, link_markers, source_lines
from bot.models import Answer, Citation, Event, PartialAnswer, ProgressEvent

CONTENT_LIMIT = 2000
EMBEDS_PER_MESSAGE = 10
DESCRIPTION_LIMIT = 4096
TITLE_LIMIT = 256
EMBED_TOTAL_LIMIT = 6000
THREAD_NAME_LIMIT = 100

SOURCES_TITLE = "Sources"
SOURCES_COLOUR = discord.Colour(0x5865F2)
PLACEHOLDER = f"-# {chat.PLACEHOLDER['quick']}"
RESEARCH_PLACEHOLDER = f"-# {chat.PLACEHOLDER['deep']}"
SORRY = chat.APOLOGY
RESTARTED = chat.RESTARTED

# A masked link, whose text may hold one level of brackets ("[[2]](<url>)"), or a bare URL.
_LINK = re.compile(r"\[(?:[^\[\]\n]|\[[^\[\]\n]*\])*\]\(<?[^()\s<>]*>?\)|<?https?://[^\s<>]+>?")
_FENCE = re.compile(r"^```(\S*)", re.MULTILINE)


@dataclass(frozen=True)
class Part:
    """One Discord message: its content and embeds."""

    content: str
    embeds: tuple[discord.Embed, ...] = field(default_factory=tuple)


def safe_url(url: str | None) -> str | None:
    """A URL usable inside a masked link, or None (Discord links only http and https)."""
    if not url or not url.startswith(("https://", "http://")):
        return None
    for char, code in ((" ", "%20"), ("(", "%28"), (")", "%29"), ("<", "%3C"), (">", "%3E")):
        url = url.replace(char, code)
    return url


def link_text(label: str) -> str:
    """A label safe as the text of a masked link (no brackets, no stray Markdown)."""
    return discord.utils.escape_markdown(label.replace("[", "(").replace("]", ")"))


def link_citations(text: str, citations: Sequence[Citation]) -> str:
    """``[2]`` -> ``[[2]](<url>)`` for every citation with a web link; ``[1, 2]``,
    ``[2-4]`` and ``[ 3 ]`` likewise (the core's marker grammar, ``adapters.chat.view``).

    The URL sits in angle brackets so Discord does not unfurl one preview per citation."""

    def one(n: int, c: Citation) -> str:
        url = safe_url(c.link)
        return f"[[{n}]](<{url}>)" if url else f"[{n}]"

    return link_markers(text, {c.n: c for c in citations}, one, "".join)


def _cut(text: str, budget: int) -> int:
    """Where to cut ``text`` so the first piece is at most ``budget`` characters."""
    spans = [m.span() for m in _LINK.finditer(text, 0, budget + 2000)]

    def inside(pos: int) -> bool:
        return any(start < pos < end for start, end in spans)

    floor = budget // 2
    for sep, minimum in (("\n\n", floor), ("\n", floor), (". ", floor), (" ", 1)):
        pos = text.rfind(sep, 0, budget + 1 - (len(sep) if sep == ". " else 0))
        while pos >= minimum:
            cut = pos + 1 if sep == ". " else pos
            if not inside(cut) and cut > 0:
                return cut
            pos = text.rfind(sep, 0, pos)
    cut = budget
    for start, end in spans:
        if start < cut < end and start > 0:
            cut = start
    return cut


def split_text(text: str, limit: int = CONTENT_LIMIT) -> list[str]:
    """Cut Markdown into pieces of at most ``limit`` characters at natural boundaries."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        budget = limit - 4  # room to close a code block cut in two
        cut = _cut(rest, budget)
        piece, rest = rest[:cut].rstrip(), rest[cut:]
        rest = rest.lstrip("\n") if rest.startswith("\n") else rest.removeprefix(" ")
        fences = _FENCE.findall(piece)
        if len(fences) % 2 == 1:
            piece += "\n```"
            rest = f"```{fences[-1]}\n{rest}"
        if piece.strip():
            pieces.append(piece)
    if rest:
        pieces.append(rest)
    return pieces


def _source_line(s: SourceLine) -> str:
    url = safe_url(s.link)
    label = link_text(s.label)[:300]
    line = f"`[{s.n}]` [{label}]({url})" if url else f"`[{s.n}]` {label}"
    if s.speaker:
        line += f" · {discord.utils.escape_markdown(s.speaker)[:100]}"
    page = safe_url(s.transcript)
    if page:
        line += f" · [transcript]({page})"
    return line


def source_embeds(sources: Sequence[SourceLine]) -> list[discord.Embed]:
    """The listed sources, one line each, in as many embeds as their length needs."""
    embeds: list[discord.Embed] = []
    lines: list[str] = []
    size = 0
    for line in map(_source_line, sources):
        if lines and size + len(line) + 1 > DESCRIPTION_LIMIT:
            embeds.append(_embed("\n".join(lines), first=not embeds))
            lines, size = [], 0
        lines.append(line)
        size += len(line) + 1
    if lines:
        embeds.append(_embed("\n".join(lines), first=not embeds))
    return embeds


def _embed(description: str, *, first: bool) -> discord.Embed:
    title = SOURCES_TITLE if first else f"{SOURCES_TITLE} (continued)"
    return discord.Embed(title=title, description=description, colour=SOURCES_COLOUR)


def render_answer(answer: Answer, extra_note: str | None = None) -> list[Part]:
    """The messages that show an answer: its text (citations linked), notes, sources."""
    if answer.kind == "error":
        return [Part(f"⚠️ {answer.text.strip() or SORRY}"[:CONTENT_LIMIT])]
    text = link_citations(answer.text.strip(), answer.citations)
    notes = [n.strip() for n in (answer.note, extra_note) if n and n.strip()]
    if notes:
        text += "\n\n" + "\n".join(f"-# {n}" for n in notes)
    pieces = split_text(text) or ["…"]
    embeds = source_embeds(source_lines(answer)) if answer.kind in ("answer", "extractive") else []
    parts = [Part(p) for p in pieces[:-1]]
    last = pieces[-1]
    batch: list[discord.Embed] = []
    for embed in embeds:
        if batch and (
            len(batch) == EMBEDS_PER_MESSAGE
            or sum(map(len, batch)) + len(embed) > EMBED_TOTAL_LIMIT
        ):
            parts.append(Part(last, tuple(batch)))
            last, batch = "", []
        batch.append(embed)
    parts.append(Part(last, tuple(batch)))
    return parts


def progress_text(event: Event) -> str:
    """What the placeholder shows while the core works."""
    if isinstance(event, PartialAnswer):
        text = event.text.strip()
        tail = "\n-# writing…"
        room = CONTENT_LIMIT - len(tail) - 1
        if len(text) > room:
            text = text[:room].rstrip() + "…"
        return text + tail if text else PLACEHOLDER
    if isinstance(event, ProgressEvent):
        return f"-# {event.text.strip().rstrip('.…')[:300]}…"  # the core may end it with "..."
    return PLACEHOLDER


def thread_name(question: str) -> str:
    """A thread title from the question's first line (Discord allows 1-100 characters)."""
    first = " ".join(question.strip().splitlines()[0].split()) if question.strip() else ""
    if not first:
        return "Quorum"
    if len(first) > THREAD_NAME_LIMIT:
        first = first[: THREAD_NAME_LIMIT - 1].rstrip() + "…"
    return first
