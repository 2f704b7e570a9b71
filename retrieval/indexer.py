"""Ingest files into a knowledge base: read, skip unchanged, embed, upsert.

Reading and embedding of the next file overlap with writing the current one to
Weaviate (a two-stage pipeline), so the encoder, the CPU-bound part, rarely waits.
A file that fails is reported with its reason and skipped; nothing already indexed
is touched by a failure. A source id (from the file's stem unless its metadata gives
one) already holding another file that still exists is never silently replaced: the
second file fails, saying how to give it its own id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from retrieval.chunking import ChunkConfig
from retrieval.embed import Embedder
from retrieval.errors import ConfigError, IngestError, QuorumError
from retrieval.ingest import discover, read_source
from retrieval.models import Document
from retrieval.multilevel import build
from retrieval.schema import check_kb
from retrieval.store import Store
from retrieval.summary import Summarizer
from retrieval.transcribe import OnProgress, Transcriber

Status = Literal["added", "updated", "skipped", "failed"]
MAX_REASON = 300  # a failure is one line, whatever the file put in its message
log = logging.getLogger("quorum.ingest")


def brief(reason: str) -> str:
    """A failure reason on one line, at most ``MAX_REASON`` characters."""
    line = " ".join(reason.split())
    return line if len(line) <= MAX_REASON else line[: MAX_REASON - 3] + "..."


@dataclass(frozen=True)
class FileResult:
    """What happened to one file."""

    path: str
    status: Status
    source_id: str | None = None
    segments: int = 0
    reason: str | None = None


@dataclass
class IngestReport:
    """The outcome of one ingest run."""

    results: list[FileResult] = field(default_factory=list)

    def count(self, status: Status) -> int:
        """How many files ended with ``status``."""
        return sum(1 for r in self.results if r.status == status)

    @property
    def failed(self) -> list[FileResult]:
        """The files that could not be ingested."""
        return [r for r in self.results if r.status == "failed"]

    @property
    def segments(self) -> int:
        """Segments written in this run."""
        return sum(r.segments for r in self.results if r.status in ("added", "updated"))


class Progress(Protocol):
    """Receives progress while files are ingested."""

    def started(self, files: int) -> None:
        """The run found ``files`` files."""

    def file_done(self, result: FileResult) -> None:
        """One file finished (any status)."""


@runtime_checkable
class MediaProgress(Protocol):
    """A ``Progress`` that also hears how far a recording's transcription is."""

    def transcribing(self, path: str, done_s: float, total_s: float) -> None:
        """``done_s`` of ``total_s`` audio seconds of ``path`` are transcribed."""


class _Silent:
    def started(self, files: int) -> None:
        pass

    def file_done(self, result: FileResult) -> None:
        pass


@dataclass(frozen=True)
class _Ready:
    path: Path
    doc: Document
    vectors: list[list[float]]
    level_vectors: list[list[float]] = field(default_factory=list)


async def ingest(
    store: Store,
    embedder: Embedder,
    kb: str,
    paths: Sequence[Path],
    *,
    chunking: ChunkConfig | None = None,
    progress: Progress | None = None,
    force: bool = False,
    transcriber: Transcriber | None = None,
    summarizer: Summarizer | None = None,
) -> IngestReport:
    """Ingest files and folders into ``kb``; unchanged files are skipped unless ``force``.
    Audio and video are transcribed with ``transcriber`` (without one they fail)."""
    check_kb(kb)
    progress = progress or _Silent()
    report = IngestReport()
    # What a crashed ingest left behind (never visible to search) is removed first.
    if removed := await store.clean_orphans(kb):
        log.info("removed %d orphan segments from %s", removed, kb)
    files, missing = await asyncio.to_thread(_discover, paths)
    for p in missing:
        _record(report, progress, FileResult(str(p), "failed", reason="no such file or folder"))
    progress.started(len(files) + len(missing))
    queue: asyncio.Queue[_Ready | None] = asyncio.Queue(maxsize=2)
    owners: dict[str, str] = {}

    async def produce() -> None:
        try:
            for path, root in files:
                heard = _listener(progress, str(path))
                ready = await _prepare(
                    store,
                    embedder,
                    kb,
                    path,
                    root,
                    chunking,
                    force,
                    owners,
                    transcriber,
                    heard,
                    summarizer,
                )
                if isinstance(ready, FileResult):
                    _record(report, progress, ready)
                else:
                    await queue.put(ready)
        finally:
            await queue.put(None)

    producer = asyncio.create_task(produce())
    try:
        while (item := await queue.get()) is not None:
            try:
                up = await store.upsert(
                    kb, item.doc, item.vectors, level_vectors=item.level_vectors
                )
            except QuorumError as exc:
                reason = brief(str(exc))
                result = FileResult(str(item.path), "failed", item.doc.source.id, reason=reason)
            else:
                status: Status = "added" if up.status == "added" else "updated"
                result = FileResult(str(item.path), status, item.doc.source.id, up.segments)
            _record(report, progress, result)
        await producer
    finally:
        producer.cancel()
    return report


