"""Whisper / WhisperX JSON: ``{"segments": [{"start", "end", "text", "speaker"?}]}``."""

from __future__ import annotations

import json
import math
from pathlib import Path

from retrieval.errors import IngestError
from retrieval.ingest.cues import MAX_MEDIA_S, in_time_order
from retrieval.write.chunking import Unit

_SHAPE = 'expected {"segments": [{"start": 0.0, "end": 4.2, "text": "..."}, ...]}'


def _seconds(value: object) -> float | None:
    """A time in seconds within a recording's possible length; None for anything else."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value) if 0 <= value <= MAX_MEDIA_S else None
    return None


def read_whisper(text: str, path: Path) -> list[Unit]:
    """The segments of a Whisper transcript, with WhisperX's speakers when present."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise IngestError(str(path), f"invalid JSON at line {exc.lineno}: {exc.msg}") from exc
    except RecursionError as exc:
        raise IngestError(str(path), "the JSON is nested too deeply to be a transcript") from exc
    # Some tools write the bare segment list.
    segments = data.get("segments") if isinstance(data, dict) else data
    if not isinstance(segments, list):
        raise IngestError(str(path), f"not a Whisper transcript: {_SHAPE}")
    units: list[Unit] = []
    for n, item in enumerate(segments):
        start = _seconds(item.get("start")) if isinstance(item, dict) else None
        end = _seconds(item.get("end")) if isinstance(item, dict) else None
        if not isinstance(item, dict) or start is None or end is None:
            raise IngestError(
                str(path),
                f"segment {n} has no start and end in seconds (0 to {MAX_MEDIA_S:,.0f}): {_SHAPE}",
            )
        said, speaker = item.get("text"), item.get("speaker")
        if not isinstance(said, str):
            raise IngestError(str(path), f"segment {n} has no text: {_SHAPE}")
        if said.strip():
            named = speaker.strip() if isinstance(speaker, str) and speaker.strip() else None
            units.append(Unit(" ".join(said.split()), start, max(start, end), named))
    units = in_time_order(units)
    if not units and isinstance(data, dict) and isinstance(data.get("text"), str):
        units = [Unit(" ".join(data["text"].split()))]  # text without timings: still searchable
    return units
