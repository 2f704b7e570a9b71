"""Plain-text transcripts: ``[hh:mm:ss] Speaker: text``, ``[mm:ss] Speaker: text``,
``Speaker: text``, or Otter-style ``Speaker  0:03`` lines above the words.

Lines that start no new turn continue the previous one. A turn ends where the next
begins, or earlier if its words could not fill the gap; the last one's end is estimated
from its length.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from retrieval.ingest.cues import looks_like_name, parse_clock, split_speaker
from retrieval.write.chunking import Unit

_STAMPED = re.compile(r"\[(\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d{1,3})?)\]\s*(.*)")
_OTTER = re.compile(r"(.{1,40}?)\s+(\d{1,2}:\d{2}(?::\d{2})?)")
_WORDS_PER_SECOND = 2.5  # ordinary speech, ~150 words a minute
_SLOWEST_WORDS_PER_SECOND = 1.25  # slower than this, the rest of the gap is a pause


@dataclass
class _Turn:
    speaker: str | None
    start: float | None
    lines: list[str] = field(default_factory=list)


def _turns(text: str) -> list[_Turn]:
    turns: list[_Turn] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        last = turns[-1].speaker if turns else None
        if stamped := _STAMPED.fullmatch(line):
            speaker, said = split_speaker(stamped[2], brackets=False)
            # A stamped line without a name is the same speaker going on.
            turns.append(_Turn(speaker or last, parse_clock(stamped[1]), [said]))
        elif (otter := _OTTER.fullmatch(line)) and looks_like_name(otter[1]):
            turns.append(_Turn(otter[1], parse_clock(otter[2])))
        elif (named := split_speaker(line, brackets=False))[0] is not None:
            turns.append(_Turn(named[0], None, [named[1]]))
        elif turns:
            turns[-1].lines.append(line)
        else:
            turns.append(_Turn(None, None, [line]))
    return [t for t in turns if any(t.lines)]


def read_transcript(text: str, path: Path) -> list[Unit]:
    """One unit per turn; timed when any line carries a time."""
    turns = _turns(text)
    if all(t.start is None for t in turns):
        return [Unit(" ".join(t.lines), speaker=t.speaker) for t in turns]
    # A turn without a time starts with the one before it.
    starts: list[float] = []
    for turn in turns:
        starts.append(turn.start if turn.start is not None else (starts[-1] if starts else 0.0))
    units: list[Unit] = []
    for n, turn in enumerate(turns):
        said = " ".join(turn.lines)
        words = len(said.split())
        later = [s for s in starts[n + 1 :] if s > starts[n]]
        if later:  # a turn lasts until the next, unless that is a break, not speech
            end = min(later[0], starts[n] + max(1.0, words / _SLOWEST_WORDS_PER_SECOND))
        else:
            end = starts[n] + max(1.0, words / _WORDS_PER_SECOND)
        units.append(Unit(said, starts[n], end, turn.speaker))
    return units
