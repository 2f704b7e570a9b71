"""A window's sentences, each with its speaker and the second it is said, and where a
link to one opens: what a citation points at. Rendered back to text, a mark keeps each
cue's second, so the sentences of a merged passage keep theirs; as Claude reads them,
each turn carries the second it starts (``timed_lines``).
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from retrieval.links.links import format_timestamp
from retrieval.models import Mark, Segment
from retrieval.write.chunking import split_sentences


@dataclass(frozen=True)
class Sentence:
    """One sentence of a passage, who said it, and (for recordings) when.

    ``start_s`` is when the sentence begins: exact where it begins a cue or turn, else
    estimated inside that one cue by its share of the cue's characters. ``cue_s`` and
    ``cue_end_s`` are the cue's own bounds: a link never starts before ``cue_s``."""

    speaker: str | None
    text: str
    start_s: float | None = None
    cue_s: float | None = None
    cue_end_s: float | None = None


LEAD_IN_S = 1.5  # a link starts a little before the sentence, never before its cue
EXACT_S = 0.5  # a sentence this close to its cue's start is where the cue starts


def link_second(sentence: Sentence) -> float | None:
    """Where a link to ``sentence`` opens: its start, led in by ``LEAD_IN_S`` when the
    start is inside a cue, never before the cue; whole seconds (links carry whole ones)."""
    if sentence.start_s is None:
        return None
    cue = sentence.cue_s if sentence.cue_s is not None else sentence.start_s
    at = cue if sentence.start_s - cue < EXACT_S else max(cue, sentence.start_s - LEAD_IN_S)
    return float(math.floor(at))


def _mark_at(seg: Segment, offset: int) -> tuple[Mark, int] | None:
    """The mark (cue) holding character ``offset`` of ``seg.text``, and where the next
    cue begins."""
    marks = seg.marks
    if not marks:
        return None
    i = max(0, bisect_right([m.at for m in marks], offset) - 1)
    nxt = marks[i + 1].at if i + 1 < len(marks) else len(seg.text)
    return marks[i], nxt


def _timing(seg: Segment, offset: int) -> tuple[float | None, float | None, float | None]:
    """When the character at ``offset`` is said: (second, its cue's start, its cue's end).

    With marks, exact at a cue's start and interpolated inside one cue; without (data
    ingested before marks existed), estimated over the whole window."""
    found = _mark_at(seg, offset)
    if found is not None:
        mark, nxt = found
        share = min(1.0, max(0.0, (offset - mark.at) / max(1, nxt - mark.at)))
        return mark.start_s + (mark.end_s - mark.start_s) * share, mark.start_s, mark.end_s
    if seg.start_s is None or seg.end_s is None or not seg.text:
        return None, None, None
    share = offset / len(seg.text)
    return seg.start_s + (seg.end_s - seg.start_s) * share, seg.start_s, seg.end_s


def sentences_of(seg: Segment) -> list[Sentence]:
    """A window's sentences with their speakers (``Name: `` labels are read and removed)
    and, for recordings, their seconds."""
    known = sorted(seg.speakers, key=len, reverse=True)
    current = seg.speakers[0] if len(seg.speakers) == 1 else None
    out: list[Sentence] = []
    pos = 0
    for raw in seg.text.split("\n"):
        offset, line = pos, raw
        pos += len(raw) + 1
        offset += len(line) - len(line.lstrip())
        line = line.strip()
        if not line:
            continue
        for name in known:
            if line.startswith(f"{name}:"):
                rest = line[len(name) + 1 :]
                offset += len(name) + 1 + len(rest) - len(rest.lstrip())
                current, line = name, rest.strip()
                break
        cursor = 0
        for s in split_sentences(line):
            at = line.find(s, cursor)
            at = cursor if at < 0 else at
            cursor = at + len(s)
            start, cue, cue_end = _timing(seg, offset + at)
            out.append(Sentence(current, s, start, cue, cue_end))
    return out


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().casefold()


def merge_sentences(acc: list[Sentence], nxt: Sequence[Sentence]) -> None:
    """Append ``nxt`` to ``acc`` without the sentences they share (the chunk overlap)."""
    a = [_norm(s.text) for s in acc[-40:]]
    b = [_norm(s.text) for s in nxt]
    for k in range(min(len(a), len(b)), 0, -1):
        if a[-k:] == b[:k]:
            acc.extend(nxt[k:])
            return
    acc.extend(nxt)


def render(sentences: Sequence[Sentence]) -> str:
    """Sentences as text: one line per speaker turn, labelled when several people speak."""
    return render_marked(sentences)[0]


def render_marked(sentences: Sequence[Sentence]) -> tuple[str, tuple[Mark, ...]]:
    """``render``'s text, and a mark where each cue (or a cue's first kept sentence) begins,
    so ``sentences_of`` on the result gives every sentence its second back."""
    labelled = len({s.speaker for s in sentences}) > 1
    text = ""
    marks: list[Mark] = []
    prev: Sentence | None = None
    for s in sentences:
        if prev is None or s.speaker != prev.speaker:
            text += ("\n" if text else "") + (f"{s.speaker}: " if labelled and s.speaker else "")
            new_cue = True
        else:
            text += " "
            new_cue = (s.cue_s, s.cue_end_s) != (prev.cue_s, prev.cue_end_s)
        if new_cue and s.start_s is not None:
            end = s.cue_end_s if s.cue_end_s is not None else s.start_s
            marks.append(Mark(len(text), s.start_s, max(s.start_s, end)))
        text += s.text
        prev = s
    return text, tuple(marks)


TURN_STAMP_S = 30.0  # a long turn gets a fresh time stamp this often


def timed_lines(sentences: Sequence[Sentence]) -> str:
    """One line per turn, each with the second it starts, ``(3:05) Priya: ...``; a long
    turn is stamped again every ~30 s."""
    lines: list[str] = []
    stamp: float | None = None
    prev: Sentence | None = None
    for s in sentences:
        fresh = (
            prev is None
            or s.speaker != prev.speaker
            or (s.start_s is not None and stamp is not None and s.start_s - stamp >= TURN_STAMP_S)
        )
        if fresh:
            stamp = s.start_s
            when = f"({format_timestamp(s.start_s)}) " if s.start_s is not None else ""
            who = f"{s.speaker}: " if s.speaker else ""
            lines.append(f"{when}{who}{s.text}")
        else:
            lines[-1] += " " + s.text
        prev = s
    return "\n".join(lines)
