"""Quorum's media store: the only files its pages serve.

At ingest Quorum keeps what a source's page plays or offers, under
``<data dir>/media/<kb>/<content hash><suffix>``, named by the source's content hash (a
row in the store, never a path someone else can change): the recording itself when a
browser can play it, else a browser-playable AAC rendition made with PyAV; a document's
PDF or text file. The copy is checked against the digest ingest read, so the store holds
the very bytes that were transcribed or read, never what a swapped file or link held a
moment later. Pages open a kept file with ``O_NOFOLLOW``, check it is a regular file
inside the store, and stream that descriptor: no symlink, no ``.gz``/``.br`` sibling, no
path resolved against a working folder. ``QUORUM_MEDIA_MAX_MB`` and
``QUORUM_MEDIA_RETAIN_DAYS`` bound it; a source's copy is forgotten with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import stat
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from retrieval.models import Original, Source

log = logging.getLogger("quorum.media")

# Containers Chromium and Firefox play in <audio>/<video>; other recordings get a rendition.
PLAYABLE = frozenset({".mp3", ".m4a", ".wav", ".ogg", ".webm", ".mp4"})
RENDITION = ".m4a"  # AAC in MP4: every browser plays it
DOCUMENTS = frozenset({".pdf", ".md", ".markdown", ".txt"})
CONTENT_TYPES = {
    ".mp3": "audio/mpeg",
    ".m4a": "audio/mp4",
    ".wav": "audio/wav",
    ".ogg": "audio/ogg",
    ".webm": "video/webm",
    ".mp4": "video/mp4",
    ".pdf": "application/pdf",
    ".md": "text/plain; charset=utf-8",
    ".markdown": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
}
KEPT = (*sorted(PLAYABLE), *sorted(DOCUMENTS))  # every suffix a kept file may have
_HASH = re.compile(r"[0-9a-f]{64}")
_BLOCK = 1 << 20
TRIED = ".tried"  # per knowledge base: the content hashes keep() has tried, one a line
DAY_S = 86_400.0
_AAC_RATES = frozenset({8_000, 11_025, 12_000, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000})


def content_type(path: Path) -> str:
    """The Content-Type a kept file is served with."""
    return CONTENT_TYPES.get(path.suffix.lower(), "application/octet-stream")


def is_recording(path: str) -> bool:
    """True when ``path`` names an audio or video file (a source ingested from one)."""
    from retrieval.ingest.media import MEDIA_SUFFIXES  # PyAV's readers: only when asked

    return Path(path).suffix.lower() in MEDIA_SUFFIXES


def _safe(name: str) -> str:
    """A name as one file name (knowledge bases are checked; this is belt and braces)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "_"


@dataclass(frozen=True)
class Opened:
    """A kept file opened for serving: its descriptor (the caller closes it), size, type."""

    fd: int
    size: int
    suffix: str

    @property
    def content_type(self) -> str:
        """The Content-Type it is served with."""
        return CONTENT_TYPES.get(self.suffix, "application/octet-stream")


class ChangedWhileRead(Exception):
    """The file's bytes are not the ones ingest read (it changed, or was swapped)."""


