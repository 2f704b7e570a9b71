"""Ingest files into a knowledge base: read, skip unchanged, embed, upsert.

Work is batched across files: files are read a group at a time in a worker thread and
looked up in the store with one query per group; the segments of several files are
encoded in one call (``EMBED_BATCH`` at least) and written in shared requests. Reading
and embedding the next batch overlap with writing the current one to Weaviate (a
two-stage pipeline), so the encoder, the CPU-bound part, rarely waits. Each file still
gets its own result: a file that fails is reported with its reason and skipped, and
each source becomes visible whole (``Store.upsert_many``); nothing already indexed is
touched by a failure. A source id (from the file's stem unless its metadata gives
one) already holding another file that still exists is never silently replaced: the
second file fails, saying how to give it its own id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, Protocol

from retrieval.chunking import ChunkConfig
from retrieval.embed import Embedder
from retrieval.errors import IngestError, QuorumError
from retrieval.ingest import discover, read_source
from retrieval.models import Document
from retrieval.schema import check_kb
from retrieval.store import Store, StoredSource

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


class _Silent:
    def started(self, files: int) -> None:
        pass

    def file_done(self, result: FileResult) -> None:
        pass


@dataclass(frozen=True)
class _Ready:
    path: Path
    doc: Document
    stored: StoredSource | None
    vectors: list[list[float]] = field(default_factory=list)


EMBED_BATCH = 256  # segments encoded per call, across files (a few model batches)
READ_GROUP = 32  # files read per worker-thread call and looked up per store query


async def ingest(
    store: Store,
    embedder: Embedder,
    kb: str,
    paths: Sequence[Path],
    *,
    chunking: ChunkConfig | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> IngestReport:
    """Ingest files and folders into ``kb``; unchanged files are skipped unless ``force``."""
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
    queue: asyncio.Queue[list[_Ready] | None] = asyncio.Queue(maxsize=2)
    owners: dict[str, str] = {}

    async def produce() -> None:
        try:
            pending: list[_Ready] = []
            for i in range(0, len(files), READ_GROUP):
                group = files[i : i + READ_GROUP]
                read = await asyncio.to_thread(_read_group, group, chunking)
                for item in await _check(store, kb, read, force, owners):
                    if isinstance(item, FileResult):
                        _record(report, progress, item)
                    else:
                        pending.append(item)
                if sum(len(r.doc.segments) for r in pending) >= EMBED_BATCH:
                    await queue.put(await _embed(embedder, pending))
                    pending = []
            if pending:
                await queue.put(await _embed(embedder, pending))
        finally:
            await queue.put(None)

    producer = asyncio.create_task(produce())
    try:
        while (batch := await queue.get()) is not None:
            for result in await _write(store, kb, batch):
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
    if not stored or stored == str(path):
        return False
    try:
        return Path(stored).exists() and not Path(stored).samefile(path)
    except OSError:
        return False


def _record(report: IngestReport, progress: Progress, result: FileResult) -> None:
    report.results.append(result)
    progress.file_done(result)


def _read_one(path: Path, root: Path, chunking: ChunkConfig | None) -> Document | FileResult:
    try:
        return read_source(path, root=root, chunking=chunking)
    except IngestError as exc:
        return FileResult(str(path), "failed", reason=brief(exc.reason))
    except Exception as exc:  # a reader's bug or a hostile file costs that file, not the run
        log.debug("reading %s failed", path, exc_info=True)
        return FileResult(str(path), "failed", reason=f"could not be read ({type(exc).__name__})")


def _read_group(
    group: Sequence[tuple[Path, Path]], chunking: ChunkConfig | None
) -> list[tuple[Path, Document | FileResult]]:
    """Read a group of files (in a worker thread), each to a document or its failure."""
    return [(path, _read_one(path, root, chunking)) for path, root in group]


async def _check(
    store: Store,
    kb: str,
    read: Sequence[tuple[Path, Document | FileResult]],
    force: bool,
    owners: dict[str, str],
) -> list[_Ready | FileResult]:
    """Each read file's fate before embedding: failed (unreadable, or its id is taken),
    skipped (unchanged), or ready to embed. One store lookup for the whole group."""
    ids = [doc.source.id for _, doc in read if isinstance(doc, Document)]
    stored_by_id = await store.stored_sources(kb, ids)
    out: list[_Ready | FileResult] = []
    for path, doc in read:
        if isinstance(doc, FileResult):
            out.append(doc)
            continue
        sid = doc.source.id
        if sid in owners:
            out.append(
                FileResult(
                    str(path),
                    "failed",
                    sid,
                    reason=f"source id {sid!r} is already used by {owners[sid]}; "
                    "give one of them an 'id' in its .meta.json",
                )
            )
            continue
        owners[sid] = str(path)
        stored = stored_by_id.get(sid)
        if stored is not None and await asyncio.to_thread(_another_file, stored.path, path):
            out.append(
                FileResult(
                    str(path),
                    "failed",
                    sid,
                    reason=f"source id {sid!r} already holds {stored.path}, another file; give "
                    f"this one an 'id' in its .meta.json, or `quorum remove {sid}` first to "
                    "replace it",
                )
            )
        elif not force and stored is not None and stored.content_hash == doc.source.content_hash:
            out.append(FileResult(str(path), "skipped", sid, len(doc.segments)))
        else:
            out.append(_Ready(path, doc, stored))
    return out


async def _embed(embedder: Embedder, batch: list[_Ready]) -> list[_Ready]:
    """The batch with its vectors: every file's segments encoded in one call."""
    texts = [s.text for r in batch for s in r.doc.segments]
    vectors = await embedder.embed_documents(texts)
    out: list[_Ready] = []
    at = 0
    for r in batch:
        n = len(r.doc.segments)
        out.append(replace(r, vectors=vectors[at : at + n]))
        at += n
    return out


async def _write(store: Store, kb: str, batch: list[_Ready]) -> list[FileResult]:
    """Write a batch; one result per file, a failure costing only its own file unless
    Weaviate itself fails (then every file of the batch says why)."""
    known = {r.doc.source.id: r.stored for r in batch if r.stored is not None}
    try:
        results = await store.upsert_many(kb, [(r.doc, r.vectors) for r in batch], known=known)
    except QuorumError as exc:
        reason = brief(str(exc))
        return [FileResult(str(r.path), "failed", r.doc.source.id, reason=reason) for r in batch]
    out: list[FileResult] = []
    for r, up in zip(batch, results, strict=True):
        sid = r.doc.source.id
        if isinstance(up, QuorumError):
            out.append(FileResult(str(r.path), "failed", sid, reason=brief(str(up))))
        else:
            status: Status = "added" if up.status == "added" else "updated"
            out.append(FileResult(str(r.path), status, sid, up.segments))
    return out
