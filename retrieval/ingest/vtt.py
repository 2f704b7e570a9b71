"""WebVTT subtitles, with speakers from ``<v Name>`` voice tags or ``Name:`` prefixes."""

from __future__ import annotations

import re
from pathlib import Path

from retrieval.errors import IngestError
from retrieval.ingest.cues import blocks, clean, in_time_order, parse_clock, split_speaker
from retrieval.ingest.metadata import shown
from retrieval.write.chunking import Unit

_VOICE = re.compile(r"<v(?:\.[^\s>]*)?\s+([^>]+)>")
_TIMING = re.compile(r"\s*(\S+)\s+-->\s+(\S+)")


def _voices(text: str) -> list[tuple[str | None, str]]:
    """A cue's text split by voice tag: ``[(speaker, text), ...]``."""
    parts = _VOICE.split(text)
    found: list[tuple[str | None, str]] = [(None, clean(parts[0]))] if clean(parts[0]) else []
    found += [(parts[n].strip(), clean(parts[n + 1])) for n in range(1, len(parts), 2)]
    return [(speaker, said) for speaker, said in found if said]


def read_vtt(text: str, path: Path) -> list[Unit]:
    """The cues of a WebVTT file, one unit per voice per cue."""
    found = blocks(text)
    if not found or not found[0][1][0].startswith("WEBVTT"):
        raise IngestError(str(path), "not a WebVTT file: the first line must be 'WEBVTT'")
    units: list[Unit] = []
    speaker: str | None = None
    for line_no, lines in found[1:]:
        timing = next((n for n, line in enumerate(lines[:2]) if "-->" in line), None)
        if lines[0].startswith(("NOTE", "STYLE", "REGION")) or timing is None:
            continue
        match = _TIMING.match(lines[timing])
        start = parse_clock(match[1]) if match else None
        end = parse_clock(match[2]) if match else None
        if start is None or end is None:
            raise IngestError(
                str(path), f"line {line_no + timing}: bad cue timing {shown(lines[timing])}"
            )
        voices = _voices("\n".join(lines[timing + 1 :]))
        if len(voices) == 1 and voices[0][0] is None:
            named, said = split_speaker(voices[0][1], brackets=False)
            voices = [(named, said)]
        # Several voices in one cue share its time by how much each says.
        total, done = sum(len(said) for _, said in voices), 0
        for named, said in voices:
            # A cue without a name continues the last speaker's turn.
            speaker = named or speaker
            a = start + (end - start) * done / total
            done += len(said)
            b = start + (end - start) * done / total
            units.append(Unit(said, a, max(a, b), speaker))
    if not units:
        raise IngestError(
            str(path), "no cues found (expected '00:00:01.000 --> 00:00:04.000' lines)"
        )
    return in_time_order(units)
