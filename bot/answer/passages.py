"""From search hits to the numbered sources Claude reads.

1. Widen: each hit gets its neighbouring windows (one ``Archive.transcript`` page per
   cluster of nearby hits; ``Archive.neighbours`` where that does not fit).
2. Merge: windows of one source that overlap or touch become one passage (at most three
   windows). Windows repeat their predecessor's last sentences (chunk overlap), so the
   repeat is dropped.
3. Budget: passages are taken best first until the token budget (chars / 4) is spent.
4. Order: grouped by recording (oldest recording first), in time order within one.

Every sentence keeps the second it is said (``bot.cite.sentences``, from the windows'
marks), so a passage's time range starts at its first sentence, the sources Claude reads
are timed per turn, and a citation can later be resolved to the one sentence it relies
on (``bot.cite.align``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

from bot.cite.citations import number_sources
from bot.cite.sentences import (
    Sentence,
    merge_sentences,
    render,
    render_marked,
    sentences_of,
    timed_lines,
)
from bot.errors import InvalidInput
from bot.models import NumberedSource
from retrieval.archive import Archive
from retrieval.links.links import segment_link
from retrieval.models import Hit, Segment, Source

CHARS_PER_TOKEN = 4
MAX_CLUSTER = 30  # hits of one source further apart than this are fetched separately
_HEADER_CHARS = 120  # "[n] 12:14-13:20 · speakers" and the recording header, roughly


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
        """The passage as one Hit: its time runs from its first sentence to its last
        window's end, its marks keep every cue's second, its speakers are everyone who
        talks in it (most words first)."""
        anchor, last = self.anchor, self.windows[-1]
        kept = self.sentences
        if text is not None:  # cut to the budget: keep the sentences that survived
            kept = _prefix(self.sentences, text)
        body, marks = render_marked(kept)
        talk: dict[str, int] = {}
        for sentence in kept:
            if sentence.speaker:
                talk[sentence.speaker] = talk.get(sentence.speaker, 0) + len(sentence.text)
        speakers = tuple(sorted(talk, key=lambda name: -talk[name])) or anchor.segment.speakers
        first = next((x.start_s for x in kept if x.start_s is not None), None)
        timed_media = anchor.segment.start_s is not None
        seg = Segment(
            source_id=self.source.id,
            position=anchor.segment.position,
            text=body if text is None or kept else text,
            start_s=(first if first is not None else anchor.segment.start_s)
            if timed_media
            else None,
            end_s=last.segment.end_s if timed_media else None,
            speakers=speakers,
            page=anchor.segment.page,
            heading=anchor.segment.heading,
            lesson=anchor.segment.lesson,
            lesson_title=anchor.segment.lesson_title,
            lesson_url=anchor.segment.lesson_url,
            marks=marks if timed_media else (),
        )
        return Hit(
            id=anchor.id,
            segment=seg,
            source=self.source,
            score=self.score,
            link=segment_link(self.source, seg),
        )


def _prefix(sentences: Sequence[Sentence], text: str) -> tuple[Sentence, ...]:
    """The leading sentences whose words all made it into ``text`` (a budget cut)."""
    kept: list[Sentence] = []
    cursor = 0
    for s in sentences:
        at = text.find(s.text, cursor)
        if at < 0:
            break
        kept.append(s)
        cursor = at + len(s.text)
    return tuple(kept)


def timed_text(seg: Segment) -> str:
    """A recording's text as Claude reads it (``timed_lines``); text without seconds comes
    back as it is."""
    if seg.start_s is None:
        return seg.text
    return timed_lines(sentences_of(seg)) or seg.text


async def widen(archive: Archive, hits: Sequence[Hit], around: int = 1) -> list[Hit]:
    """The hits and the windows ``around`` them.

    Windows are numbered 0..n-1 in each source, so the windows near a cluster of hits
    come back in one ``Archive.transcript`` page (one query, where ``neighbours`` costs
    two per hit); a hit whose position is not where expected falls back to
    ``Archive.neighbours``, and a window that vanished keeps just the hit."""
    if around <= 0 or not hits:
        return list(hits)
    positions: dict[str, list[int]] = {}
    # A turn, topic or summary is a whole passage already (``merge``): only windows widen.
    hits = [h for h in hits if h.segment.level == "window"]
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
    close to everything in it; a longer run is cut into several passages. A turn, topic or
    summary hit is a passage of its own, as found."""
    scores = {h.id: h.score for h in hits}
    by_source: dict[str, dict[int, Hit]] = {}
    sources: dict[str, Source] = {}
    passages: list[Passage] = [
        Passage(h.source, (h,), frozenset([h.id]), h.score, tuple(sentences_of(h.segment)))
        for h in hits
        if h.segment.level != "window"
    ]
    for w in [*hits, *windows]:
        if w.segment.level != "window":
            continue
        by_source.setdefault(w.source.id, {}).setdefault(w.segment.position, w)
        # The search hit's Source is as complete as any; keep the first one seen.
        sources.setdefault(w.source.id, w.source)
    for source_id, by_pos in by_source.items():
        run: list[Hit] = []
        for pos in sorted(by_pos):
            # A passage stays in one place (page, section, lesson): its citation names one.
            if run and (
                pos > run[-1].segment.position + 1
                or len(run) >= max_windows
                or _place(by_pos[pos].segment) != _place(run[-1].segment)
            ):
                passages.extend(_passage(sources[source_id], run, scores))
                run = []
            run.append(by_pos[pos])
        passages.extend(_passage(sources[source_id], run, scores))
    passages.sort(key=lambda p: -p.score)
    return passages


def _place(seg: Segment) -> tuple[int | None, str | None, int | None]:
    return (seg.page, seg.heading, seg.lesson)


def _passage(source: Source, run: list[Hit], scores: dict[str, float]) -> list[Passage]:
    matched = frozenset(w.id for w in run if w.id in scores)
    if not matched:
        return []
    acc: list[Sentence] = []
    for w in run:
        merge_sentences(acc, sentences_of(w.segment))
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
