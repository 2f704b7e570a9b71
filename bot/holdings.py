"""What Quorum holds about each source, and forgetting it whole.

A source's words can live in six places: its passages in every level of the index (the
summary is one), the transcript kept in the data dir's ``transcripts/`` cache (by the
audio's content hash), the file a chat upload left in ``uploads/``, the media store's copy
its page serves, stored answers that quoted it, and whatever a feature derives from it.
``forget`` removes all of them: the cached transcript only when no other live source was
made from the same audio, the user's own files never (Quorum did not make them), and what
a feature derived through the ``ForgetHook`` it registers (``add_hook``, in
``bot.wiring.holdings_of``, where every door builds its ``Holdings``). Before anything
is deleted, the work in flight that would write the source back is stopped (``add_stop``:
the jobs adding it are cancelled, and one whose write lands anyway removes it again).
Last, the store purges its files of the removed words (Weaviate's: the knowledge base's
tenant rebuilt without the source), so no file under the data dir keeps them.
Every add, update and removal is written to the audit trail.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bot.sessions import Actor, AuditEntry, Sessions
from bot.sessions.records import AuditAction
from retrieval.links.kept_media import MediaStore
from retrieval.models import Source, SourceInfo
from retrieval.search.search import SearchService
from retrieval.service import DATA_PARTS, TRANSCRIPTS
from retrieval.speakers.voiceprints import Voiceprints
from retrieval.store import Store
from retrieval.write.transcribe import Transcriber

if TYPE_CHECKING:
    from retrieval.write.indexer import FileResult

log = logging.getLogger("quorum.holdings")

ForgetHook = Callable[[str, Source], Awaitable[None]]
"""Called with (kb, source) once a source is removed: drop what was derived from it."""

# The data dir's parts, for ``quorum doctor``: kind -> names at the top of the data dir.
MEDIA = "media"  # what pages serve, kept at ingest by content hash (retrieval.links.kept_media)
KINDS: dict[str, tuple[str, ...]] = DATA_PARTS | {
    "uploads": ("uploads",),
    "media": (MEDIA,),
    "sessions": ("sessions.sqlite3", "sessions.sqlite3-wal", "sessions.sqlite3-shm"),
}


@dataclass(frozen=True)
class Forgotten:
    """What removing a source took away."""

    source_id: str
    passages: int
    files: tuple[str, ...] = ()  # files deleted from the data dir
    answers: int = 0  # stored answers that lost its words
    shared_transcript: bool = False  # kept: another live source was made from that audio


@dataclass(frozen=True)
class Held:
    """One source as ``quorum sources --json`` reports it."""

    info: SourceInfo
    size_bytes: int | None  # the source file, when it can still be read
    kept_bytes: int  # what Quorum keeps of it in the data dir (upload copy, transcript)
    media_kept: bool  # Quorum keeps a copy of the recording or file (a chat upload, a page copy)
    transcript_kept: bool  # a transcript copy is in the transcripts cache
    added: AuditEntry | None  # who added it and when, when the audit trail knows

    def json(self) -> dict[str, Any]:
        """The fields ``quorum sources --json`` and the API add to a source."""
        # The audit trail's date, else (added before it existed) when the index wrote it.
        at = self.added.at if self.added is not None else self.info.indexed_at
        added_at = datetime.fromtimestamp(at, UTC).isoformat(timespec="seconds") if at else None
        return {
            "size_bytes": self.size_bytes,
            "kept_bytes": self.kept_bytes,
            "added_at": added_at,
            "added_by": str(self.added.actor) if self.added else None,
            "media_kept": self.media_kept,
            "transcript_kept": self.transcript_kept,
        }


def _size(path: Path) -> int:
    """Bytes under ``path`` (a file or a folder), 0 when it is gone."""
    try:
        if path.is_file():
            return path.stat().st_size
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    except OSError:
        return 0


def data_sizes(data_dir: Path) -> dict[str, int]:
    """The data dir's bytes by kind: index, transcripts, uploads, sessions, other."""
    sizes = {kind: 0 for kind in KINDS} | {"other": 0}
    owner = {name: kind for kind, names in KINDS.items() for name in names}
    if data_dir.is_dir():
        for entry in data_dir.iterdir():
            sizes[owner.get(entry.name, "other")] += _size(entry)
    return sizes


