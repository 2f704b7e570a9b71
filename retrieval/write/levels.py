"""A source at several resolutions, each unit with its exact seconds (or page).

- **turns**: one speaker's contiguous speech, split when long (a document's paragraphs);
  cut by the chunker itself from the reader's units, so marks and times stay exact.
- **windows**: the chunker's windows (``retrieval.write.chunking``), unchanged.
- **topics**: consecutive windows grouped where the subject changes, by TextTiling over
  the window vectors already computed (depth of the similarity valleys between adjacent
  windows); a document's topics are its sections and pages, split the same way when long.
  A topic's vector is the mean of its windows' vectors: nothing is encoded twice.
- **summary**: the whole source (``retrieval.write.summary``).

A turn shares the vector of the window that holds most of it (its own words are what
keyword search sees), so adding turns costs no encoding either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from itertools import groupby

import numpy as np

from retrieval.models import Mark, Segment, Source
from retrieval.search.stems import stemmed
from retrieval.write.chunking import ChunkConfig, Unit, chunk

TURN = ChunkConfig(max_seconds=45, overlap_seconds=0, max_chars=900, overlap_chars=0)
MIN_TURN_WORDS = 4  # "Yeah." and "Okay." are in their windows; alone they match nothing
TOPIC_MIN_WINDOWS = 3
TOPIC_MAX_WINDOWS = 6
TILING_BLOCK = 2  # windows compared on each side of a gap


def _place(u: Unit) -> tuple[int | None, str | None, int | None]:
    return (u.page, u.heading, u.lesson)


def turns(units: Sequence[Unit], source_id: str) -> list[Segment]:
    """One speaker's contiguous speech (timed units) or one paragraph (text), cut by the
    chunker when long; numbered 0.. in order."""
    kept = [u for u in units if u.text.strip()]
    runs: list[list[Unit]] = []
    timed = all(u.start_s is not None and u.end_s is not None for u in kept)
    for _, group in groupby(kept, key=lambda u: (_place(u), u.speaker if timed else id(u))):
        runs.append(list(group))
    out: list[Segment] = []
    for run in runs:
        for seg in chunk(run, source_id, TURN):
            out.append(replace(seg, position=len(out), level="turn"))
    return out


def searchable(segments: Sequence[Segment]) -> list[Segment]:
    """The turns worth a unit of their own (a few words at least)."""
    kept = [s for s in segments if len(s.text.split()) >= MIN_TURN_WORDS]
    return [replace(s, position=n) for n, s in enumerate(kept)]


def mean_vector(vectors: Sequence[Sequence[float]]) -> list[float]:
    """The normalised mean of some unit vectors (a cosine centroid)."""
    total = np.asarray(vectors, dtype=np.float64).sum(axis=0)
    norm = float(np.linalg.norm(total)) or 1.0
    return [float(x) for x in total / norm]


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine of two unit vectors."""
    return float(np.dot(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)))


def boundaries(vectors: Sequence[Sequence[float]]) -> list[int]:
    """Where topics start (window indices after the first), by TextTiling on vectors.

    Each gap between windows scores the similarity of the ``TILING_BLOCK`` windows before
    it to those after; a gap's depth is how far it sits below the peaks on either side.
    The deepest gaps become boundaries (deeper than the mean depth less half a standard
    deviation, as in Hearst's TextTiling) while every topic keeps ``TOPIC_MIN_WINDOWS``;
    a topic longer than ``TOPIC_MAX_WINDOWS`` is then split at its deepest gaps."""
    n = len(vectors)
    if n < 2 * TOPIC_MIN_WINDOWS:
        return []
    sims = []
    for gap in range(1, n):
        left = vectors[max(0, gap - TILING_BLOCK) : gap]
        right = vectors[gap : gap + TILING_BLOCK]
        sims.append(dot(mean_vector(left), mean_vector(right)))
    depth = []
    for i, s in enumerate(sims):
        lo = hi = s
        for j in range(i - 1, -1, -1):
            if sims[j] < lo:
                break
            lo = sims[j]
        for j in range(i + 1, len(sims)):
            if sims[j] < hi:
                break
            hi = sims[j]
        depth.append((lo - s) + (hi - s))
    mean = sum(depth) / len(depth)
    std = math.sqrt(sum((d - mean) ** 2 for d in depth) / len(depth))
    cut = mean - std / 2
    chosen: list[int] = []

    def fits(gap: int) -> bool:
        edges = sorted([0, n, *chosen])
        for a, b in zip(edges, edges[1:], strict=False):
            if a < gap < b:
                return gap - a >= TOPIC_MIN_WINDOWS and b - gap >= TOPIC_MIN_WINDOWS
        return False

    order = sorted(range(len(sims)), key=lambda i: -depth[i])
    for i in order:
        if depth[i] > cut and depth[i] > 0 and fits(i + 1):
            chosen.append(i + 1)
    for i in order:  # then no topic longer than the maximum
        edges = sorted([0, n, *chosen])
        if any(b - a > TOPIC_MAX_WINDOWS for a, b in zip(edges, edges[1:], strict=False)):
            gap = i + 1
            for a, b in zip(edges, edges[1:], strict=False):
                if a < gap < b and b - a > TOPIC_MAX_WINDOWS and fits(gap):
                    chosen.append(gap)
    return sorted(chosen)


