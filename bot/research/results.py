"""Deep research's results as Claude reads them: each passage a tool returns gets one
``[n]`` for the whole research run (``Registry``), so an answer written after several steps
cites every moment by its own number; results are capped in passages and characters.
``render_draft`` numbers a call's passages in the order Claude made the calls, so
numbering never depends on which query finished first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bot.cite.citations import label_for
from bot.cite.sentences import merge_sentences, render, sentences_of, timed_lines
from bot.models import NumberedSource
from retrieval.models import Hit

CHARS_PER_PASSAGE = 1500
CHARS_PER_RESULT = 12_000
MAX_PASSAGES_PER_RESULT = 20
_HEAD_CHARS = 100  # "[n] Title @ 12:14 (2024-01-23) — Speaker: ", roughly


# --- numbering ----------------------------------------------------------------------------


class Registry:
    """One ``[n]`` per passage for the whole research run, in order of first appearance."""

    def __init__(self) -> None:
        self._by_id: dict[str, NumberedSource] = {}
        self._by_n: dict[int, NumberedSource] = {}

    def number(self, hit: Hit) -> tuple[NumberedSource, bool]:
        """The passage's number, and True when it is new."""
        known = self._by_id.get(hit.id)
        if known is not None:
            return known, False
        ns = NumberedSource(n=len(self._by_id) + 1, hit=hit, label=label_for(hit))
        self._by_id[hit.id] = ns
        self._by_n[ns.n] = ns
        return ns, True

    def get(self, n: int) -> NumberedSource | None:
        """The passage numbered ``n``, if any."""
        return self._by_n.get(n)

    @property
    def sources(self) -> tuple[NumberedSource, ...]:
        """Every numbered passage, by number."""
        return tuple(self._by_n.values())

    def __len__(self) -> int:
        return len(self._by_id)


# --- results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Item:
    """A passage to show: its hit, the text to show for it, and its one speaker if the
    text has a single one (several speakers are labelled in the text itself)."""

    hit: Hit
    text: str
    dated: bool = True
    speaker: str | None = None


Draft = list[str | Item]


def cap(text: str, limit: int = CHARS_PER_PASSAGE) -> str:
    text = text.strip()
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def _drop_repeat(before: str, text: str, most: int = 600) -> str:
    """``text`` without the start it repeats from the end of ``before``."""
    for k in range(min(len(before), len(text), most), 20, -1):
        if text.startswith(before[-k:]):
            return text[k:].lstrip() or text
    return text


def window_items(windows: Sequence[Hit], *, dated: bool = True) -> list[Item]:
    """Windows as passages; consecutive windows of a source without the sentences each
    repeats from the one before it (chunk overlap)."""
    items: list[Item] = []
    prev: Hit | None = None
    for w in windows:
        seg = w.segment
        speaker: str | None = None
        follows = (
            prev is not None
            and prev.source.id == w.source.id
            and prev.segment.position + 1 == seg.position
            and prev.segment.level == seg.level
        )
        if seg.start_s is None and not seg.speakers:
            # A document keeps its own line breaks; its windows overlap by characters.
            text = _drop_repeat(prev.segment.text, seg.text) if prev and follows else seg.text
        else:
            sentences = sentences_of(seg)
            if prev and follows:
                acc = sentences_of(prev.segment)
                shared = len(acc)
                merge_sentences(acc, sentences)
                sentences = acc[shared:] or sentences
            who = {s.speaker for s in sentences}
            speaker = who.pop() if len(who) == 1 and seg.start_s is None else None
            text = (timed_lines(sentences) if seg.start_s is not None else "") or render(sentences)
            text = text or seg.text
        items.append(Item(w, cap(text), dated, speaker))
        prev = w
    return items


def format_item(ns: NumberedSource, item: Item, seen: bool) -> str:
    """``[n] Title @ 12:14 (2024-01-23) — Speaker: text``."""
    hit = item.hit
    head = f"[{ns.n}] {ns.label}"
    if item.dated and hit.source.recorded_at:
        head += f" ({hit.source.recorded_at.isoformat()})"
    if seen:
        return f"{head} (already shown above)"
    if item.speaker:
        return f"{head} \u2014 {item.speaker}: {item.text}"
    return f"{head}:\n{item.text}"


def fits(items: Sequence[Item], budget: int = CHARS_PER_RESULT) -> int:
    """How many of ``items`` fit in a result of ``budget`` characters (at least one)."""
    used = 0
    for i, item in enumerate(items[:MAX_PASSAGES_PER_RESULT]):
        used += len(item.text) + _HEAD_CHARS
        if used > budget and i > 0:
            return i
    return min(len(items), MAX_PASSAGES_PER_RESULT)


def render_draft(draft: Draft, registry: Registry) -> tuple[str, tuple[int, ...]]:
    """The result text, numbering its passages; and the numbers it shows."""
    lines: list[str] = []
    numbers: list[int] = []
    for part in draft:
        if isinstance(part, str):
            lines.append(part)
            continue
        ns, new = registry.number(part.hit)
        if ns.n in numbers:
            continue
        numbers.append(ns.n)
        lines.append(format_item(ns, part, seen=not new))
    return cap("\n".join(lines), CHARS_PER_RESULT + 2000), tuple(numbers)
