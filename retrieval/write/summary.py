"""A summary per source: its topics, decisions and action items, each at its moment.

Without Claude the summary is extractive: each topic is titled by its most central
sentence (the candidate closest to the topic's vector, by MiniLM; candidates come from
the topic's most central window, so only a few short sentences are encoded), and
decisions and action items are the sentences that say so ("we decided", "I'll send"),
the most central first, shown in time order, each after who said it ("Amara: ...").
A ``Summarizer`` (Claude's fast model, in ``bot.summaries``) may write the lines
instead; each line still carries the second it is about. The summary is stored as a
searchable unit of level ``summary`` whose marks put every line at its moment, so an
answer citing it links to that second.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from retrieval.encoding.embed import Embedder
from retrieval.models import Mark, Segment, Source
from retrieval.write.chunking import split_sentences
from retrieval.write.levels import dot, mean_vector

Section = Literal["topic", "decision", "action"]
LABELS: dict[Section, str] = {"topic": "Topic", "decision": "Decision", "action": "Action item"}
CANDIDATES = 4  # sentences encoded per topic shown in the summary
MAX_TOPICS = 12
MAX_ITEMS = 5
MIN_WORDS, MAX_WORDS = 5, 45

_DECISION = re.compile(
    r"\b(?:we(?:'ve| have)? (?:decided|agreed|chose|settled on)|decision (?:is|was)"
    r"|let'?s go with|we(?:'ll| will) go with|agreed (?:on|to|that)|it'?s decided"
    r"|final(?:ly)? (?:decided|agreed))\b",
    re.IGNORECASE,
)
_ACTION = re.compile(
    r"\b(?:action items?|to-?do|i(?:'ll| will) (?:send|write|check|look|follow|set|make|"
    r"prepare|draft|update|talk|email|schedule|do|get|try|put|find)|"
    r"(?:you|we|he|she|they)(?:'ll| will| need to| should) (?:send|write|check|look into|"
    r"follow up|set up|prepare|draft|update|email|schedule)|by (?:next )?(?:monday|tuesday|"
    r"wednesday|thursday|friday|next week|tomorrow|the end of))\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Line:
    """One line of a summary and the moment (or page) it is about."""

    section: Section
    text: str
    start_s: float | None = None
    page: int | None = None


class Summarizer(Protocol):
    """Writes a source's summary lines from its topics (Claude's fast model)."""

    async def summarize(self, source: Source, topics: Sequence[Segment]) -> list[Line] | None:
        """The lines, or None to fall back to the extractive summary."""
        ...


@dataclass(frozen=True)
class _Sentence:
    text: str
    start_s: float | None
    page: int | None


def sentences(seg: Segment) -> list[_Sentence]:
    """A unit's sentences of summary length, each at the second its cue starts."""
    out: list[_Sentence] = []
    marks = seg.marks
    pos = 0
    for raw in seg.text.split("\n"):
        line_at = pos
        pos += len(raw) + 1
        label = re.match(r"[^:\n]{1,60}: ", raw)
        body = raw[label.end() :] if label and raw[: label.end() - 2] in seg.speakers else raw
        base = line_at + len(raw) - len(body)
        cursor = 0
        for s in split_sentences(body):
            at = body.find(s, cursor)
            at = cursor if at < 0 else at
            cursor = at + len(s)
            if not MIN_WORDS <= len(s.split()) <= MAX_WORDS:
                continue
            start = seg.start_s
            for m in marks:
                if m.at <= base + at:
                    start = m.start_s
                else:
                    break
            out.append(_Sentence(s.strip(), start, seg.page))
    return out


