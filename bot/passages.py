"""From search hits to the numbered sources Claude reads.

1. Widen: each hit gets its neighbouring windows (one ``Archive.transcript`` page per
   cluster of nearby hits; ``Archive.neighbours`` where that does not fit).
2. Merge: windows of one source that overlap or touch become one passage (at most three
   windows). Windows repeat their predecessor's last sentences (chunk overlap), so the
   repeat is dropped.
3. Budget: passages are taken best first until the token budget (chars / 4) is spent.
4. Order: grouped by recording (oldest recording first), in time order within one.

A passage's time (and so its link) is where its first *matching* window starts; the
window before it is context for Claude, not where the user should land.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date

from bot.citations import number_sources
from bot.errors import InvalidInput
from bot.models import NumberedSource
from retrieval.archive import Archive
from retrieval.chunking import split_sentences
from retrieval.links import segment_link
from retrieval.models import Hit, Segment, Source

CHARS_PER_TOKEN = 4
MAX_CLUSTER = 30  # hits of one source further apart than this are fetched separately
_HEADER_CHARS = 120  # "[n] 12:14-13:20 · speakers" and the recording header, roughly


@dataclass(frozen=True)
class Sentence:
    """One sentence of a passage, who said it, and (for recordings) about when."""

    speaker: str | None
    text: str
    start_s: float | None = None


@dataclass(frozen=True)
class Passage:
    """Consecutive windows of one source, around one or more search hits."""

    source: Source
    windows: tuple[Hit, ...]
    matched: frozenset[str]
    score: float
    sentences: tuple[Sentence, ...]

    @property
    def anchor(self) -> Hit:
        """The first window that the search matched."""
        return next(w for w in self.windows if w.id in self.matched)

    @property
    def text(self) -> str:
        """The passage text, ``Speaker: ...`` per turn when several people speak."""
        return render(self.sentences)

    def as_hit(self, text: str | None = None) -> Hit:
        """The passage as one Hit: anchored at its first match, ending with its last window."""
        anchor, last = self.anchor, self.windows[-1]
        # Whoever says most in the anchor window first: the citation names them.
        talk: dict[str, int] = {}
        for s in sentences_of(anchor.segment):
            if s.speaker:
                talk[s.speaker] = talk.get(s.speaker, 0) + len(s.text)
        main = sorted(talk, key=lambda name: -talk[name])
        spoken = (s.speaker for s in self.sentences if s.speaker)
        speakers = tuple(dict.fromkeys([*main, *anchor.segment.speakers, *spoken]))
        seg = Segment(
            source_id=self.source.id,
            position=anchor.segment.position,
            text=self.text if text is None else text,
            start_s=anchor.segment.start_s,
            end_s=last.segment.end_s if anchor.segment.start_s is not None else None,
            speakers=speakers or anchor.segment.speakers,
            page=anchor.segment.page,
            heading=anchor.segment.heading,
            lesson=anchor.segment.lesson,
            lesson_title=anchor.segment.lesson_title,
            lesson_url=anchor.segment.lesson_url,
        )
        return Hit(
            id=anchor.id,
            segment=seg,
            source=self.source,
            score=self.score,
            link=segment_link(self.source, seg),
        )


def sentences_of(seg: Segment) -> list[Sentence]:
    """A window's sentences with their speakers (``Name: `` labels are read and removed)."""
    known = sorted(seg.speakers, key=len, reverse=True)
    current = seg.speakers[0] if len(seg.speakers) == 1 else None
    out: list[Sentence] = []
    for line in seg.text.splitlines():
        line = line.strip()
        if not line:
            continue
        for name in known:
            if line.startswith(f"{name}:"):
                current, line = name, line[len(name) + 1 :].strip()
                break
        out.extend(Sentence(current, s) for s in split_sentences(line) if s.strip())
    return out


LEAD_IN_S = 2.0  # a quote's link starts a little early, so the listener hears it begin


def timed(seg: Segment, sentences: Sequence[Sentence]) -> list[Sentence]:
    """Estimate when each sentence of a recording's window starts: the window's time
    spread over its text by character position (speech runs at a roughly even pace)."""
    if seg.start_s is None or seg.end_s is None or not seg.text:
        return list(sentences)
    span, length, cursor = seg.end_s - seg.start_s, len(seg.text), 0
    out = []
    for s in sentences:
        at = seg.text.find(s.text, cursor)
        if at < 0:
            at = cursor
        cursor = at + len(s.text)
        estimate = seg.start_s + span * at / length - LEAD_IN_S
        out.append(replace(s, start_s=max(seg.start_s, estimate)))
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
    labelled = len({s.speaker for s in sentences}) > 1
    turns: list[str] = []
    prev: object = object()
    for s in sentences:
        if s.speaker != prev:
            label = f"{s.speaker}: " if labelled and s.speaker else ""
            turns.append(label + s.text)
            prev = s.speaker
        else:
            turns[-1] += " " + s.text
    return "\n".join(turns)


