"""A transcript written out as WebVTT, SRT or timestamped text, each cue with its speaker
when it has one (WebVTT's ``<v Name>`` voice tag, ``Name: `` in SRT and text). Each format
reads back into Quorum (``quorum ingest``) with the same seconds and speakers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol

CaptionFormat = Literal["vtt", "srt", "txt"]
FORMATS: tuple[CaptionFormat, ...] = ("vtt", "srt", "txt")


def clock(seconds: float, sep: str = ".") -> str:
    """``3725.5`` -> ``01:02:05.500`` (``sep=","`` for SRT)."""
    ms = round(max(0.0, seconds) * 1000)
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    secs, ms = divmod(ms, 1000)
    return f"{hours:02d}:{minutes:02d}:{secs:02d}{sep}{ms:03d}"


class Said(Protocol):
    """A cue: when, what, and (when known) who."""

    @property
    def start_s(self) -> float: ...

    @property
    def end_s(self) -> float: ...

    @property
    def text(self) -> str: ...


def _one_line(text: str) -> str:
    # A blank line would end a cue early in VTT and SRT; "-->" would look like a timing.
    return " ".join(text.split()).replace("-->", "->")


def _who(cue: Said) -> str | None:
    speaker = getattr(cue, "speaker", None)
    return _one_line(speaker).replace(":", "") if isinstance(speaker, str) and speaker else None


def _named(cue: Said) -> str:
    """``Name: text`` (SRT, text), or the text alone."""
    who = _who(cue)
    return f"{who}: {_one_line(cue.text)}" if who else _one_line(cue.text)


def to_vtt(cues: Sequence[Said]) -> str:
    """WebVTT with one cue per sentence, each in its speaker's voice tag."""
    out = []
    for c in cues:
        who = _who(c)
        body = f"<v {who.replace('>', '')}>{_one_line(c.text)}" if who else _one_line(c.text)
        out.append(f"{clock(c.start_s)} --> {clock(c.end_s)}\n{body}")
    return "\n\n".join(["WEBVTT", *out]) + "\n"


def to_srt(cues: Sequence[Said]) -> str:
    """SubRip with one numbered cue per sentence, ``Name:`` before its words."""
    out = [
        f"{n}\n{clock(c.start_s, ',')} --> {clock(c.end_s, ',')}\n{_named(c)}"
        for n, c in enumerate(cues, start=1)
    ]
    return "\n\n".join(out) + "\n"


def to_txt(cues: Sequence[Said]) -> str:
    """``[hh:mm:ss] Name: sentence`` lines."""
    return "".join(f"[{clock(c.start_s)[:8]}] {_named(c)}\n" for c in cues)


WRITERS: dict[CaptionFormat, Callable[[Sequence[Said]], str]] = {
    "vtt": to_vtt,
    "srt": to_srt,
    "txt": to_txt,
}
