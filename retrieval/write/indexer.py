"""Ingest files into a knowledge base: read, skip unchanged, embed, upsert.

Work is batched across files: files are read a group at a time in a worker thread and
looked up in the store with one query per group; the windows of several files are
encoded in one call (``EMBED_BATCH`` at least), each file's other levels are built from
its window vectors, and the batch is written in shared requests. Reading and encoding
the next batch overlap with writing the current one to Weaviate (a two-stage pipeline),
so the encoder, the CPU-bound part, rarely waits. Each file still gets its own result: a
file that fails is reported with its reason and skipped, and each source becomes visible
whole (``Store.upsert_many``); nothing already indexed is touched by a failure. A source
id (from the file's stem unless its metadata gives one) already holding another file
that still exists, or another object (a download's URL), is never silently replaced: the
second file fails, saying how to give it its own id; nor is one that another ingest in
this process is writing at that moment (two people sharing the same file name at once).
With a media store, each source's recording or document is kept there before the source
is written (``retrieval.links.kept_media``): its page serves that copy only.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable
from urllib.parse import urlsplit

from retrieval.encoding.embed import Embedder
from retrieval.errors import ConfigError, IngestError, InvalidInput, QuorumError
from retrieval.ingest import discover, read_source, transcribed_beside
from retrieval.ingest.media import MEDIA_SUFFIXES
from retrieval.links.kept_media import MediaStore
from retrieval.models import Document, check_kb
from retrieval.search.multilevel import build
from retrieval.speakers.voiceprints import Voiceprints
from retrieval.store import Embedded, Store, StoredSource
from retrieval.write.chunking import ChunkConfig
from retrieval.write.summary import Summarizer
from retrieval.write.transcribe import OnProgress, Transcriber

if TYPE_CHECKING:
    from retrieval.speakers.diarize import Diarizer

Status = Literal["added", "updated", "skipped", "failed"]
MEDIA_KINDS = ("audio", "video")
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
    holder: str | None = None  # the other file already holding this source id, if that failed


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


@runtime_checkable
class SpeakerProgress(Protocol):
    """A ``Progress`` that also hears how far finding a recording's speakers is."""

    def diarizing(self, path: str, done_s: float, total_s: float) -> None:
        """``done_s`` of ``total_s`` audio seconds of ``path`` are heard for speakers."""


@runtime_checkable
class WriteProgress(Protocol):
    """A ``Progress`` that also hears when a file's passages start to be embedded and
    stored (after its transcription and speakers, the last stage before ``file_done``)."""

    def writing(self, path: str) -> None:
        """``path`` is read and changed: its passages are being encoded and written."""


@runtime_checkable
class Stoppable(Protocol):
    """A ``Progress`` that can stop a transcription under way (a job cancelled): while
    ``stop`` is set the next progress report raises ``Stopped`` in the decoder's thread,
    before anything is kept."""

    stop: threading.Event


class Stopped(Exception):
    """A transcription stopped because its ``Stoppable`` progress asked it to."""


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
    level_vectors: list[list[float]] = field(default_factory=list)


# Windows encoded per call, across files. The encoder sorts a call's texts by length, so a
# bigger call pads its model batches less: small Markdown pages of uneven length cost 25%
# more encoder CPU in calls of 256 than in one call, 10% in calls of 1024.
EMBED_BATCH = 1024
READ_GROUP = 32  # files read per worker-thread call and looked up per store query

# The source ids being written by the ingests running in this process, per store and
# knowledge base, with the file each is for. Checking the store for an id's holder and
# then writing is not atomic: two people sharing "plan.vtt" at the same moment both saw
# it free, both were told "Added", and one meeting replaced the other. An id is claimed
# here before the store is asked, and released when its ingest ends (written or not).
_writing: dict[tuple[int, str, str], str] = {}