async def widen(archive: Archive, hits: Sequence[Hit], around: int = 1) -> list[Hit]:
    """The hits and the windows ``around`` them.

    Windows are numbered 0..n-1 in each source, so the windows near a cluster of hits
    come back in one ``Archive.transcript`` page (one query, where ``neighbours`` costs
    two per hit); a hit whose position is not where expected falls back to
    ``Archive.neighbours``, and a window that vanished keeps just the hit."""
    if around <= 0 or not hits:
        return list(hits)
    positions: dict[str, list[int]] = {}
    for h in hits:
        positions.setdefault(h.source.id, []).append(h.segment.position)
    clusters: list[tuple[str, int, int]] = []
    for source_id, found in positions.items():
        found.sort()
        lo = hi = found[0]
        for pos in found[1:]:
            if pos - hi <= 2 * around + 1 and pos - lo < MAX_CLUSTER:
                hi = pos
            else:
                clusters.append((source_id, lo, hi))
                lo = hi = pos
        clusters.append((source_id, lo, hi))

    async def page(source_id: str, lo: int, hi: int) -> list[Hit]:
        first, last = max(0, lo - around), hi + around
        rows = await archive.transcript(source_id, offset=first, limit=last - first + 1)
        return [w for w in rows if first <= w.segment.position <= last]

    pages = await asyncio.gather(*(page(*c) for c in clusters))
    windows = [w for rows in pages for w in rows]
    have = {(w.source.id, w.segment.position) for w in windows}
    missing = [h for h in hits if (h.source.id, h.segment.position) not in have]

    async def one(hit: Hit) -> list[Hit]:
        try:
            found = await archive.neighbours(hit.id, before=around, after=around)
        except InvalidInput:
            return [hit]
        return found or [hit]

    for group in await asyncio.gather(*(one(h) for h in missing)):
        windows.extend(group)
    return windows


def merge(hits: Sequence[Hit], windows: Sequence[Hit], max_windows: int = 3) -> list[Passage]:
    """Merge windows of a source that overlap or touch into passages, best first.

    A passage holds at most ``max_windows`` windows, so its link (its first match) stays
    close to everything in it; a longer run is cut into several passages."""
    scores = {h.id: h.score for h in hits}
    by_source: dict[str, dict[int, Hit]] = {}
    sources: dict[str, Source] = {}
    for w in [*hits, *windows]:
        by_source.setdefault(w.source.id, {}).setdefault(w.segment.position, w)
        # The search hit's Source is as complete as any; keep the first one seen.
        sources.setdefault(w.source.id, w.source)
    passages: list[Passage] = []
    for source_id, by_pos in by_source.items():
        run: list[Hit] = []
        for pos in sorted(by_pos):
            if run and (pos > run[-1].segment.position + 1 or len(run) >= max_windows):
                passages.extend(_passage(sources[source_id], run, scores))
                run = []
            run.append(by_pos[pos])
        passages.extend(_passage(sources[source_id], run, scores))
    passages.sort(key=lambda p: -p.score)
    return passages


def _passage(source: Source, run: list[Hit], scores: dict[str, float]) -> list[Passage]:
    matched = frozenset(w.id for w in run if w.id in scores)
    if not matched:
        return []
    acc: list[Sentence] = []
    for w in run:
        merge_sentences(acc, timed(w.segment, sentences_of(w.segment)))
    return [
        Passage(
            source=source,
            windows=tuple(run),
            matched=matched,
            score=max(scores[i] for i in matched),
            sentences=tuple(acc),
        )
    ]


def within_budget(passages: Sequence[Passage], token_budget: int) -> list[tuple[Passage, str]]:
    """Best passages first while they fit in the budget; the first is cut to fit if needed."""
    budget = token_budget * CHARS_PER_TOKEN
    picked: list[tuple[Passage, str]] = []
    used = 0
    for p in passages:
        text = p.text
        cost = len(text) + _HEADER_CHARS
        if used + cost > budget:
            if picked:
                continue
            text = text[: max(200, budget - _HEADER_CHARS)].rsplit(" ", 1)[0] + " ..."
            cost = len(text) + _HEADER_CHARS
        picked.append((p, text))
        used += cost
    return picked


def _order_key(item: tuple[Passage, str]) -> tuple[int, str, str, float, int]:
    p = item[0]
    seg = p.anchor.segment
    when = p.source.recorded_at or date.max
    place = seg.start_s if seg.start_s is not None else float(seg.page or 0)
    return (when.toordinal(), p.source.title, p.source.id, place, seg.position)


def assemble(
    passages: Sequence[Passage], token_budget: int
) -> list[tuple[NumberedSource, Passage]]:
    """Numbered sources within the budget, grouped by recording, in time order, each with
    its passage."""
    chosen = sorted(within_budget(passages, token_budget), key=_order_key)
    numbered = number_sources([p.as_hit(text) for p, text in chosen])
    return [(n, p) for n, (p, _) in zip(numbered, chosen, strict=True)]
