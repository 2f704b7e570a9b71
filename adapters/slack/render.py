"""Answers as Slack messages: Claude's Markdown -> Slack mrkdwn, ``[n]`` -> links to the
cited second or page, and Block Kit within Slack's limits (3000 characters a section, 50
blocks a message, 10 elements a context block), continued in further thread messages when
one message will not hold an answer.

Everything the model or a user wrote is escaped (``&``, ``<``, ``>``), so an answer can
never ping ``<!channel>`` or forge a link; only links Quorum builds are live.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.chat.view import SourceLine, link_markers, one_line, source_lines, wants_feedback
from bot.models import Answer, Citation

SECTION_LIMIT = 3000
MAX_BLOCKS = 50
CONTEXT_ELEMENTS = 10
CONTEXT_TEXT_LIMIT = 2000
MESSAGE_CHARS = 12000  # keep each message readable; Slack folds long ones anyway
FALLBACK_CHARS = 300
PARTIAL_LIMIT = SECTION_LIMIT - 100

FEEDBACK_BLOCK_ID = "quorum_feedback"
ACTION_UP = "quorum_feedback_up"
ACTION_DOWN = "quorum_feedback_down"

Block = dict[str, Any]


@dataclass(frozen=True)
class SlackMessage:
    """One chat.postMessage / chat.update payload: notification text and blocks."""

    text: str
    blocks: list[Block]


# ---------------------------------------------------------------- mrkdwn


def escape(text: str) -> str:
    """Escape the three characters Slack treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _url(url: str) -> str:
    return escape(url).replace("|", "%7C")


def link(url: str, text: str) -> str:
    """``<url|text>`` with both parts made safe."""
    return f"<{_url(url)}|{escape(text).replace('|', '¦')}>"


_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_MD_LINK = re.compile(r"\[([^\]\n]+)\]\(((?:https?://|mailto:)[^)\s]+)\)")
_AUTOLINK = re.compile(r"<((?:https?://|mailto:)[^>\s]+)>")
_SLOT = re.compile(r"\x00(\d+)\x00")
_BOLD = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_ITALIC = re.compile(r"(?<![*\w])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?![*\w])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(?:\[( |x|X)\]\s+)?(.*)$")
_ORDERED = re.compile(r"^(\s*)(\d{1,4})[.)]\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?(.*)$")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_TABLE_ROW = re.compile(r"^\s*\|.*\|\s*$")


def _cite(n: int, c: Citation) -> str:
    return link(c.link, str(n)) if c.link else str(n)