class Holdings:
    """What Quorum holds per source, the audit trail of it, and removal that is complete."""

    def __init__(
        self,
        *,
        store: Store,
        search: SearchService,
        sessions: Sessions,
        data_dir: Path,
        transcriber: Transcriber | None = None,
        hooks: Sequence[ForgetHook] = (),
        media: MediaStore | None = None,
    ) -> None:
        self.store, self.search, self.sessions = store, search, sessions
        self.data_dir = data_dir
        self.uploads_dir = data_dir / "uploads"
        self.transcriber = transcriber or Transcriber(cache_dir=data_dir / TRANSCRIPTS)
        self.media = media or MediaStore(data_dir / MEDIA)
        self.hooks = list(hooks)
        self.stops: list[ForgetHook] = []

    def add_stop(self, hook: ForgetHook) -> None:
        """Call ``hook`` before each removal deletes anything: it stops the work in flight
        that would write the source back (the jobs adding it)."""
        self.stops.append(hook)

    def add_hook(self, hook: ForgetHook) -> None:
        """Call ``hook`` after each removal (a feature dropping what it derived)."""
        self.hooks.append(hook)

    async def note(self, kb: str, source_id: str, title: str, actor: Actor, update: bool) -> None:
        """Write an add (or update) of a source to the audit trail."""
        entry = AuditEntry("updated" if update else "added", kb, source_id, actor, title)
        await self.sessions.record_audit(entry)

    async def note_ingest(self, kb: str, results: Sequence[FileResult], actor: Actor) -> None:
        """Write each source an ingest added or updated to the audit trail."""
        changed = [r for r in results if r.status in ("added", "updated") and r.source_id]
        if not changed:
            return
        titles = {i.source.id: i.source.title for i in await self.store.list_sources(kb)}
        for r in changed:
            sid = str(r.source_id)
            await self.note(kb, sid, titles.get(sid, ""), actor, r.status == "updated")

    async def note_speakers(self, kb: str, source: Source, actor: Actor, detail: str) -> None:
        """Write a rename or merge of a source's speakers to the audit trail."""
        entry = AuditEntry("speakers", kb, source.id, actor, source.title, detail)
        await self.sessions.record_audit(entry)

    def is_upload(self, path: str) -> bool:
        """True when ``path`` is a file Quorum keeps (a chat upload), not the user's own."""
        if not path:
            return False
        try:
            return Path(path).resolve().is_relative_to(self.uploads_dir.resolve())
        except (OSError, ValueError):
            return False

    def _digests(
        self, source: Source, kept: dict[str, list[Path]], hash_file: bool = True
    ) -> set[str]:
        """The content hashes of the audio ``source`` was transcribed from (its file read
        only when the kept transcripts' names do not tell, and ``hash_file``)."""
        # Here, not at the top: the readers cost a one-shot `quorum search` a second.
        from retrieval.ingest.media import MEDIA_SUFFIXES, file_digest

        # With no sidecar a recording's content hash is the hash of its audio's hash, so
        # the kept transcripts' names find it even after the file is gone.
        by_hash = {hashlib.sha256(d.encode()).hexdigest(): d for d in kept}
        digests = {by_hash[source.content_hash]} if source.content_hash in by_hash else set()
        path = Path(source.path) if source.path and hash_file else None
        if not digests and path and path.suffix.lower() in MEDIA_SUFFIXES and path.is_file():
            try:
                digests.add(file_digest(path))
            except Exception:  # unreadable now: nothing to find by it
                log.warning("could not hash %s", path)
        return digests

    def _shares(self, other: Source, source: Source, digests: set[str]) -> bool:
        """True when ``other`` was made from the same audio as ``source``."""
        from retrieval.ingest.media import MEDIA_SUFFIXES, file_digest  # as in _digests

        if other.content_hash == source.content_hash:
            return True
        if other.content_hash in {hashlib.sha256(d.encode()).hexdigest() for d in digests}:
            return True
        # The same audio with another sidecar: hashed only when the sizes match.
        mine, theirs = Path(source.path), Path(other.path)
        try:
            if (
                not other.path
                or theirs.suffix.lower() not in MEDIA_SUFFIXES
                or theirs.stat().st_size != mine.stat().st_size
            ):
                return False
            return file_digest(theirs) in digests
        except Exception:  # either file is gone or unreadable: not known to be shared
            return False

    async def _shared(self, kb: str, source: Source, digests: set[str]) -> bool:
        """True when another live source, in any knowledge base, has the same audio."""
        for name in sorted(set(await self.store.knowledge_bases()) | {kb}):
            for info in await self.store.list_sources(name):
                other = info.source
                if name == kb and other.id == source.id:
                    continue
                if await asyncio.to_thread(self._shares, other, source, digests):
                    return True
        return False

    async def forget(
        self,
        kb: str,
        source_id: str,
        actor: Actor,
        action: AuditAction = "removed",
        purge: bool = True,
    ) -> Forgotten:
        """Remove a source and every copy of its words Quorum made; ``passages`` is 0 when
        there was no such source. ``action`` is how the audit trail names it. Unless
        ``purge`` is False (the caller purges once after many), the index's files are
        rid of its words before this returns (``purge``)."""
        found = [i.source for i in await self.store.list_sources(kb) if i.source.id == source_id]
        for stop in self.stops if found else []:  # first: a write landing later is undone
            await stop(kb, found[0])
        passages = await self.store.delete_source(kb, source_id)
        self.search.forget_sources(kb)
        if not found:
            return Forgotten(source_id, passages)
        source = found[0]
        kept = await asyncio.to_thread(self.transcriber.kept)
        digests = await asyncio.to_thread(self._digests, source, kept)
        shared = bool(digests) and await self._shared(kb, source, digests)
        doomed = [] if shared else [f for d in digests for f in kept.get(d, [])]
        if self.is_upload(source.path):
            doomed.append(Path(source.path))
        # What its page served (the media store's copy, by content hash, unless another
        # live source of this knowledge base is the same file) goes with it.
        doomed += await self._media_copies(kb, source)
        files = await asyncio.to_thread(unlink, doomed)
        answers = await self.sessions.scrub_answers(kb, source_id)
        for hook in self.hooks:
            await hook(kb, source)
        detail = f"{passages} passages, {len(files)} files, {answers} answers scrubbed"
        await self.sessions.record_audit(
            AuditEntry(action, kb, source_id, actor, source.title, detail)
        )
        # Again, now that the trail says it: an answer being written meanwhile (in this
        # process or another) was stored before this or sees the removal as it is stored.
        answers += await self.sessions.scrub_answers(kb, source_id)
        try:
            await self.sessions.purge()
        except Exception:  # the removal is done; only the database's own files may lag
            log.warning("could not purge the session database's files after a removal")
        if purge:
            await self.purge([kb])
        return Forgotten(source_id, passages, tuple(files), answers, shared)

    async def purge(self, kbs: Sequence[str]) -> None:
        """Rid the index's files of what was removed from ``kbs`` (the store rebuilds
        each one's passages without it). A failure is logged, never raised: the removal
        is done and invisible; only the files lag, until the next removal's purge."""
        for kb in sorted(set(kbs)):
            try:
                await self.store.purge(kb)
            except Exception:
                log.exception("could not rid the index's files of what was removed from %s", kb)

    async def _media_copies(self, kb: str, source: Source) -> list[Path]:
        """The media store's copies of a removed ``source`` no live source still uses."""
        live = {i.source.content_hash for i in await self.store.list_sources(kb)}
        return await asyncio.to_thread(self.media.unused, kb, source, live)

    async def held(self, kb: str) -> list[Held]:
        """Every source of ``kb`` with its size, what is kept of it, and who added it."""
        infos = await self.store.list_sources(kb)
        added = await self.sessions.added(kb)
        kept = await asyncio.to_thread(self.transcriber.kept)
        # Files are hashed only while some kept transcript is not matched by a source's
        # content hash (a recording with a sidecar): listing never reads every video.
        named = {hashlib.sha256(d.encode()).hexdigest() for d in kept}
        unmatched = len(kept) > len(named & {i.source.content_hash for i in infos})
        return [
            await asyncio.to_thread(
                self._held, kb, info, kept, added.get(info.source.id), unmatched
            )
            for info in infos
        ]

    def _held(
        self,
        kb: str,
        info: SourceInfo,
        kept: dict[str, list[Path]],
        added: AuditEntry | None,
        hash_file: bool,
    ) -> Held:
        source = info.source
        path = Path(source.path) if source.path else None
        size = path.stat().st_size if path and path.is_file() else None
        digests = self._digests(source, kept, hash_file)
        transcripts = [f for d in digests for f in kept.get(d, [])]
        copies = self.media.copies(kb, source.content_hash)  # what its page serves
        if self.is_upload(source.path) and size is not None:
            copies.append(Path(source.path))
        kept_bytes = sum(_size(f) for f in [*transcripts, *copies])
        return Held(info, size, kept_bytes, bool(copies), bool(transcripts), added)


def forget_voices(voiceprints: Voiceprints) -> ForgetHook:
    """The hook that deletes a forgotten source's voiceprints (kept whatever
    ``QUORUM_VOICES`` says now: an earlier run may have kept some)."""

    async def hook(kb: str, source: Source) -> None:
        await asyncio.to_thread(voiceprints.drop, kb, source.id)

    return hook


def unlink(paths: list[Path]) -> list[str]:
    """Delete ``paths``; the ones that went."""
    gone: list[str] = []
    for path in paths:
        try:
            path.unlink()
            gone.append(str(path))
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not delete %s: %s", path, exc)
    return gone
