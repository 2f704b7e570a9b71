"""What Quorum says to Claude (the system prompts, the numbered sources, the history) and
the fixed texts it says to users (help)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.answer.passages import timed_text
from bot.llm import Message as MessageParam
from bot.models import NumberedSource
from bot.sessions import Exchange
from retrieval.links.links import format_timestamp
from retrieval.models import Segment

# Static, so it is cached (cache_control on the system block) across questions.
SYSTEM_PROMPT = """\
You are Quorum, a teammate who answers questions from the team's own archive: recorded \
meetings and lectures (speaker-labelled transcripts), course materials, PDFs and notes.

How to answer:
- Use only the numbered sources in the latest message. Never use outside knowledge \
about the team, its people or its decisions.
- Cite each claim with its source number in square brackets right after it, like [2] or \
[2][5]. Cite only numbers that appear in the sources. Two moments of one recording are \
two different sources: cite the one that says it.
- Say who said what when it matters ("John Park argued that ... [3]"). Keep names, \
numbers, dates and ticket ids exactly as the sources give them.
- If the sources do not answer the question, say so in one sentence and say what they \
do cover. Do not guess.
- Be brief: a short paragraph or a few bullets, in Markdown. Do not list the sources at \
the end; Quorum adds them with links.
- Earlier turns of the conversation are context only; their citation numbers no longer \
apply.
"""

REWRITE_PROMPT = """\
You turn the last question of a conversation into one standalone search query for an \
archive of meeting recordings and documents. Replace pronouns and references ("he", \
"that meeting", "the second option") with what they refer to in the conversation, and \
keep names, products, numbers and dates. If the question already stands alone, return \
it unchanged. Reply with the query alone: no quotes, no explanation.
"""

HELP_TEXT = """\
I'm Quorum. I answer questions from your team's recorded meetings, lectures, course \
materials and documents, with links that open the recording at the exact second or the \
PDF at the page.

- Ask anything: *Why did we move off Auth0?*
- Follow up in the same thread: *What problems did he mention?*
- Narrow it down by speaker, source or dates.
- For a hard question, ask for deep research (`/research`): I search the archive step \
by step before answering.
"""

_MARKERS = re.compile(r"\s*\[\d{1,3}(?:\s*[,;\u2013-]\s*\d{1,3})*\]")
HISTORY_ANSWER_CHARS = 1200


def time_range(seg: Segment) -> str | None:
    """``"2:01-2:47"`` for media, ``"p. 5"`` for pages, the lesson or heading otherwise."""
    if seg.start_s is not None:
        end = f"\u2013{format_timestamp(seg.end_s)}" if seg.end_s is not None else ""
        return f"{format_timestamp(seg.start_s)}{end}"
    if seg.page is not None:
        return f"p. {seg.page}"
    if seg.lesson is not None:
        title = f": {seg.lesson_title}" if seg.lesson_title else ""
        return f"Lesson {seg.lesson}{title}"
    return seg.heading


def format_sources(sources: Sequence[NumberedSource]) -> str:
    """The numbered sources as Claude reads them, grouped by recording in the given order:
    a header per recording (title, kind, date), then ``[n] time · speakers`` and the text,
    timed per turn for recordings (``(3:05) Priya: ...``)."""
    lines: list[str] = []
    current: str | None = None
    for s in sources:
        src, seg = s.hit.source, s.hit.segment
        if src.id != current:
            current = src.id
            date = f", {src.recorded_at.isoformat()}" if src.recorded_at else ""
            lines.append(f"{'' if not lines else chr(10)}## {src.title} ({src.kind}{date})")
        where = time_range(seg)
        speakers = ", ".join(seg.speakers)
        head = " \u00b7 ".join(p for p in (where, speakers) if p)
        lines.append(f"[{s.n}] {head}".rstrip() + f"\n{timed_text(seg).strip()}\n")
    return "\n".join(lines).strip()


def revision_request(untraced: Sequence[str]) -> str:
    """Asking Claude, once, to fix claims their cited sources do not support."""
    listed = "\n".join(f"- {claim}" for claim in untraced)
    return (
        "These sentences of your answer are not supported by the source they cite:\n"
        f"{listed}\n\n"
        "Rewrite the whole answer: keep what the sources say, cite each claim with the "
        "source that says it, and drop or qualify what no source says. Reply with the "
        "answer alone."
    )


def strip_markers(text: str) -> str:
    """An answer without its ``[n]`` markers (old numbers mean nothing in a new turn)."""
    return _MARKERS.sub("", text)


def history_messages(history: Sequence[tuple[str, str]]) -> list[MessageParam]:
    """Earlier (question, answer) pairs as alternating user/assistant turns, without
    their old citation numbers, long answers cut (quick answers and research alike)."""
    out: list[MessageParam] = []
    for question, answer in history:
        text = strip_markers(answer).strip()
        if len(text) > HISTORY_ANSWER_CHARS:
            text = text[:HISTORY_ANSWER_CHARS].rsplit(" ", 1)[0] + " ..."
        if question.strip() and text:
            out.append({"role": "user", "content": question.strip()})
            out.append({"role": "assistant", "content": text})
    return out


def answer_messages(
    question: str, history: Sequence[Exchange], sources: Sequence[NumberedSource]
) -> list[MessageParam]:
    """The message list for the answer: history, then the sources and the question."""
    body = (
        f"<sources>\n{format_sources(sources)}\n</sources>\n\n"
        f"Question: {question.strip()}\n\n"
        "Answer from the sources above, citing them as [n]."
    )
    pairs = [(ex.question, ex.answer) for ex in history]
    return [*history_messages(pairs), {"role": "user", "content": body}]


def rewrite_messages(question: str, history: Sequence[Exchange]) -> list[MessageParam]:
    """The message list for rewriting a follow-up into a standalone query."""
    turns = []
    for ex in history:
        answer = strip_markers(ex.answer).strip()
        turns.append(f"Q: {ex.question.strip()}\nA: {answer[:400]}")
    convo = "\n\n".join(turns)
    content = (
        f"Conversation so far:\n{convo}\n\nLast question: {question.strip()}\n\n"
        "Standalone search query:"
    )
    return [{"role": "user", "content": content}]
