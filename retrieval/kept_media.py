"""Where a source's media and original file are found, for its page.

A recording plays from, in order: the copy kept under ``media/<kb>/<source id>.<ext>``
(``QUORUM_KEEP_MEDIA``, or audio the demo made for a transcript), the file it was
ingested from while that file is still there (chat uploads are kept by the library), or
a recording of the same name beside its transcript (``call.vtt`` next to ``call.m4a``).
Only these files are ever served: a path comes from the stored source, never from a URL,
and a kept copy must resolve inside its own folder (no symlink leads out of it).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from retrieval.models import Source


def _media_suffixes() -> frozenset[str]:
    """The suffixes of audio and video files (``retrieval.ingest.media``), imported on
    first use: the readers behind it cost a one-shot ``quorum search`` half a second."""
    from retrieval.ingest.media import MEDIA_SUFFIXES

    return MEDIA_SUFFIXES


# Containers Chromium and Firefox play in <audio>/<video>; others are offered as a download.
PLAYABLE = frozenset({".mp3", ".m4a", ".wav", ".ogg", ".webm", ".mp4", ".mov"})
CONTENT_TYPES = {
    ".mp3": "audio/mpeg",
    ".m4a": "audio/mp4",
    ".wav": "audio/wav",
    ".ogg": "audio/ogg",
    ".webm": "video/webm",
    ".mp4": "video/mp4",
    ".mov": "video/quicktime",
    ".mkv": "video/x-matroska",
    ".pdf": "application/pdf",
    ".md": "text/plain; charset=utf-8",
    ".markdown": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}


@dataclass(frozen=True)
class Found:
    """A file to serve (None: none), and the name of an original that is gone."""

    path: Path | None
    gone: str | None = None


def _safe(name: str) -> str:
    """A source id as one file name (ids are slugs; anything else is replaced)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "_"


def kept_path(media_dir: Path, kb: str, source_id: str, suffix: str) -> Path:
    """Where a kept copy of ``source_id``'s recording lives."""
    return media_dir / _safe(kb) / f"{_safe(source_id)}{suffix.lower()}"


def _kept(media_dir: Path, kb: str, source_id: str) -> Path | None:
    folder = (media_dir / _safe(kb)).resolve()
    for suffix in sorted(_media_suffixes(), key=lambda s: s not in PLAYABLE):
        path = kept_path(media_dir, kb, source_id, suffix)
        if path.is_file() and path.resolve().parent == folder:
            return path
    return None


def kept_copies(media_dir: Path, kb: str, source_id: str) -> list[Path]:
    """Every kept copy of ``source_id``'s recording (removed with the source)."""
    paths = (kept_path(media_dir, kb, source_id, suffix) for suffix in sorted(_media_suffixes()))
    return [p for p in paths if p.is_file()]


def _original(source: Source) -> Path | None:
    return Path(source.path).absolute() if source.path else None


def find_media(media_dir: Path, kb: str, source: Source) -> Found:
    """The recording of ``source`` to play, or the name of its ingested file that is gone."""
    kept = _kept(media_dir, kb, source.id)
    if kept is not None:
        return Found(kept)
    original = _original(source)
    if original is None:
        return Found(None)
    if original.suffix.lower() in _media_suffixes():
        return Found(original) if original.is_file() else Found(None, original.name)
    for suffix in sorted(_media_suffixes(), key=lambda s: s not in PLAYABLE):
        beside = original.with_suffix(suffix)
        if beside.is_file():
            return Found(beside)
    return Found(None)


def find_file(source: Source) -> Found:
    """The document ``source`` was ingested from (a PDF, Markdown), or its name if gone."""
    original = _original(source)
    if original is None:
        return Found(None)
    return Found(original) if original.is_file() else Found(None, original.name)


def keep(media_dir: Path, kb: str, source_id: str, original: Path) -> Path | None:
    """Copy an ingested recording beside Quorum's data (``QUORUM_KEEP_MEDIA``); None when
    ``original`` is not a recording."""
    suffix = original.suffix.lower()
    if suffix not in _media_suffixes():
        return None
    target = kept_path(media_dir, kb, source_id, suffix)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    shutil.copyfile(original, partial)
    partial.replace(target)  # whole or not at all
    return target


def content_type(path: Path) -> str:
    """The Content-Type a file is served with."""
    return CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")