@dataclass(frozen=True)
class MediaStore:
    """Kept recordings and documents by content hash, bounded in bytes and in age."""

    root: Path
    max_bytes: int | None = None  # QUORUM_MEDIA_MAX_MB; None: no bound
    retain_days: float | None = None  # QUORUM_MEDIA_RETAIN_DAYS; None: while the source is

    def path(self, kb: str, content_hash: str, suffix: str) -> Path:
        """Where a source's kept file of ``suffix`` lives."""
        if not _HASH.fullmatch(content_hash):
            raise ValueError(f"not a content hash: {content_hash[:80]!r}")
        return self.root / _safe(kb) / f"{content_hash}{suffix.lower()}"

    def copies(self, kb: str, content_hash: str) -> list[Path]:
        """Every kept file of one content hash (what forgetting its source deletes)."""
        if not _HASH.fullmatch(content_hash):
            return []
        folder = self.root / _safe(kb)
        return [p for s in KEPT if (p := folder / f"{content_hash}{s}").is_file()]

    def legacy_copies(self, kb: str, source_id: str) -> list[Path]:
        """Copies earlier versions of Quorum kept by source id (``media/<kb>/<id>.<ext>``)."""
        if _HASH.fullmatch(source_id):
            # That name is another source's copy now (ids and hashes share the folder):
            # a source whose id is a content hash never had a legacy copy worth that risk.
            return []
        folder = self.root / _safe(kb)
        suffixes = (*KEPT, ".mov", ".mkv")
        return [p for s in suffixes if (p := folder / f"{_safe(source_id)}{s}").is_file()]

    def unused(self, kb: str, source: Source, live: set[str]) -> list[Path]:
        """The copies a removed ``source`` leaves unused: its content hash's, unless a live
        source (of ``live`` content hashes) is the same file, and any legacy copy. Its
        line in ``.tried`` goes now: nothing of a forgotten file stays, not even its hash."""
        if source.content_hash in live:
            return self.legacy_copies(kb, source.id)
        self._untry(kb, source.content_hash)
        return self.copies(kb, source.content_hash) + self.legacy_copies(kb, source.id)

    def keep(
        self, kb: str, content_hash: str, original: Original, *, again: bool = True
    ) -> Path | None:
        """Copy ``original`` into the store (a rendition when a browser cannot play it),
        checked against the digest ingest read; None when nothing was kept (not a kind a
        page serves, over the size bound, or the file changed since it was read). With
        ``again=False`` a content hash the store tried to keep before is not tried again
        (dropped for the size bound, too large, or failed): an unchanged file read on every
        ``quorum ingest`` run would otherwise be copied, and evict another, every run."""
        suffix = original.path.suffix.lower()
        from retrieval.ingest.media import MEDIA_SUFFIXES  # PyAV's readers: only when keeping

        if suffix not in MEDIA_SUFFIXES and suffix not in DOCUMENTS:
            return None
        served = RENDITION if suffix in MEDIA_SUFFIXES and suffix not in PLAYABLE else suffix
        target = self.path(kb, content_hash, served)
        if not self._own_folder(target.parent):
            return None
        if target.is_file():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        if not again and content_hash in self._tried(kb):
            return None
        with (target.parent / TRIED).open("a") as tried:  # one short line: appends never mix
            tried.write(content_hash + "\n")
        if self.max_bytes is not None and served == suffix:  # known before a byte is copied
            if original.path.stat().st_size > self.max_bytes:
                log.warning(
                    "%s is larger than QUORUM_MEDIA_MAX_MB: its page shows no media",
                    original.path.name,
                )
                return None
        # Its own name: two ingests (two chat uploads of one file) may keep it at once.
        partial = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
        temporary = [partial]  # each deleted however this ends (a rendition half-written too)
        try:
            _copy_checked(original, partial)
            if suffix in MEDIA_SUFFIXES:
                _probe(partial, original.path.name)
            if served != suffix:  # a container browsers do not play
                rendition = partial.with_name(partial.name + RENDITION)
                temporary.append(rendition)
                render_audio(partial, rendition)
                partial.unlink(missing_ok=True)
                partial = rendition
            if self.max_bytes is not None and partial.stat().st_size > self.max_bytes:
                log.warning(
                    "%s is larger than QUORUM_MEDIA_MAX_MB: its page shows no media",
                    original.path.name,
                )
                return None
            partial.replace(target)  # whole or not at all
        finally:
            for temp in temporary:
                temp.unlink(missing_ok=True)
        self.prune(keep=target)
        return target

    def prune(self, keep: Path | None = None, now: float | None = None) -> list[Path]:
        """Delete kept files older than the retention days, then the oldest while the store
        is over its size; the files deleted (never ``keep``, just kept)."""
        now = time.time() if now is None else now
        self._sweep_partials(now)
        files = sorted(self._files(), key=lambda x: x[1])  # oldest first
        doomed: list[Path] = []
        if self.retain_days is not None:
            doomed += [p for p, at, _ in files if now - at > self.retain_days * DAY_S]
        if self.max_bytes is not None:
            total = sum(size for p, _, size in files if p not in doomed)
            for p, _, size in files:
                if total <= self.max_bytes:
                    break
                if p not in doomed and p != keep:
                    doomed.append(p)
                    total -= size
        for p in doomed:
            p.unlink(missing_ok=True)
        if doomed:
            log.warning("media store: %d kept file(s) past their days or size dropped", len(doomed))
        return doomed

    def expired(self, days: float, now: float | None = None) -> list[tuple[Path, float]]:
        """Kept files older than ``days``, with their age in days."""
        now = time.time() if now is None else now
        return [(p, (now - at) / DAY_S) for p, at, _ in self._files() if now - at > days * DAY_S]

    def _own_folder(self, folder: Path) -> bool:
        """False (said in the log) when ``media/<kb>`` is a link or not a folder: what is
        kept goes into the store itself, never where a link planted there points."""
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            return True  # made next, by keep()
        if stat.S_ISDIR(st.st_mode):
            return True
        log.warning(
            "nothing kept in %s: it is a link or a file, not a folder of the media store; "
            "remove it and ingest again",
            folder,
        )
        return False

    def _tried(self, kb: str) -> set[str]:
        """The content hashes the store has tried to keep in ``kb``."""
        try:
            return set((self.root / _safe(kb) / TRIED).read_text().split())
        except FileNotFoundError:
            return set()

    def _untry(self, kb: str, content_hash: str) -> None:
        """Strike ``content_hash`` from ``kb``'s hashes tried (the file goes when empty)."""
        ledger = self.root / _safe(kb) / TRIED
        tried = self._tried(kb)
        if content_hash not in tried:
            return
        tried.discard(content_hash)
        if not tried:
            ledger.unlink(missing_ok=True)
            return
        fresh = ledger.with_name(f"{TRIED}.{uuid.uuid4().hex}.part")
        fresh.write_text("".join(f"{h}\n" for h in sorted(tried)))
        fresh.replace(ledger)

    def _sweep_partials(self, now: float) -> None:
        """Delete the partial copies a crash left (``.<name>.<uuid>.part*``), once a day old:
        a younger one may be a copy another ingest is making now."""
        if not self.root.is_dir():
            return
        for folder in self.root.iterdir():
            if not folder.is_dir() or folder.is_symlink():
                continue
            for p in folder.glob(".*.part*"):
                with contextlib.suppress(OSError):
                    st = p.lstat()
                    if stat.S_ISREG(st.st_mode) and now - st.st_mtime > DAY_S:
                        p.unlink()
                        log.warning(
                            "media store: %s, left by an ingest that stopped, deleted", p.name
                        )

    def _files(self) -> Iterator[tuple[Path, float, int]]:
        if not self.root.is_dir():
            return
        for folder in self.root.iterdir():
            if not folder.is_dir() or folder.is_symlink():
                continue
            for p in folder.iterdir():
                with contextlib.suppress(OSError):
                    st = p.lstat()
                    if stat.S_ISREG(st.st_mode) and not p.name.startswith("."):
                        yield p, st.st_mtime, st.st_size

    def find(self, kb: str, source: Source, suffixes: frozenset[str]) -> str | None:
        """The suffix of ``source``'s kept file among ``suffixes``, or None."""
        if not _HASH.fullmatch(source.content_hash):
            return None
        folder = self.root / _safe(kb)
        for suffix in KEPT:
            if suffix in suffixes and (folder / f"{source.content_hash}{suffix}").is_file():
                return suffix
        return None

    def open(self, kb: str, source: Source, suffixes: frozenset[str]) -> Opened | None:
        """``source``'s kept file among ``suffixes``, opened without following a link and
        checked to be a regular file inside the store; None when there is none."""
        suffix = self.find(kb, source, suffixes)
        if suffix is None:
            return None
        path = self.path(kb, source.content_hash, suffix)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:  # a link (ELOOP), or gone since
            log.warning("refused to serve %s: not a plain file", path.name)
            return None
        try:
            st = os.fstat(fd)
            real = Path(os.path.realpath(path))
            inside = real.is_relative_to(Path(os.path.realpath(self.root)))
            at = os.stat(real)  # the same file: an inode number is only unique per device
            same = inside and (at.st_dev, at.st_ino) == (st.st_dev, st.st_ino)
            if not (stat.S_ISREG(st.st_mode) and same):
                log.warning("refused to serve %s: not a plain file in the store", path.name)
                os.close(fd)
                return None
            os.set_blocking(fd, True)
        except OSError:
            os.close(fd)
            return None
        return Opened(fd, st.st_size, suffix)