@contextlib.contextmanager
def holding(store: Store, kb: str, sid: str, what: str) -> Iterator[None]:
    """Claim ``sid`` as an ingest does while ``what`` (a speaker rename) rewrites it: an
    ingest of it meanwhile is refused, as is this when one is under way."""
    key = (id(store), kb, sid)
    if (other := _writing.get(key)) is not None:
        raise InvalidInput(f"{sid} is being written right now (from {other}); try again soon.")
    _writing[key] = what
    try:
        yield
    finally:
        if _writing.get(key) == what:
            del _writing[key]


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
    media: MediaStore | None = None,
    roots: Mapping[Path, Path] | None = None,
    diarizer: Diarizer | None = None,
    voiceprints: Voiceprints | None = None,
    speakers: Mapping[Path, int] | None = None,
    origins: Mapping[Path, str] | None = None,
    ids: Mapping[Path, str] | None = None,
) -> IngestReport:
    """Ingest files and folders into ``kb``; unchanged files are skipped unless ``force``.
    Audio and video are transcribed with ``transcriber`` (without one they fail), and
    given speakers with ``diarizer`` (``speakers``: a file's count, when the user gave
    it), their voices kept in ``voiceprints`` when it is enabled; what a page serves of
    each source is kept in ``media`` (without one, pages show text only). ``roots``: for
    a file given alone, the folder its manifest lookups stop at (a job's file, queued
    from a folder), else its own folder. ``origins``: for a downloaded file, the URL it came
    from (``s3://bucket/key``), kept as its source's path instead of the download's;
    ``ids``: the source id a file gets unless its metadata names one (else its stem's)."""
    check_kb(kb)
    run = _Run(store, embedder, kb, chunking, force, transcriber, summarizer, progress, media)
    run.diarizer, run.voiceprints, run.speakers = diarizer, voiceprints, dict(speakers or {})
    # By absolute path, as ``_discover`` hands the files on.
    run.origins = {p.absolute(): url for p, url in (origins or {}).items()}
    run.ids = {p.absolute(): sid for p, sid in (ids or {}).items()}
    try:
        return await run.go(paths, roots or {})
    finally:
        run.release()


