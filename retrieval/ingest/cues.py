"""What subtitle and transcript formats share: clock times and speaker prefixes."""

from __future__ import annotations

import html
import re

from retrieval.write.chunking import Unit

_CLOCK = re.compile(r"(?:(\d+):)?(\d{1,2}):(\d{2})(?:[.,](\d{1,3}))?")
_TAG = re.compile(r"<[^>]*>|\{\\[^}]*\}")  # HTML-ish tags and SRT's {\an8} style overrides
_BRACKETED = re.compile(r"\[([^\]\n]{1,40})\]\s*(.+)", re.S)
_COLON = re.compile(r"([^:\n]{1,40}):\s+(.+)", re.S)
# Bracketed sound notes are not speakers: "[Music] ..." must not become a person.
_SOUNDS = {
    "applause", "background noise", "crosstalk", "inaudible", "laughing", "laughs",
    "laughter", "music", "noise", "silence", "sound", "unintelligible",
}  # fmt: skip


MAX_MEDIA_S = 100 * 3600.0  # no recording is longer; a later time is a broken file


def parse_clock(text: str) -> float | None:
    """``"01:02:03.5"``, ``"02:03,500"`` or ``"2:03"`` in seconds; None if not a clock time
    (``99:99:99``, a second past 59, or a time past ``MAX_MEDIA_S``)."""
    match = _CLOCK.fullmatch(text.strip())
    if not match:
        return None
    hours, minutes, seconds, fraction = match.groups()
    # Without hours, minutes may run past 59 ("75:20" in a long transcript); with them, not.
    if int(seconds) > 59 or (hours is not None and int(minutes) > 59) or len(hours or "") > 3:
        return None
    total = (
        int(hours or 0) * 3600
        + int(minutes) * 60
        + int(seconds)
        + (int(fraction) / 10 ** len(fraction) if fraction else 0.0)
    )
    return total if total <= MAX_MEDIA_S else None


def in_time_order(units: list[Unit]) -> list[Unit]:
    """Timed units sorted by start (stable): cues written out of order still make windows
    that run forwards."""
    return sorted(units, key=lambda u: u.start_s if u.start_s is not None else 0.0)


def clean(text: str) -> str:
    """Cue text without markup or entities, on one line."""
    return " ".join(html.unescape(_TAG.sub("", text)).split())


def looks_like_name(name: str) -> bool:
    """A short run of capitalised words ("Priya", "Dr. Ada Okafor", "SPEAKER_01")."""
    words = name.split()
    return (
        0 < len(words) <= 4
        and words[0][0].isalpha()
        and all(w[0].isupper() or w[0].isdigit() for w in words)
    )


def split_speaker(text: str, *, brackets: bool = True) -> tuple[str | None, str]:
    """``"Priya: hi"`` or ``"[Priya] hi"`` -> ``("Priya", "hi")``; else ``(None, text)``."""
    text = text.strip()
    match = _BRACKETED.fullmatch(text) if brackets else None
    if match and match[1].strip().lower() not in _SOUNDS and looks_like_name(match[1]):
        return match[1].strip(), match[2].strip()
    match = _COLON.fullmatch(text)
    if match and looks_like_name(match[1]):
        return match[1].strip(), match[2].strip()
    return None, text


def blocks(text: str) -> list[tuple[int, list[str]]]:
    """Blank-line separated blocks of lines, each with its 1-based starting line number."""
    found: list[tuple[int, list[str]]] = []
    current: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            if not current:
                found.append((number, current))
            current.append(line.rstrip())
        else:
            current = []
    return found
