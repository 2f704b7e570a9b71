"""SRT subtitles; a cue starting ``Name:`` or ``[Name]`` names its speaker."""

from __future__ import annotations

import re
from pathlib import Path

from retrieval.errors import IngestError
from retrieval.ingest.cues import blocks, clean, in_time_order, parse_clock, split_speaker
from retrieval.ingest.metadata import shown
from retrieval.write.chunking import Unit

_TIMING = re.compile(r"\s*(\S+)\s*-->\s*(\S+)")


def read_srt(text: str, path: Path) -> list[Unit]:
    """The cues of an SRT file, in order."""
    units: list[Unit] = []
    speaker: str | None = None
    for line_no, lines in blocks(text):
        timing = next((n for n, line in enumerate(lines[:2]) if "-->" in line), None)
        if timing is None:
            continue
        match = _TIMING.match(lines[timing])
        start = parse_clock(match[1]) if match else None
        end = parse_clock(match[2]) if match else None
        if start is None or end is None:
            raise IngestError(
                str(path), f"line {line_no + timing}: bad cue timing {shown(lines[timing])}"
            )
        named, said = split_speaker(clean(" ".join(lines[timing + 1 :])))
        # Subtitles name a speaker when the turn starts; unnamed cues continue it.
        speaker = named or speaker
        if said:
            units.append(Unit(said, start, max(start, end), speaker))
    if not units:
        raise IngestError(
            str(path), "no subtitle cues found (expected '00:00:01,000 --> 00:00:04,000' lines)"
        )
    return in_time_order(units)