class _Run:
    """One ingest run: files are read a group at a time, checked against the store with
    one lookup per group, encoded many files to a call, and written in shared requests.
    Reading and encoding the next batch overlap with writing this one (``ingest``)."""

    def __init__(
        self,
        store: Store,
        embedder: Embedder,
        kb: str,
        chunking: ChunkConfig | None,
        force: bool,
        transcriber: Transcriber | None,
        summarizer: Summarizer | None,
        progress: Progress | None,
        media: MediaStore | None = None,
    ) -> None:
        self.store, self.embedder, self.kb = store, embedder, kb
        self.chunking, self.force = chunking, force
        self.transcriber, self.summarizer = transcriber, summarizer
        self.progress = progress or _Silent()
        self.report = IngestReport()
        self.owners: dict[str, str] = {}  # source id -> the file that took it in this run
        self.media = media
        self.diarizer: Diarizer | None = None
        self.voiceprints: Voiceprints | None = None
        self.speakers: dict[Path, int] = {}
        self.origins: dict[Path, str] = {}
        self.ids: dict[Path, str] = {}

    async def go(self, paths: Sequence[Path], roots: Mapping[Path, Path]) -> IngestReport:
        """Ingest ``paths``: files read and checked, then written batch by batch."""
        # What a crashed ingest left behind (never visible to search) is removed first.
        if removed := await self.store.clean_orphans(self.kb):
            log.info("removed %d orphan segments from %s", removed, self.kb)
        files, missing = await asyncio.to_thread(_discover, paths, roots)
        for p in missing:
            self.record(FileResult(str(p), "failed", reason="no such file or folder"))
        self.progress.started(len(files) + len(missing))
        queue: asyncio.Queue[list[_Ready] | None] = asyncio.Queue(maxsize=2)
        producer = asyncio.create_task(self.produce(files, queue))
        try:
            while (batch := await queue.get()) is not None:
                for result in await self.write(batch):
                    self.record(result)
            await producer
        finally:
            producer.cancel()
        return self.report

    def release(self) -> None:
        """Give back the source ids this run claimed."""
        for sid in self.owners:
            key = (id(self.store), self.kb, sid)
            if _writing.get(key) == self.owners[sid]:
                del _writing[key]

    def record(self, result: FileResult) -> None:
        """One file's outcome: into the report, and out to the progress display."""
        self.report.results.append(result)
        self.progress.file_done(result)

    async def produce(
        self, files: Sequence[tuple[Path, Path]], queue: asyncio.Queue[list[_Ready] | None]
    ) -> None:
        """Read, check and encode ``files``, putting batches of ready documents on ``queue``
        (``None`` when done)."""
        try:
            pending: list[_Ready] = []
            for group in _groups(files):
                for item in await self.check(await self.read(group)):
                    if isinstance(item, FileResult):
                        self.record(item)
                        continue
                    pending.append(item)
                    if isinstance(self.progress, WriteProgress):
                        self.progress.writing(str(item.path))
                    # Flushed file by file, not group by group: a group of long recordings
                    # would otherwise be encoded whole before the first of them is written.
                    if sum(len(r.doc.segments) for r in pending) >= EMBED_BATCH:
                        await queue.put(await self.embed(pending))
                        pending = []
            if pending:
                await queue.put(await self.embed(pending))
        finally:
            await queue.put(None)

    async def read(
        self, group: Sequence[tuple[Path, Path]]
    ) -> list[tuple[Path, Document | FileResult]]:
        """Read a group of files in a worker thread, each to a document or its failure."""
        heard = [_listener(self.progress, str(path)) for path, _ in group]
        voices = [_listener(self.progress, str(path), "diarizing") for path, _ in group]

        def read_all() -> list[tuple[Path, Document | FileResult]]:
            return [
                (path, self._read_one(path, root, on_progress, on_voices))
                for (path, root), on_progress, on_voices in zip(group, heard, voices, strict=True)
            ]

        return await asyncio.to_thread(read_all)

    def _read_one(
        self, path: Path, root: Path, heard: OnProgress | None, voices: OnProgress | None = None
    ) -> Document | FileResult:
        try:
            return read_source(
                path,
                root=root,
                chunking=self.chunking,
                transcriber=self.transcriber,
                on_progress=heard,
                diarizer=self.diarizer,
                speakers=self.speakers.get(path),
                on_diarize=voices,
                origin=self.origins.get(path),
                default_id=self.ids.get(path),
            )
        except IngestError as exc:
            return FileResult(str(path), "failed", reason=brief(exc.reason))
        except Stopped:
            raise
        except ConfigError:  # a bad setting (the Whisper model) fails the run, not each file
            raise
        except Exception as exc:  # a reader's bug or a hostile file costs that file, not the run
            log.debug("reading %s failed", path, exc_info=True)
            reason = f"could not be read ({type(exc).__name__})"
            return FileResult(str(path), "failed", reason=reason)

    async def check(
        self, read: Sequence[tuple[Path, Document | FileResult]]
    ) -> list[_Ready | FileResult]:
        """Each read file's fate before encoding: failed (unreadable, or its id is taken),
        skipped (unchanged), or ready. One store lookup for the whole group."""
        # Claimed before the store is asked, with no await in between: an ingest still
        # writing an id holds its claim, one that finished has written its record.
        claims = {
            path: self._claim(path, doc.source.id)
            for path, doc in read
            if isinstance(doc, Document)
        }
        ids = [doc.source.id for p, doc in read if isinstance(doc, Document) and not claims[p]]
        stored_by_id = await self.store.stored_sources(self.kb, ids)
        out: list[_Ready | FileResult] = []
        for path, doc in read:
            if isinstance(doc, FileResult):
                out.append(doc)
                continue
            stored = stored_by_id.get(doc.source.id)
            taken = claims[path] or await self._taken(path, doc.source.id, stored)
            if taken is not None:
                out.append(taken)
            elif not self.force and stored and stored.content_hash == doc.source.content_hash:
                out.append(FileResult(str(path), "skipped", doc.source.id, len(doc.segments)))
                # Ingested before Quorum kept media: kept now (unless retention would drop
                # it), once: a copy the size bound dropped is not made again every run.
                if self.media is not None and self.media.retain_days is None:
                    await self.hold(doc, again=False)
            else:
                out.append(_Ready(path, doc, stored))
        return out

    def _claim(self, path: Path, sid: str) -> FileResult | None:
        """The failure of a file whose source id another file of this run took, or that
        another ingest in this process is writing; else the id is claimed for it."""
        if sid in self.owners:
            return FileResult(
                str(path),
                "failed",
                sid,
                reason=f"source id {sid!r} is already used by {self.owners[sid]}; "
                "give one of them an 'id' in its .meta.json",
            )
        key = (id(self.store), self.kb, sid)
        other = _writing.get(key)
        if other is not None:
            return FileResult(
                str(path),
                "failed",
                sid,
                reason=f"source id {sid!r} is being added from {other} right now; add this "
                "file again when that is done, or give it an 'id' in its .meta.json",
                holder=other,
            )
        _writing[key] = self.owners[sid] = str(path)
        return None

    async def _taken(self, path: Path, sid: str, stored: StoredSource | None) -> FileResult | None:
        """The failure of a file whose source id belongs to another file indexed and still
        there; None when the id is this file's to use."""
        origin = self.origins.get(path)
        if stored is not None and await asyncio.to_thread(
            _another_file, stored.path, path, origin, sid
        ):
            return FileResult(
                str(path),
                "failed",
                sid,
                reason=f"source id {sid!r} already holds {stored.path}, another file; give this "
                f"one an 'id' in its .meta.json, or `quorum remove {sid}` first to replace it",
                holder=stored.path,
            )
        return None

    async def embed(self, batch: list[_Ready]) -> list[_Ready]:
        """The batch with its vectors: every file's windows encoded in one call, then each
        file's turns, topics and summary built from them (``retrieval.search.multilevel``)."""
        texts = [s.text for r in batch for s in r.doc.segments]
        vectors = await self.embedder.embed_documents(texts)
        out: list[_Ready] = []
        at = 0
        for r in batch:
            mine = vectors[at : at + len(r.doc.segments)]
            at += len(r.doc.segments)
            levels = await build(r.doc, mine, self.embedder, self.summarizer)
            out.append(replace(r, doc=levels.doc, vectors=mine, level_vectors=levels.vectors))
        return out

    async def write(self, batch: list[_Ready]) -> list[FileResult]:
        """Write a batch; one result per file, a failure costing only its own file unless
        Weaviate itself fails (then every file of the batch says why)."""
        known = {r.doc.source.id: r.stored for r in batch if r.stored is not None}
        items = [Embedded(r.doc, r.vectors, r.level_vectors) for r in batch]
        for r in batch:  # kept first, so a page finds its media the moment the source shows
            await self.hold(r.doc)
        try:
            results = await self.store.upsert_many(self.kb, items, known=known)
        except QuorumError as exc:
            why = brief(str(exc))
            await self.drop_unused([r.doc.source.content_hash for r in batch])
            return [FileResult(str(r.path), "failed", r.doc.source.id, reason=why) for r in batch]
        out: list[FileResult] = []
        for r, up in zip(batch, results, strict=True):
            sid = r.doc.source.id
            if isinstance(up, QuorumError):
                out.append(FileResult(str(r.path), "failed", sid, reason=brief(str(up))))
            else:
                status: Status = "added" if up.status == "added" else "updated"
                out.append(FileResult(str(r.path), status, sid, up.segments))
        replaced = [
            r.stored.content_hash
            for r, res in zip(batch, out, strict=True)
            if r.stored is not None
            and res.status == "updated"
            and r.stored.content_hash != r.doc.source.content_hash
        ]
        # A file kept above whose source was not written: no page will ever serve its copy.
        unwritten = [
            r.doc.source.content_hash
            for r, res in zip(batch, out, strict=True)
            if res.status == "failed"
        ]
        await self.drop_unused(replaced + unwritten)
        await self.keep_voices(batch, out)
        return out

    async def keep_voices(self, batch: list[_Ready], results: list[FileResult]) -> None:
        """Each written recording's speaker vectors kept (with voices on; else any kept
        before dropped), never failing the write."""
        if self.voiceprints is None:
            return
        for r, res in zip(batch, results, strict=True):
            if res.status not in ("added", "updated") or r.doc.source.kind not in MEDIA_KINDS:
                continue
            voices = dict(r.doc.voices)
            try:
                await asyncio.to_thread(self.voiceprints.save, self.kb, r.doc.source.id, voices)
            except (OSError, ValueError) as exc:
                log.warning("voiceprints of %s not kept: %s", r.doc.source.id, exc)

    async def hold(self, doc: Document, again: bool = True) -> None:
        """Keep what ``doc``'s page serves in the media store (``again=False``: unless it
        was tried before); a copy that cannot be made costs its page the player (said in
        the log), never the source."""
        if self.media is None or doc.original is None:
            return
        keep = functools.partial(self.media.keep, again=again)
        try:
            await asyncio.to_thread(keep, self.kb, doc.source.content_hash, doc.original)
        except Exception as exc:  # unreadable now, changed since it was read, no sound
            log.warning("not kept for its page: %s (%s)", doc.original.path.name, exc)

    async def drop_unused(self, hashes: list[str]) -> None:
        """Delete the kept files of ``hashes`` (replaced versions, sources never written)
        that no live source has."""
        if self.media is None or not hashes:
            return
        try:
            live = {i.source.content_hash for i in await self.store.list_sources(self.kb)}
        except QuorumError as exc:  # Weaviate down: unsure what is live, so nothing deleted
            log.warning("kept copies not checked for their sources: %s", brief(str(exc)))
            return
        for h in set(hashes) - live:
            for path in await asyncio.to_thread(self.media.copies, self.kb, h):
                path.unlink(missing_ok=True)


