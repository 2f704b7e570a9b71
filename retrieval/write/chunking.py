"""Cutting a reader's units (cues, turns, paragraphs, pages) into searchable segments.

Timed units (media) become windows of up to ``max_seconds`` and ``max_chars``; untimed
units (PDF pages, Markdown sections, lessons, untimed transcripts) are cut into sentences
and packed into windows of up to ``max_chars``. A full window prefers to end where the
speaker changes, else where a sentence ends, as long as it keeps at least half its size.
The next window repeats the previous one's last units (up to ``overlap_seconds`` or
``overlap_chars``) so a passage cut in two is still found whole. No window crosses a
page, a heading section or a lesson.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import groupby
from typing import NamedTuple

from retrieval.models import Mark, Segment


@dataclass(frozen=True)
class ChunkConfig:
    """Window sizes: seconds for media, characters for text and as a cap on both."""

    max_seconds: float = 60
    overlap_seconds: float = 10
    max_chars: int = 1200
    overlap_chars: int = 150

    def __post_init__(self) -> None:
        if not 0 <= self.overlap_seconds < self.max_seconds:
            raise ValueError("overlap_seconds must be >= 0 and below max_seconds")
        if not 0 <= self.overlap_chars < self.max_chars:
            raise ValueError("overlap_chars must be >= 0 and below max_chars")


@dataclass(frozen=True)
class Unit:
    """One piece a reader found (a cue, a turn, a paragraph, a page) and where it sits."""

    text: str
    start_s: float | None = None
    end_s: float | None = None
    speaker: str | None = None
    page: int | None = None
    heading: str | None = None
    lesson: int | None = None
    lesson_title: str | None = None
    lesson_url: str | None = None


class _Atom(NamedTuple):
    """A unit, or a sentence of one; ``origin`` tells which unit it came from."""

    origin: int
    unit: Unit


# A boundary is whitespace after . ! ? (maybe closing a quote or bracket) and before
# anything but a lowercase letter, so "e.g. this" stays whole.
_BOUNDARY = re.compile(r"(?:(?<=[.!?…])|(?<=[.!?…][\"'”’)\]]))\s+(?=[^\sa-z])")
_ENDS_SENTENCE = re.compile(r"[.!?…][\"'”’)\]]*\s*$")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, each keeping its inner whitespace."""
    return [s for s in _BOUNDARY.split(text.strip()) if s.strip()]


def ends_sentence(text: str) -> bool:
    """True when ``text`` ends with sentence-final punctuation."""
    return bool(_ENDS_SENTENCE.search(text))


def _wrap(sentence: str, limit: int) -> list[str]:
    """Cut a sentence longer than ``limit`` at spaces: the last resort for unpunctuated text."""
    pieces: list[str] = []
    current = ""
    for word in sentence.split():
        # A word longer than the limit (a URL, unspaced script) is cut where it must be.
        for start in range(0, len(word), limit):
            part = word[start : start + limit]
            if current and len(current) + 1 + len(part) > limit:
                pieces.append(current)
                current = part
            else:
                current = f"{current} {part}" if current else part
    if current:
        pieces.append(current)
    return pieces


def _atoms(units: Sequence[Unit], timed: bool, config: ChunkConfig) -> list[_Atom]:
    """Units as packable atoms: cues stay whole unless over-long; text becomes sentences."""
    atoms: list[_Atom] = []
    for origin, unit in enumerate(units):
        text = unit.text.strip()
        start, end = unit.start_s, unit.end_s
        if timed:
            assert start is not None and end is not None
            if end - start <= config.max_seconds and len(text) <= config.max_chars:
                atoms.append(_Atom(origin, replace(unit, text=text)))  # times stay exact
                continue
        limit = config.max_chars
        parts = [
            p for s in split_sentences(text) for p in (_wrap(s, limit) if len(s) > limit else [s])
        ]
        if start is None or end is None:
            atoms.extend(_Atom(origin, replace(unit, text=p)) for p in parts)
            continue
        # Sentences of one long cue get times by their share of its characters. A single
        # sentence longer than max_seconds stays whole: cutting it would not find it better.
        total, done = sum(len(p) for p in parts), 0
        for p in parts:
            a = start + (end - start) * done / total
            done += len(p)
            b = end if done == total else start + (end - start) * done / total
            atoms.append(_Atom(origin, replace(unit, text=p, start_s=a, end_s=b)))
    return atoms


def _size(atoms: Sequence[_Atom], window: Sequence[int], timed: bool) -> float:
    """A window's length in seconds (media) or characters (text)."""
    if timed:
        first, last = atoms[window[0]].unit, atoms[window[-1]].unit
        assert first.start_s is not None and last.end_s is not None
        return last.end_s - first.start_s
    return sum(len(atoms[k].unit.text) for k in window)


def _fits(atoms: Sequence[_Atom], window: Sequence[int], timed: bool, cfg: ChunkConfig) -> bool:
    chars = sum(len(atoms[k].unit.text) for k in window)
    return chars <= cfg.max_chars and (not timed or _size(atoms, window, True) <= cfg.max_seconds)


