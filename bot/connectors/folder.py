"""``QUORUM_WATCH``: a folder polled for recordings, transcripts and documents (no file
system events: they miss network shares and sync tools' renames, and polling needs no
dependency). What it lists follows ``quorum ingest``'s rules (``retrieval.ingest.discover``:
hidden files, metadata and unsupported types skipped, a recording beside its transcript
kept as that transcript's media); a file's stamp covers its ``.meta.json`` sidecar and
the recording beside it, so a change to either updates the source."""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from pathlib import Path

from bot.connectors.poller import Listing, Seen, Unreadable, readable_id
from bot.connectors.settings import Watched
from bot.jobs import Job, JobQueue
from bot.models import Actor
from retrieval.errors import ConfigError
from retrieval.ingest import discover, recording_beside
from retrieval.ingest.metadata import sidecar_path


def companions(path: Path) -> list[Path]:
    """The files that belong to ``path``'s source: its sidecar, the recording beside it."""
    found = [sidecar_path(path), recording_beside(path)]
    return [p for p in found if p is not None and p.is_file()]


class FolderFeed:
    """One watched folder as a polling connector's ``Feed``."""

    kind = "folder"

    def __init__(self, watched: Watched, poll_s: float, follow_deletes: bool) -> None:
        self.folder, self.kb = watched.folder, watched.kb
        self.name = watched.name
        self.poll_s, self.follow_deletes = poll_s, follow_deletes

    async def list(self, cursor: str | None) -> Listing:
        """Every file the folder holds now (a whole pass each poll)."""
        return await asyncio.to_thread(self._list, time.time())

    async def probe(self) -> str | None:
        """Why the folder cannot be listed (None: it can)."""
        try:
            await asyncio.to_thread(self._check)
        except ConfigError as exc:
            return str(exc)
        return None

    def _check(self) -> None:
        if not self.folder.is_dir() or not os.access(self.folder, os.R_OK | os.X_OK):
            raise ConfigError(
                f"QUORUM_WATCH: {self.folder} is not a folder Quorum can read; create it, "
                "mount it, or fix the path."
            )

    def _list(self, started: float) -> Listing:
        self._check()
        seen: list[Seen] = []
        kept: set[str] = set()
        for path in discover([self.folder]):
            try:
                parts = [path, *companions(path)]
                stats = [p.stat() for p in parts]
            except OSError:  # removed while listing: the next poll sees it gone
                continue
            size = sum(s.st_size for s in stats)
            stamp = ";".join(
                f"{p.name}:{s.st_size}:{s.st_mtime_ns}" for p, s in zip(parts, stats, strict=True)
            )
            seen.append(Seen(str(path), size, stamp))
            kept.update(str(p) for p in parts[1:])
        return Listing(seen, complete=True, pass_start=started, kept=frozenset(kept))

    def source_id(self, key: str) -> str:
        """The readable id a new file's source gets (``readable_id``)."""
        path = Path(key)
        under = path.relative_to(self.folder) if path.is_relative_to(self.folder) else path
        return readable_id(under.as_posix(), key)

    def origin(self, key: str) -> None:
        """A file's source shows its path, the key itself: nothing to correct."""
        return None

    async def digest(self, seen: Seen) -> str:
        """The content hash of the file and its companions."""
        return await asyncio.to_thread(_digest, Path(seen.key))

    async def queue(
        self, jobs: JobQueue, seen: Seen, digest: str, by: Actor, source_id: str | None
    ) -> Job:
        """The file's job; its manifests (``quorum.yaml``) are looked up to the folder."""
        root = str(self.folder)
        return await jobs.add_one(self.kb, seen.key, digest, by, root=root, source_id=source_id)


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    try:
        for part in [path, *companions(path)]:
            with part.open("rb") as f:
                while block := f.read(1 << 20):
                    h.update(block)
    except OSError as exc:
        raise Unreadable(f"{path.name}: {exc.strerror or exc}") from exc
    return h.hexdigest()