def _groups(files: Sequence[tuple[Path, Path]]) -> list[list[tuple[Path, Path]]]:
    """Files in reading groups of up to ``READ_GROUP``; a recording is a group of its own,
    so that its transcription (minutes) does not hold back the files read with it."""
    groups: list[list[tuple[Path, Path]]] = []
    current: list[tuple[Path, Path]] = []
    for file in files:
        if file[0].suffix.lower() in MEDIA_SUFFIXES:
            groups.append([file])
            continue
        current.append(file)
        if len(current) == READ_GROUP:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    return groups


def _discover(
    paths: Sequence[Path], roots: Mapping[Path, Path]
) -> tuple[list[tuple[Path, Path]], list[Path]]:
    """Files to read, each with the folder its manifest lookups stop at; missing paths."""
    files: list[tuple[Path, Path]] = []
    missing: list[Path] = []
    # Resolved once, here: a stored path never depends on the folder a later command
    # (``quorum serve``) runs in.
    for given in paths:
        root = given.absolute()
        if not root.exists():
            missing.append(given)
            continue
        base = root if root.is_dir() else roots.get(given, roots.get(root, root.parent))
        files.extend((f, base) for f in discover([root]))
    found = {f for f, _ in files}  # a recording named beside its named transcript: its media
    return [(f, b) for f, b in files if not transcribed_beside(f, found)], missing