def _cut(
    atoms: Sequence[_Atom],
    window: list[int],
    nxt: int,
    first_new: int,
    timed: bool,
    cfg: ChunkConfig,
) -> int:
    """Where a full window should end: the index the next window's new atoms start at."""
    half = (cfg.max_seconds if timed else cfg.max_chars) / 2
    tests = (
        lambda k: atoms[k].unit.speaker != atoms[k - 1].unit.speaker,
        lambda k: ends_sentence(atoms[k - 1].unit.text),
    )
    for test in tests:
        for k in range(nxt, first_new, -1):  # keep at least one new atom
            if k < nxt and _size(atoms, [m for m in window if m < k], timed) < half:
                break
            if test(k):
                return k
    return nxt


def _overlap(
    atoms: Sequence[_Atom], window: list[int], timed: bool, config: ChunkConfig
) -> list[int]:
    """The window's last atoms that fit the overlap budget, to repeat at the next start."""
    end = atoms[window[-1]].unit.end_s
    kept: list[int] = []
    chars = 0
    for k in reversed(window[1:]):  # never the whole window
        unit = atoms[k].unit
        chars += len(unit.text)
        if timed:
            assert end is not None and unit.start_s is not None
            ok = end - unit.start_s <= config.overlap_seconds
        else:
            ok = chars <= config.overlap_chars
        if not ok:
            break
        kept.insert(0, k)
    return kept


def _windows(atoms: Sequence[_Atom], timed: bool, config: ChunkConfig) -> list[list[int]]:
    windows: list[list[int]] = []
    overlap: list[int] = []
    i = 0
    while i < len(atoms):
        window = [*overlap, i]
        while len(window) > 1 and not _fits(atoms, window, timed, config):
            window.pop(0)  # the overlap must leave room for something new
        nxt = i + 1
        while nxt < len(atoms) and _fits(atoms, [*window, nxt], timed, config):
            window.append(nxt)
            nxt += 1
        if nxt < len(atoms):
            nxt = _cut(atoms, window, nxt, i, timed, config)
            window = [k for k in window if k < nxt]
        windows.append(window)
        overlap = _overlap(atoms, window, timed, config)
        i = nxt
    return windows


def _render(atoms: Sequence[_Atom], timed: bool) -> tuple[str, tuple[Mark, ...]]:
    """A window's text, with several speakers each turn labelled ``John: ...``; and for
    media, a mark where each cue's text begins (so every sentence keeps its second)."""
    label = len({a.unit.speaker for a in atoms}) > 1
    parts: list[str] = []
    marks: list[Mark] = []
    length = 0
    for n, (origin, unit) in enumerate(atoms):
        prev = atoms[n - 1] if n else None
        sep = ""
        if label and (prev is None or prev.unit.speaker != unit.speaker):
            sep = ("\n" if prev else "") + (f"{unit.speaker}: " if unit.speaker else "")
        elif prev is not None:
            # Cues are fragments of speech; separate paragraphs stay on their own lines.
            sep = " " if timed or prev.origin == origin else "\n"
        length += len(sep)
        if timed and unit.start_s is not None and unit.end_s is not None:
            marks.append(Mark(length, unit.start_s, max(unit.start_s, unit.end_s)))
        parts.append(sep + unit.text)
        length += len(unit.text)
    return "".join(parts), tuple(marks)


def _unique(items: Iterable[str | None]) -> tuple[str, ...]:
    """The non-empty items in order of first appearance."""
    return tuple(dict.fromkeys(i for i in items if i))


def _place(u: Unit) -> tuple[int | None, str | None, int | None, str | None, str | None]:
    """Where a unit sits; windows never span two places."""
    return (u.page, u.heading, u.lesson, u.lesson_title, u.lesson_url)


def chunk(
    units: Sequence[Unit], source_id: str, config: ChunkConfig | None = None
) -> list[Segment]:
    """Cut a reader's units into segments numbered 0..n-1 in order."""
    config = config or ChunkConfig()
    segments: list[Segment] = []
    kept = [u for u in units if u.text.strip()]
    for _, group in groupby(kept, key=_place):
        members = list(group)
        timed = all(u.start_s is not None and u.end_s is not None for u in members)
        atoms = _atoms(members, timed, config)
        for window in _windows(atoms, timed, config):
            picked = [atoms[k] for k in window]
            first = picked[0].unit
            text, marks = _render(picked, timed)
            segments.append(
                Segment(
                    source_id=source_id,
                    position=len(segments),
                    text=text,
                    # min/max, not first/last: a window never ends before it starts.
                    start_s=min(a.unit.start_s or 0.0 for a in picked) if timed else None,
                    end_s=max(a.unit.end_s or 0.0 for a in picked) if timed else None,
                    speakers=_unique(a.unit.speaker for a in picked),
                    page=first.page,
                    heading=first.heading,
                    lesson=first.lesson,
                    lesson_title=first.lesson_title,
                    lesson_url=first.lesson_url,
                    marks=marks,
                )
            )
    return segments


def unique_speakers(segments: Iterable[Segment]) -> tuple[str, ...]:
    """Every speaker of ``segments`` in order of first appearance."""
    return _unique(s for seg in segments for s in seg.speakers)