def _discover(paths: Sequence[Path]) -> tuple[list[tuple[Path, Path]], list[Path]]:
    """Files to read, each with the folder its manifest lookups stop at; missing paths."""
    files: list[tuple[Path, Path]] = []
    missing: list[Path] = []
    for root in paths:
        if not root.exists():
            missing.append(root)
            continue
        base = root if root.is_dir() else root.parent
        files.extend((f, base) for f in discover([root]))
    return files, missing


def _another_file(stored: str, path: Path) -> bool:
    """True when ``stored`` (the path a source was ingested from) is a different file that
    still exists. A moved or deleted original lets the new path take the source over."""
    if not stored:
        return False
    try:
        return Path(stored).exists() and not Path(stored).samefile(path)
    except OSError:
        return False


def _listener(progress: Progress, path: str) -> OnProgress | None:
    """Transcription progress, heard on a worker thread, handed to ``progress`` on the loop."""
    if not isinstance(progress, MediaProgress):
        return None
    loop = asyncio.get_running_loop()
    listener = progress

    def heard(done_s: float, total_s: float) -> None:
        loop.call_soon_threadsafe(listener.transcribing, path, done_s, total_s)

    return heard


def _record(report: IngestReport, progress: Progress, result: FileResult) -> None:
    report.results.append(result)
    progress.file_done(result)


async def _prepare(
    store: Store,
    embedder: Embedder,
    kb: str,
    path: Path,
    root: Path,
    chunking: ChunkConfig | None,
    force: bool,
    owners: dict[str, str],
    transcriber: Transcriber | None,
    heard: OnProgress | None,
    summarizer: Summarizer | None = None,
) -> _Ready | FileResult:
    try:
        doc = await asyncio.to_thread(
            read_source,
            path,
            root=root,
            chunking=chunking,
            transcriber=transcriber,
            on_progress=heard,
        )
    except IngestError as exc:
        return FileResult(str(path), "failed", reason=brief(exc.reason))
    except ConfigError:  # a bad setting (the Whisper model) fails the run, not each file
        raise
    except Exception as exc:  # a reader's bug or a hostile file costs that file, not the run
        log.debug("reading %s failed", path, exc_info=True)
        return FileResult(str(path), "failed", reason=f"could not be read ({type(exc).__name__})")
    sid = doc.source.id
    if sid in owners:
        return FileResult(
            str(path),
            "failed",
            sid,
            reason=f"source id {sid!r} is already used by {owners[sid]}; "
            "give one of them an 'id' in its .meta.json",
        )
    owners[sid] = str(path)
    stored = await store.stored_source(kb, sid)
    if stored is not None and await asyncio.to_thread(_another_file, stored.path, path):
        return FileResult(
            str(path),
            "failed",
            sid,
            reason=f"source id {sid!r} already holds {stored.path}, another file; give this "
            f"one an 'id' in its .meta.json, or `quorum remove {sid}` first to replace it",
        )
    if not force and stored is not None and stored.content_hash == doc.source.content_hash:
        return FileResult(str(path), "skipped", sid, len(doc.segments))
    vectors = await embedder.embed_documents([s.text for s in doc.segments])
    # Turns, topics and the summary, from the window vectors (``retrieval.multilevel``).
    levels = await build(doc, vectors, embedder, summarizer)
    return _Ready(path, levels.doc, vectors, levels.vectors)