def _inline(text: str, cites: Mapping[int, Citation] | None) -> str:
    slots: list[str] = []

    def keep(rendered: str) -> str:
        slots.append(rendered)
        return f"\x00{len(slots) - 1}\x00"

    text = text.replace("\x00", "")
    text = _CODE_SPAN.sub(lambda m: keep(f"`{escape(m[2].strip())}`"), text)
    text = _MD_LINK.sub(lambda m: keep(link(m[2], _plain(m[1]))), text)
    text = _AUTOLINK.sub(lambda m: keep(f"<{_url(m[1])}>"), text)
    text = link_markers(text, cites, _cite, lambda parts: keep(f"[{', '.join(parts)}]"))
    text = escape(text)
    text = _BOLD.sub(lambda m: f"\x01{m[2]}\x01", text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    text = text.replace("\x01", "*")
    return _SLOT.sub(lambda m: slots[int(m[1])], text)


def _plain(text: str) -> str:
    """Text with Markdown emphasis markers removed (for headings and link labels)."""
    return re.sub(r"(\*\*|__|\*|~~|`)", "", text)


def to_mrkdwn(markdown: str, cites: Mapping[int, Citation] | None = None) -> str:
    """Convert Claude's Markdown to Slack mrkdwn, with ``[n]`` rendered as links.

    ``cites`` maps each valid number to its citation; ``None`` leaves ``[n]`` as typed
    (partial answers, whose citations are not resolved yet)."""
    lines = markdown.replace("\r\n", "\n").split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = _FENCE.match(line)
        if fence:
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(fence[1]):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence (or the end)
            out.append("```\n" + escape("\n".join(body)) + "\n```")
            continue
        if _TABLE_ROW.match(line):
            rows = []
            while i < len(lines) and _TABLE_ROW.match(lines[i]):
                rows.append(lines[i].strip())
                i += 1
            out.append("```\n" + escape("\n".join(rows)) + "\n```")
            continue
        out.append(_line(line, cites))
        i += 1
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def _line(line: str, cites: Mapping[int, Citation] | None) -> str:
    if m := _HEADING.match(line):
        title = _inline(_plain(m[1]), cites)
        return f"*{title}*" if title else ""
    if _RULE.match(line):
        return "──────────"
    if m := _BULLET.match(line):
        depth = len(m[1].expandtabs(4)) // 2
        mark = "•" if depth == 0 else "◦"
        box = {" ": "☐ ", "x": "☑ ", "X": "☑ "}.get(m[2] or "", "")
        return f"{'    ' * depth}{mark} {box}{_inline(m[3], cites)}"
    if m := _ORDERED.match(line):
        depth = len(m[1].expandtabs(4)) // 3
        return f"{'    ' * depth}{m[2]}. {_inline(m[3], cites)}"
    if m := _QUOTE.match(line):
        return f">{_inline(m[1], cites)}"
    return _inline(line, cites)


# ---------------------------------------------------------------- what users typed


_SLACK_LINK = re.compile(r"<([@#!]?)([^<>|]*)(?:\|([^<>]*))?>")


def plain_text(text: str, bot_user_id: str | None) -> str:
    """Slack's message markup as the words a user typed, without the bot's mention."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(?:\|[^>]*)?>", " ", text)

    def word(m: re.Match[str]) -> str:
        sigil, target, label = m[1], m[2], m[3]
        if sigil == "@":
            return f"@{label or target}"
        if sigil == "#":
            return f"#{label or target}"
        if sigil == "!":
            return ""
        return label or target

    text = html.unescape(_SLACK_LINK.sub(word, text))
    return re.sub(r"[ \t]+", " ", text).strip()


# ---------------------------------------------------------------- splitting


def _units(text: str) -> list[str]:
    """Paragraphs, each code block one unit even when it holds blank lines."""
    units: list[str] = []
    current: list[str] = []
    in_code = False

    def flush() -> None:
        if current:
            units.append("\n".join(current))
            current.clear()

    for line in text.split("\n"):
        if line.strip() == "```":
            if not in_code:
                flush()
            current.append(line)
            if in_code:
                flush()
            in_code = not in_code
        elif in_code:
            current.append(line)
        elif not line.strip():
            flush()
        else:
            current.append(line)
    flush()
    return units


def _hard_split(text: str, limit: int) -> list[str]:
    """Split on whitespace, never inside a ``<...>`` link; cut a giant token as a last resort."""
    pieces: list[str] = []
    current = ""
    for token in re.findall(r"<[^<>]*>|[^\s<]+|<|\s+", text):
        while len(token) > limit:
            if current:
                pieces.append(current)
                current = ""
            pieces.append(token[:limit])
            token = token[limit:]
        if len(current) + len(token) > limit:
            pieces.append(current)
            current = token.lstrip()
        else:
            current += token
    if current.strip():
        pieces.append(current)
    return [p.strip() for p in pieces if p.strip()]


def _split_unit(unit: str, limit: int) -> list[str]:
    if len(unit) <= limit:
        return [unit]
    if unit.startswith("```"):
        inner = unit.removeprefix("```").removesuffix("```").strip("\n")
        return [f"```\n{p}\n```" for p in _pack(inner.split("\n"), limit - 8, "\n")]
    return _pack(unit.split("\n"), limit, "\n")


def _pack(parts: list[str], limit: int, joiner: str) -> list[str]:
    out: list[str] = []
    current = ""
    for part in parts:
        pieces = [part] if len(part) <= limit else _hard_split(part, limit)
        for piece in pieces:
            if current and len(current) + len(joiner) + len(piece) > limit:
                out.append(current)
                current = piece
            else:
                current = f"{current}{joiner}{piece}" if current else piece
    if current:
        out.append(current)
    return out


def split_mrkdwn(text: str, limit: int = SECTION_LIMIT) -> list[str]:
    """Split mrkdwn into chunks of at most ``limit`` characters, at paragraph, then line,
    then word boundaries; code blocks are closed and reopened across a split."""
    chunks: list[str] = []
    for unit in _units(text):
        chunks.extend(_split_unit(unit, limit))
    return _pack(chunks, limit, "\n\n")


# ---------------------------------------------------------------- blocks


def section(text: str) -> Block:
    """A mrkdwn section block."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def context(*texts: str) -> Block:
    """A context block of mrkdwn elements."""
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": t} for t in texts]}


def _fallback(text: str) -> str:
    return one_line(text, FALLBACK_CHARS)


def _source_line(s: SourceLine) -> str:
    label = link(s.link, s.label) if s.link else escape(s.label)
    speaker = f" — {escape(s.speaker)}" if s.speaker else ""
    page = f" · {link(s.transcript, 'transcript')}" if s.transcript else ""
    line = f"{s.n}. {label}{speaker}{page}"
    return line if len(line) <= CONTEXT_TEXT_LIMIT else f"{s.n}. {escape(s.label[:200])}"


def feedback_block(exchange_id: int) -> Block:
    """👍 / 👎 buttons carrying the exchange id."""

    def button(action_id: str, emoji: str, label: str) -> Block:
        return {
            "type": "button",
            "action_id": action_id,
            "value": str(exchange_id),
            "text": {"type": "plain_text", "text": f"{emoji} {label}", "emoji": True},
        }

    return {
        "type": "actions",
        "block_id": FEEDBACK_BLOCK_ID,
        "elements": [button(ACTION_UP, "👍", "Helpful"), button(ACTION_DOWN, "👎", "Not helpful")],
    }


def feedback_recorded(blocks: list[Block], value: int) -> list[Block]:
    """The message's blocks with the feedback buttons replaced by a thank-you note."""
    note = context(f"Thanks — feedback recorded {'👍' if value > 0 else '👎'}")
    kept = [b for b in blocks if b.get("block_id") != FEEDBACK_BLOCK_ID]
    return [*kept, note]


def answer_messages(answer: Answer) -> list[SlackMessage]:
    """The final answer: body sections, sources, a note and feedback buttons, as one or
    more messages (the first replaces the placeholder, the rest follow in the thread)."""
    cites = {c.n: c for c in answer.citations}
    body = to_mrkdwn(answer.text, cites) or "_(no answer text)_"
    if answer.kind == "error":
        body = f":warning: {body}"
    sections = [section(chunk) for chunk in split_mrkdwn(body)]

    trailer: list[Block] = []
    lines = [_source_line(s) for s in source_lines(answer)]
    if lines:
        trailer.append({"type": "divider"})
        for i in range(0, len(lines), CONTEXT_ELEMENTS):
            trailer.append(context(*lines[i : i + CONTEXT_ELEMENTS]))
    if answer.note:
        trailer.append(context(f":information_source: {to_mrkdwn(answer.note)[:1900]}"))
    if wants_feedback(answer) and answer.exchange_id is not None:
        trailer.append(feedback_block(answer.exchange_id))

    groups: list[list[Block]] = [[]]
    size = 0
    for block in sections:
        chars = len(block["text"]["text"])
        if groups[-1] and (len(groups[-1]) >= MAX_BLOCKS or size + chars > MESSAGE_CHARS):
            groups.append([])
            size = 0
        groups[-1].append(block)
        size += chars
    if len(groups[-1]) + len(trailer) > MAX_BLOCKS:
        groups.append([])
    groups[-1].extend(trailer)

    first = _fallback(body)
    return [
        SlackMessage(first if i == 0 else f"(continued) {first}", blocks)
        for i, blocks in enumerate(groups)
    ]


def partial_message(text: str) -> SlackMessage:
    """An answer still being written: its text so far, cut to one section."""
    body = to_mrkdwn(text)
    if len(body) > PARTIAL_LIMIT:
        cut = body.rfind("\n", 0, PARTIAL_LIMIT)
        body = body[: cut if cut > PARTIAL_LIMIT // 2 else PARTIAL_LIMIT] + "\n…"
    body = body or "…"
    return SlackMessage(_fallback(body), [section(body), context("_writing…_")])


def progress_message(step: str) -> SlackMessage:
    """A research or search step shown in the placeholder (``_searching 'x'…_``)."""
    text = f"_{escape(step.strip().rstrip('.…'))[:PARTIAL_LIMIT]}…_"
    return SlackMessage(text, [section(text)])


def notice(text: str) -> SlackMessage:
    """A plain one-sentence message (errors, apologies, placeholders)."""
    return SlackMessage(text, [section(escape(text))])


def asked_message(user: str, question: str, deep: bool) -> SlackMessage:
    """The visible echo of a slash command: ``*@user asked:* question``."""
    verb = "asked for deep research" if deep else "asked"
    text = f"*<@{user}> {verb}:* {escape(question)}"
    return SlackMessage(_fallback(f"{verb}: {question}"), [section(text[:SECTION_LIMIT])])