def _render_turns(parts: Sequence[Segment]) -> tuple[str, tuple[Mark, ...]]:
    """Turns as one text, each on its own line with its speaker; marks shifted along."""
    label = len({p.speaker for p in parts}) > 1
    text = ""
    marks: list[Mark] = []
    for p in parts:
        if text:
            text += "\n"
        if label and p.speaker and not p.text.startswith(f"{p.speaker}: "):
            text += f"{p.speaker}: "
        marks.extend(replace(m, at=m.at + len(text)) for m in p.marks)
        text += p.text
    return text, tuple(marks)


def _join_text(windows: Sequence[Segment]) -> str:
    """Untimed windows as one text, without the sentences each repeats of the last."""
    text = windows[0].text
    for w in windows[1:]:
        nxt = w.text
        cut = 0
        for size in range(min(len(text), len(nxt), 600), 0, -1):
            if text.endswith(nxt[:size]):
                cut = size
                break
        rest = nxt[cut:].strip()
        if rest:
            text += "\n" + rest
    return text


def _topic(
    windows: Sequence[Segment], parts: Sequence[Segment], source_id: str, position: int
) -> Segment:
    first = windows[0]
    if parts and all(p.start_s is not None for p in parts):
        text, marks = _render_turns(parts)
    else:
        text, marks = _join_text(windows), ()
    timed = first.start_s is not None
    return Segment(
        source_id=source_id,
        position=position,
        text=text,
        start_s=min(w.start_s or 0.0 for w in windows) if timed else None,
        end_s=max(w.end_s or 0.0 for w in windows) if timed else None,
        speakers=tuple(dict.fromkeys(s for w in windows for s in w.speakers)),
        page=first.page,
        heading=first.heading,
        lesson=first.lesson,
        lesson_title=first.lesson_title,
        lesson_url=first.lesson_url,
        marks=marks,
        level="topic",
    )


def topics(
    windows: Sequence[Segment], vectors: Sequence[Sequence[float]], all_turns: Sequence[Segment]
) -> tuple[list[Segment], list[list[float]]]:
    """Topics of a source and their vectors, from its windows, window vectors and turns."""
    found: list[Segment] = []
    found_vectors: list[list[float]] = []
    index = list(range(len(windows)))
    for _, group in groupby(index, key=lambda i: _seg_place(windows[i])):
        members = list(group)
        cuts = [0, *boundaries([vectors[i] for i in members]), len(members)]
        for a, b in zip(cuts, cuts[1:], strict=False):
            chosen = [windows[members[k]] for k in range(a, b)]
            start = chosen[0].start_s
            # A topic owns the turns that start inside it: from where its first window's
            # new speech begins (the last window before it ends) to where its own last
            # window ends.
            lo = windows[members[a] - 1].end_s if members[a] > 0 else None
            hi = chosen[-1].end_s if b < len(members) else None
            parts = []
            if start is not None:
                parts = [
                    t
                    for t in all_turns
                    if t.start_s is not None
                    and _seg_place(t) == _seg_place(chosen[0])
                    and (lo is None or t.start_s >= lo)
                    and (hi is None or t.start_s < hi)
                ]
            found.append(_topic(chosen, parts, chosen[0].source_id, len(found)))
            found_vectors.append(mean_vector([vectors[members[k]] for k in range(a, b)]))
    return found, found_vectors


def _seg_place(s: Segment) -> tuple[int | None, str | None, int | None]:
    return (s.page, s.heading, s.lesson)


def turn_vectors(
    the_turns: Sequence[Segment], windows: Sequence[Segment], vectors: Sequence[Sequence[float]]
) -> list[list[float]]:
    """Each turn's vector: that of the window sharing most of its time (media) or holding
    its first words (text)."""
    out: list[list[float]] = []
    w = 0
    for t in the_turns:
        best = min(w, len(windows) - 1)
        if t.start_s is not None and t.end_s is not None:
            score = -1.0
            for k in range(max(0, w - 2), len(windows)):
                ws, we = windows[k].start_s, windows[k].end_s
                if ws is None or we is None:
                    continue
                if ws > t.end_s:
                    break
                overlap = min(we, t.end_s) - max(ws, t.start_s)
                if overlap > score:
                    score, best = overlap, k
        else:
            head = t.text[:60]
            for k in range(max(0, w - 1), len(windows)):
                if head in windows[k].text:
                    best = k
                    break
        w = best
        out.append(list(vectors[best]))
    return out


def context(source: Source, seg: Segment) -> str:
    """What a unit is part of, for keyword search: its source's title, its speakers and
    its section heading, then the stems of its words and of all those (``retrieval.search.stems``:
    a question is asked as stems, so "Marcus rollback" needs Marcus's stem too); the
    displayed text stays as said."""
    parts = [source.title, ", ".join(seg.speakers), seg.heading or "", seg.lesson_title or ""]
    label = " | ".join(p for p in parts if p)
    extra = stemmed(" ".join([seg.text, *parts]))
    return f"{label} {extra}" if label and extra else label or extra