def _another_file(stored: str, path: Path, origin: str | None = None, sid: str = "") -> bool:
    """True when ``stored`` (the path or URL a source was ingested from) is a different
    file that still exists, or another URL than ``origin`` (the URL ``path`` was downloaded
    from): an object elsewhere is taken to be there still. A moved or deleted original
    lets the new path take the source over; so does a download's old temporary path."""
    if not stored or stored == (origin or str(path)):
        return False
    if "://" in stored:
        # A URL that names the source itself (zoom://SOURCE-ID/Topic) is that source's,
        # whatever its file name says now.
        return urlsplit(stored).netloc != sid
    try:
        return Path(stored).exists() and not Path(stored).samefile(path)
    except OSError:
        return False


def _listener(progress: Progress, path: str, stage: str = "transcribing") -> OnProgress | None:
    """Transcription (or ``diarizing``) progress, heard on a worker thread, handed to
    ``progress`` on the loop."""
    if stage == "diarizing" and isinstance(progress, SpeakerProgress):
        tell = progress.diarizing
    elif stage == "transcribing" and isinstance(progress, MediaProgress):
        tell = progress.transcribing
    else:
        return None
    loop = asyncio.get_running_loop()
    stop = progress.stop if isinstance(progress, Stoppable) else None

    def heard(done_s: float, total_s: float) -> None:
        if stop is not None and stop.is_set():
            raise Stopped(path)
        loop.call_soon_threadsafe(tell, path, done_s, total_s)

    return heard
