"""A transcript written out as WebVTT, SRT or timestamped text. Each format reads back
into Quorum (``quorum ingest``) with the same seconds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from retrieval.write.transcribe import Cue, Transcript

CaptionFormat = Literal["vtt", "srt", "txt"]
FORMATS: tuple[CaptionFormat, ...] = ("vtt", "srt", "txt")


def clock(seconds: float, sep: str = ".") -> str:
    """``3725.5`` -> ``01:02:05.500`` (``sep=","`` for SRT)."""
    ms = round(max(0.0, seconds) * 1000)
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{sep}{ms:03d}"


def _one_line(cue: Cue) -> str:
    # A blank line would end a cue early in VTT and SRT; "-->" would look like a timing.
    return " ".join(cue.text.split()).replace("-->", "->")


def to_vtt(transcript: Transcript) -> str:
    """WebVTT with one cue per sentence."""
    cues = [f"{clock(c.start_s)} --> {clock(c.end_s)}\n{_one_line(c)}" for c in transcript.cues]
    return "\n\n".join(["WEBVTT", *cues]) + "\n"


def to_srt(transcript: Transcript) -> str:
    """SubRip with one numbered cue per sentence."""
    cues = [
        f"{n}\n{clock(c.start_s, ',')} --> {clock(c.end_s, ',')}\n{_one_line(c)}"
        for n, c in enumerate(transcript.cues, start=1)
    ]
    return "\n\n".join(cues) + "\n"


def to_txt(transcript: Transcript) -> str:
    """``[hh:mm:ss] sentence`` lines."""
    return "".join(f"[{clock(c.start_s)[:8]}] {_one_line(c)}\n" for c in transcript.cues)


WRITERS: dict[CaptionFormat, Callable[[Transcript], str]] = {
    "vtt": to_vtt,
    "srt": to_srt,
    "txt": to_txt,
}