def _copy_checked(original: Original, partial: Path) -> None:
    """Copy ``original`` to ``partial``, hashing as it goes; ChangedWhileRead when the
    bytes are not the ones ingest read."""
    digest = hashlib.sha256()
    with original.path.open("rb") as src, partial.open("wb") as dst:
        while block := src.read(_BLOCK):
            digest.update(block)
            dst.write(block)
    if digest.hexdigest() != original.digest:
        partial.unlink(missing_ok=True)
        raise ChangedWhileRead(f"{original.path.name} changed while it was ingested")


def _probe(path: Path, name: str) -> None:
    """ValueError unless ``path`` is a recording with sound (a page plays nothing else)."""
    import av  # PyAV: only when a recording needs a rendition

    try:
        with av.open(str(path)) as container:
            if container.streams.audio:
                return
    except av.FFmpegError:
        pass
    raise ValueError(f"{name} is not a recording with sound")


def render_audio(source: Path, out: Path) -> None:
    """The sound of ``source`` (any container PyAV reads) as AAC in ``out`` (.m4a)."""
    import av  # here: PyAV is only needed when a recording is kept

    with av.open(str(source)) as inp, av.open(str(out), "w", format="mp4") as outc:
        if not inp.streams.audio:
            raise ValueError(f"{source.name} has no sound")
        sound = inp.streams.audio[0]
        # The recording's own rate where AAC has it: resampling is most of the cost.
        rate = sound.rate if sound.rate in _AAC_RATES else 48_000
        stream = outc.add_stream("aac", rate=rate, layout="mono")
        stream.bit_rate = 64_000
        resampler = av.AudioResampler(format="fltp", layout="mono", rate=rate)
        for frame in inp.decode(sound):
            for out_frame in resampler.resample(frame):
                for packet in stream.encode(out_frame):
                    outc.mux(packet)
        for out_frame in resampler.resample(None):
            for packet in stream.encode(out_frame):
                outc.mux(packet)
        for packet in stream.encode(None):
            outc.mux(packet)