async def extractive(
    windows: Sequence[Segment],
    vectors: Sequence[Sequence[float]],
    topics: Sequence[Segment],
    topic_vectors: Sequence[Sequence[float]],
    turns: Sequence[Segment],
    turn_vectors: Sequence[Sequence[float]],
    embedder: Embedder,
) -> tuple[list[Line], list[str]]:
    """The extractive summary's lines, and each topic's title (its most central sentence)."""
    centre = mean_vector(vectors) if vectors else []
    pools: list[list[_Sentence]] = []
    for topic, tv in zip(topics, topic_vectors, strict=True):
        inside = [
            k
            for k, w in enumerate(windows)
            if (w.start_s is None or topic.start_s is None or topic.end_s is None)
            or (topic.start_s <= w.start_s and w.end_s is not None and w.end_s <= topic.end_s)
        ]
        inside = [k for k in inside if _place(windows[k]) == _place(topic)] or inside
        best = max(inside, key=lambda k: dot(vectors[k], tv)) if inside else None
        pools.append(sentences(windows[best])[:CANDIDATES] if best is not None else [])
    # The summary's topics: the most central ones (by their vectors), in time order. Only
    # their candidate sentences are encoded; any other topic is titled by its central
    # window's first sentence.
    centrality = [dot(tv, centre) if centre else 0.0 for tv in topic_vectors]
    ranked = sorted(range(len(topics)), key=lambda n: -centrality[n])
    shown = sorted(n for n in ranked[:MAX_TOPICS] if pools[n])
    titles = [pool[0].text if pool else "" for pool in pools]
    # Only real choices are encoded, each sentence once: a pool of one sentence is its own
    # title (the encoder is ingest's bottleneck; small documents have many such pools).
    choose = [n for n in shown if len(pools[n]) > 1] if len(topics) > 1 else []
    flat = list(dict.fromkeys(s.text for n in choose for s in pools[n]))
    encoded = dict(zip(flat, await embedder.embed_documents(flat) if flat else [], strict=True))
    for n in choose:
        titles[n] = max(pools[n], key=lambda s: dot(encoded[s.text], topic_vectors[n])).text
    by_text = {s.text: s for pool in pools for s in pool}
    lines = [
        Line("topic", titles[n], by_text[titles[n]].start_s, by_text[titles[n]].page) for n in shown
    ]
    rules: tuple[tuple[Section, re.Pattern[str]], ...] = (
        ("decision", _DECISION),
        ("action", _ACTION),
    )
    for section, rule in rules:
        found = [
            (dot(v, centre) if centre else 0.0, n, s)
            for n, (t, v) in enumerate(zip(turns, turn_vectors, strict=True))
            for s in sentences(t)
            if rule.search(s.text)
        ]
        items = sorted(found, key=lambda x: -x[0])[:MAX_ITEMS]
        items.sort(key=lambda x: (x[2].start_s or 0.0, x[1]))
        lines += [Line(section, said_by(turns[n], s.text), s.start_s, s.page) for _, n, s in items]
    return lines, titles


def said_by(turn: Segment, text: str) -> str:
    """A decision or action item with who said it ("Amara: restore drill by Tuesday")."""
    return f"{turn.speaker}: {text}" if turn.speaker and len(turn.speakers) == 1 else text


def _place(s: Segment) -> tuple[int | None, str | None, int | None]:
    return (s.page, s.heading, s.lesson)


def summary_unit(source: Source, lines: Sequence[Line], windows: Sequence[Segment]) -> Segment:
    """The summary as one searchable unit: a line per item, each marked at its moment."""
    timed = bool(windows) and windows[0].start_s is not None
    text = f"Summary of {source.title}."
    marks: list[Mark] = []
    start = windows[0].start_s if timed else None
    if timed and start is not None:
        marks.append(Mark(0, start, start))
    for line in lines:
        text += "\n" + f"{LABELS[line.section]}: "
        if timed and line.start_s is not None:
            marks.append(Mark(len(text), line.start_s, line.start_s))
        text += line.text
    return Segment(
        source_id=source.id,
        position=0,
        text=text,
        start_s=start,
        end_s=max(w.end_s or 0.0 for w in windows) if timed else None,
        speakers=tuple(dict.fromkeys(s for w in windows for s in w.speakers)),
        page=windows[0].page if windows else None,
        heading="Summary",
        marks=tuple(marks),
        level="summary",
    )


def titled(topics: Sequence[Segment], titles: Sequence[str]) -> list[Segment]:
    """Topics of a recording headed by their titles (a document's keep their section)."""
    return [
        replace(t, heading=title[:120]) if title and t.start_s is not None else t
        for t, title in zip(topics, titles, strict=True)
    ]


def read_lines(summary: Segment) -> list[Line]:
    """The lines of a stored summary unit, with their moments (for ``quorum summary``)."""
    out: list[Line] = []
    by_label = {f"{v}: ": k for k, v in LABELS.items()}
    pos = 0
    for raw in summary.text.split("\n"):
        at = pos
        pos += len(raw) + 1
        for label, section in by_label.items():
            if raw.startswith(label):
                begin = at + len(label)
                second = next((m.start_s for m in summary.marks if m.at == begin), None)
                out.append(Line(section, raw[len(label) :], second, summary.page))
                break
    return out
