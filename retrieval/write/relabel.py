"""A source's speakers renamed or merged where they are stored, without reading the file
again (no second transcription).

Every live unit of the source is read back (windows, turns, topics, the summary), its
speaker labels rewritten, and the whole source written again under a new generation
(``Store.upsert_many``): a reader sees the old names or the new, never half of each.

- In windows and topics a turn is labelled ``Name: `` at the start of its line when the
  unit holds several speakers (``retrieval.chunking``'s rendering). A label is renamed; a
  merge joins a line to the one before it when both are now the same speaker, and a unit
  left with one speaker loses its labels, as the chunker would have written it.
- Adjacent turns (the "turn" level) of the same speaker after a merge become one turn
  when no one else spoke between them and the two fit a turn's size.
- The summary names people in its lines ("Speaker 2: restore drill by Tuesday", or a
  model's prose): each whole-word mention of a renamed label is replaced.

Windows are encoded again (a label is part of the text their vector is made of); the other
levels' vectors are derived from them as at ingest (``retrieval.levels``). Called only by
``bot/write.py``'s ``Writer.relabel``: the one write path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from retrieval.encoding.embed import Embedder
from retrieval.models import LEVELS, Document, Hit, Level, Mark, Segment, Source
from retrieval.store import Embedded, Store
from retrieval.write.levels import TURN, mean_vector, turn_vectors

PAGE = 200  # units read per request


@dataclass(frozen=True)
class Cue:
    """One stretch of speech as the windows hold it: who, when, what."""

    speaker: str | None
    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True)
class Stored:
    """Every live unit of one source, by level, and its record."""

    source: Source
    units: dict[Level, list[Hit]]

    @property
    def windows(self) -> list[Segment]:
        """The source's windows in order."""
        return [h.segment for h in self.units["window"]]


async def read_all(store: Store, kb: str, source: Source) -> Stored:
    """Every live unit of ``source`` at every level, in order."""
    units: dict[Level, list[Hit]] = {}
    for level in LEVELS:
        got: list[Hit] = []
        while True:
            page = await store.fetch_ordered(
                kb, source.id, offset=len(got), limit=PAGE, level=level
            )
            got += page
            if len(page) < PAGE:
                break
        units[level] = got
    return Stored(source, units)


def _label(line: str, speakers: Sequence[str]) -> str | None:
    """The speaker a line of a unit is labelled with, if it is."""
    for name in sorted(speakers, key=len, reverse=True):
        if line.startswith(f"{name}: "):
            return name
    return None


@dataclass(frozen=True)
class _Line:
    old_at: int  # where the body starts in the old text
    body: str
    speaker: str | None  # the label (mapped), or None for an unlabelled line
    labelled: bool


def _lines(seg: Segment) -> list[_Line]:
    out: list[_Line] = []
    at = 0
    for raw in seg.text.split("\n"):
        name = _label(raw, seg.speakers)
        cut = len(name) + 2 if name else 0
        out.append(_Line(at + cut, raw[cut:], name, name is not None))
        at += len(raw) + 1
    return out


def _shift(marks: Sequence[Mark], moved: Sequence[tuple[int, int, int]]) -> tuple[Mark, ...]:
    """Marks moved along with their line: ``moved`` holds (old start, old end, new start)
    of each body kept."""
    out: list[Mark] = []
    for m in marks:
        for old, end, new in moved:
            if old <= m.at <= end:
                out.append(replace(m, at=new + m.at - old))
                break
    return tuple(out)


def _mapped(speakers: Sequence[str], mapping: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(mapping.get(s, s) for s in speakers))


def relabel_unit(seg: Segment, mapping: Mapping[str, str]) -> Segment:
    """A window or topic with its speaker labels renamed, same-speaker lines joined and
    the labels dropped when one speaker is left (see the module docstring)."""
    if not seg.speakers or not any(s in mapping for s in seg.speakers):
        return seg
    lines = [replace(x, speaker=mapping.get(x.speaker or "", x.speaker)) for x in _lines(seg)]
    speakers = _mapped(seg.speakers, mapping)
    if not any(x.labelled for x in lines):  # one speaker: the text names no one
        return replace(seg, speakers=speakers)
    timed = seg.start_s is not None
    # Who speaks each line: an unlabelled line continues the one before (a paragraph of
    # the same turn), except in a timed unit, where a turn goes on in the same line.
    who: list[str | None] = []
    for x in lines:
        if x.labelled:
            who.append(x.speaker)
        else:
            who.append(who[-1] if who and not timed else None)
    single = len(set(who)) == 1 and who[0] is not None
    text = ""
    moved: list[tuple[int, int, int]] = []
    for n, x in enumerate(lines):
        joins = n > 0 and who[n] == who[n - 1] and x.labelled
        if n:
            text += " " if joins and timed else "\n"
        if x.labelled and not joins and not single:
            text += f"{x.speaker}: "
        moved.append((x.old_at, x.old_at + len(x.body), len(text)))
        text += x.body
    return replace(seg, text=text, speakers=speakers, marks=_shift(seg.marks, moved))


def _mention(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<!\w){re.escape(name)}(?!\w)")


def relabel_summary(seg: Segment, mapping: Mapping[str, str]) -> Segment:
    """The summary with each whole-word mention of a renamed speaker replaced, its marks
    moved along."""
    if not mapping:
        return seg
    pattern = re.compile("|".join(_mention(k).pattern for k in sorted(mapping, key=len)[::-1]))
    text = ""
    moved: list[tuple[int, int, int]] = []
    last = 0
    for found in pattern.finditer(seg.text):
        moved.append((last, found.start(), len(text)))
        text += seg.text[last : found.start()] + mapping[found.group(0)]
        last = found.end()
    moved.append((last, len(seg.text), len(text)))
    text += seg.text[last:]
    return replace(
        seg, text=text, speakers=_mapped(seg.speakers, mapping), marks=_shift(seg.marks, moved)
    )


def cues(windows: Sequence[Segment]) -> list[Cue]:
    """The timed speech the windows hold, each cue once (the overlap windows repeat is
    dropped), in order, each with its speaker."""
    seen: dict[tuple[float, float], Cue] = {}
    for w in windows:
        if not w.marks:
            continue
        lines = _lines(w)
        labelled = any(x.labelled for x in lines)
        bounds = [m.at for m in w.marks[1:]] + [len(w.text)]
        for mark, end in zip(w.marks, bounds, strict=True):
            line = next((x for x in reversed(lines) if x.old_at <= mark.at), None)
            if line is None:
                continue
            speaker = line.speaker if labelled else w.speaker
            upto = min(end, line.old_at + len(line.body))
            said = w.text[mark.at : upto].strip()
            if said and (mark.start_s, mark.end_s) not in seen:
                seen[(mark.start_s, mark.end_s)] = Cue(speaker, mark.start_s, mark.end_s, said)
    return sorted(seen.values(), key=lambda c: (c.start_s, c.end_s))


def join_turns(
    turns: Sequence[Segment], merged: set[str], starts: Sequence[float]
) -> list[Segment]:
    """Turns with each two adjacent ones of a merged speaker joined, when no one spoke in
    between (no cue starts there) and together they fit a turn; numbered again."""
    out: list[Segment] = []
    for t in turns:
        prev = out[-1] if out else None
        if (
            prev is not None
            and len(t.speakers) == 1
            and prev.speakers == t.speakers
            and t.speakers[0] in merged
            and prev.marks
            and t.start_s is not None
            and prev.start_s is not None
            and prev.end_s is not None
            and t.end_s is not None
            and not any(prev.marks[-1].start_s < s < t.start_s for s in starts)
            and max(prev.end_s, t.end_s) - prev.start_s <= TURN.max_seconds
            and len(prev.text) + 1 + len(t.text) <= TURN.max_chars
        ):
            shift = len(prev.text) + 1
            out[-1] = replace(
                prev,
                text=f"{prev.text} {t.text}",
                end_s=max(prev.end_s, t.end_s),
                marks=prev.marks + tuple(replace(m, at=m.at + shift) for m in t.marks),
            )
            continue
        out.append(t)
    return [replace(t, position=n) for n, t in enumerate(out)]


def _topic_vector(
    topic: Segment, windows: Sequence[Segment], vectors: Sequence[Sequence[float]]
) -> list[float]:
    """A topic's vector: the mean of its windows' (those inside its seconds, or holding
    its first words)."""
    inside = [
        v
        for w, v in zip(windows, vectors, strict=True)
        if topic.start_s is not None
        and topic.end_s is not None
        and w.start_s is not None
        and w.end_s is not None
        and topic.start_s <= w.start_s
        and w.end_s <= topic.end_s
    ]
    if not inside:
        head = topic.text[:60]
        inside = [v for w, v in zip(windows, vectors, strict=True) if head and head in w.text]
    return mean_vector(inside or vectors)


async def relabel(
    store: Store,
    embedder: Embedder,
    kb: str,
    stored: Stored,
    mapping: Mapping[str, str],
) -> Source:
    """Write ``stored`` again with its speakers renamed by ``mapping`` (label -> name; two
    labels onto one name merge them); the source as now stored."""
    source = replace(stored.source, speakers=_mapped(stored.source.speakers, mapping))
    windows = [relabel_unit(w, mapping) for w in stored.windows]
    # A merge: a label onto a name the source already has. Its turns may now join.
    targets = {v for k, v in mapping.items() if k != v and v in stored.source.speakers}
    turns = [relabel_unit(h.segment, mapping) for h in stored.units["turn"]]
    starts = [m.start_s for w in windows for m in w.marks]
    turns = join_turns(turns, targets, starts)
    topics = [relabel_unit(h.segment, mapping) for h in stored.units["topic"]]
    summary = [relabel_summary(h.segment, mapping) for h in stored.units["summary"]]
    vectors = await embedder.embed_documents([w.text for w in windows]) if windows else []
    level_vectors = turn_vectors(turns, windows, vectors) if windows else []
    level_vectors += [_topic_vector(t, windows, vectors) for t in topics]
    level_vectors += [mean_vector(vectors) for _ in summary]
    doc = Document(source, tuple(windows), tuple([*turns, *topics, *summary]))
    [result] = await store.upsert_many(kb, [Embedded(doc, vectors, level_vectors)])
    if isinstance(result, Exception):
        raise result
    return source
