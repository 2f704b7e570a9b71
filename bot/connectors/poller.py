"""A polling connector's rules, written once for folders and buckets: a ``Feed`` lists
what is there (``Seen``: key, size, stamp) and queues a job for one item; ``Poller`` decides.

- An item is queued only once it stops changing: the same size and stamp at two polls
  in a row (a file still being copied in is left alone).
- A stable item whose content hash is the one already ingested is not queued again (a
  restart, a ``touch``, another replica taking over): the hash is kept per item in the
  database (``items``).
- An item that cannot be read, or whose job fails, is counted and reported (the status
  row's error names it) and tried again only once it changes.
- An item no longer listed is forgotten (its source removed, through a job) only when the
  feed follows deletes; otherwise its row stays, so it coming back unchanged costs nothing.
- An item whose source was forgotten (``quorum remove``, ``/forget``) is known by a keyed
  hash of its version only (``items``): listed unchanged it stays out; changed, it is new.
- One process polls a connector at a time: the status row's lease (``status``).
- Each item is its own source: its job names the id (``Feed.source_id``: its path under
  the folder or key under the prefix, slugged; the key's hash after it when another item
  has that one), unless its metadata names another. The id is kept in the item's row once
  written and never changes (an item ingested before ids came from paths keeps its
  file-name id). Items that share one from before (two same-named objects under two
  prefixes once overwrote each other) are parted: the one written last keeps it, the
  others are ingested again under their own.
- An item written whose source shows another path than where it came from (an S3
  object's written before sources showed their ``s3://`` URL shows its temporary
  download's) is corrected once a process lists it (``Feed.origin``, ``Origins``: the
  ``Writer``'s ``show_origins``), without ingesting it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

from bot.connectors.items import Item, ItemTable
from bot.connectors.status import ConnectorStatuses
from bot.jobs import Job, JobQueue
from bot.models import Actor
from retrieval.errors import QuorumError
from retrieval.ingest.metadata import slug

log = logging.getLogger("quorum.connectors")

LEASE_MIN_S = 60.0  # a lease outlives a slow poll (hashing a long recording)


@dataclass(frozen=True)
class Seen:
    """One file or object as a listing shows it."""

    key: str  # a file's path, an object's key
    size: int
    stamp: str  # what changes when it does: a file's mtime, an object's ETag


@dataclass(frozen=True)
class Listing:
    """What one poll listed. ``complete``: the listing reached its end, so an item not
    seen since ``pass_start`` is gone. ``cursor``: where the next poll resumes."""

    seen: Sequence[Seen]
    complete: bool
    pass_start: float
    cursor: str | None = None
    kept: frozenset[str] = frozenset()  # not listed, yet not gone (media beside a transcript)


Origins = Callable[[str, Mapping[str, str]], Awaitable[object]]
"""Makes sources (kb; source id -> where it came from) show where they came from
(``Writer.show_origins``)."""


class Unreadable(QuorumError):
    """An item Quorum cannot read (its message says why, in one sentence)."""


class Feed(Protocol):
    """What a polling connector lists, and how it queues one item."""

    name: str
    kind: str
    kb: str
    poll_s: float
    follow_deletes: bool

    async def list(self, cursor: str | None) -> Listing:
        """The items from ``cursor`` on; a QuorumError says why the listing failed."""
        ...

    async def probe(self) -> str | None:
        """Why the feed cannot be listed now, in one sentence (None: it can)."""
        ...

    async def digest(self, seen: Seen) -> str:
        """The item's content hash (``Unreadable`` when it cannot be read)."""
        ...

    async def queue(
        self, jobs: JobQueue, seen: Seen, digest: str, by: Actor, source_id: str | None
    ) -> Job:
        """The job that adds (or updates) the item, as ``source_id`` (None: the
        ingest's rule) unless its metadata names another."""
        ...

    def source_id(self, key: str) -> str | None:
        """The readable source id a new item becomes (None: the ingest's own rule, the
        file's stem unless its metadata names one)."""
        ...

    def origin(self, key: str) -> str | None:
        """The path an item's source shows when it is not the key (an object's URL)."""
        ...


class Poller:
    """Polls one feed until cancelled, while this process holds its lease."""

    def __init__(
        self,
        feed: Feed,
        statuses: ConnectorStatuses,
        items: ItemTable,
        jobs: JobQueue,
        holder: str,
        *,
        settle: bool = False,
        origins: Origins | None = None,
    ) -> None:
        self.feed, self.statuses, self.items, self.jobs = feed, statuses, items, jobs
        self.holder = holder
        self.settle = settle  # run the jobs here when no worker is alive (SQLite, no workers)
        self.by = Actor(feed.kind, feed.name)
        self.origins = origins
        self._shown: set[str] = set()  # keys whose source's path this process checked
        self._settling: set[asyncio.Task[object]] = set()
        self._in_hand: set[int] = set()  # jobs this process is settling
        self._held: dict[str, str] = {}  # source id -> the item's key that has it
        # Ids chosen here for items whose job has not ended: an item's row names its source
        # only once it is written (a failed first job must not make its removal forget
        # another source of that id).
        self._chosen: dict[str, str] = {}

    def _settled(self, task: asyncio.Task[object], jobs: Sequence[Job]) -> None:
        self._settling.discard(task)
        self._in_hand.difference_update(j.id for j in jobs)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.warning("connector %s: running its jobs failed: %s", self.feed.name, exc)

    async def run(self) -> None:
        """Poll every ``poll_s`` while holding the lease, until cancelled."""
        feed = self.feed
        ttl = max(LEASE_MIN_S, 3 * feed.poll_s)
        try:
            while True:
                try:
                    await self.statuses.register(feed.name, feed.kind, feed.kb)
                    if await self.statuses.lease(feed.name, self.holder, ttl):
                        await self.poll()
                except QuorumError as exc:  # the database: the next round tries again
                    log.warning("connector %s: %s", feed.name, exc)
                except Exception:  # never the end of polling: said, and tried again
                    log.exception("connector %s: a poll failed", feed.name)
                    with contextlib.suppress(Exception):
                        await self.statuses.error(
                            feed.name, f"{feed.name}: a poll failed unexpectedly (see the log)."
                        )
                await asyncio.sleep(feed.poll_s)
        finally:
            for task in self._settling:
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.shield(self.statuses.release(feed.name, self.holder))

    async def poll(self) -> None:
        """One poll: list, queue what became stable, note what ended and what is gone."""
        feed = self.feed
        status = await self.statuses.get(feed.name)
        try:
            listing = await feed.list(status.cursor if status else None)
        except QuorumError as exc:
            log.warning("connector %s: %s", feed.name, exc)
            await self.statuses.ran(feed.name, next_run=time.time() + feed.poll_s, error=str(exc))
            return
        known = await self.items.all(feed.name)
        self._held = await self._part(known)
        for key, chosen in self._chosen.items():
            self._held.setdefault(chosen, key)
        queued: list[Job] = []
        listed: set[str] = set()
        for seen in listing.seen:
            item = known.get(seen.key)
            # Hashed only when it has no row of its own (new, or its source forgotten): the
            # same version of a forgotten item stays out.
            if (
                item is None
                and (gone := self.items.forgotten(feed.name, seen.key, seen.size, seen.stamp))
                in known
            ):
                listed.add(gone)
                continue
            listed.add(seen.key)
            job = await self._one(seen, item)
            if job is not None:
                queued.append(job)
        await self.items.touch(feed.name, sorted(listed))
        await self._show_origins([known[k] for k in listed if k in known])
        if listing.complete:
            for item in known.values():
                there = item.key in listed or item.key in listing.kept
                if not there and item.seen_at < listing.pass_start:
                    removal = await self._gone(item)
                    queued += [removal] if removal is not None else []
        if self.settle and (mine := [j for j in queued if j.id not in self._in_hand]):
            self._in_hand.update(j.id for j in mine)
            task: asyncio.Task[object] = asyncio.create_task(self.jobs.settle(mine))
            self._settling.add(task)
            task.add_done_callback(lambda t: self._settled(t, mine))
        failing = [i for i in (await self.items.all(feed.name)).values() if i.state == "failed"]
        await self.statuses.ran(
            feed.name,
            next_run=time.time() + feed.poll_s,
            cursor=listing.cursor,
            error=_failing(failing),
        )

    async def _one(self, seen: Seen, item: Item | None) -> Job | None:
        """One listed item: noted, queued once stable, its job's end read."""
        name = self.feed.name
        changed = item is None or (item.size, item.stamp) != (seen.size, seen.stamp)
        if item is None or changed or item.state == "gone":
            if item is None or item.state != "growing":
                await self.statuses.count(name, "seen")
            fresh = Item(name, seen.key, seen.size, seen.stamp, None, "growing")
            # What its last job was stays known: the same content back is not queued again.
            if item is None:
                await self.items.put(fresh)
            else:
                await self.items.update(item.but(size=seen.size, stamp=seen.stamp, state="growing"))
            return None
        if item.state == "growing":  # the same at two polls in a row: stable
            try:
                digest = await self.feed.digest(seen)
            except Unreadable as exc:
                await self.statuses.count(name, "failed")
                await self.items.update(item.but(state="failed", error=str(exc)))
                return None
            if digest == item.digest and item.job_id is not None:
                # Touched, or back as it was: the same content as its last job's.
                return await self._ended(item.but(state="queued"), count=False)
            sid = self._id_for(seen.key, item)
            job = await self.feed.queue(self.jobs, seen, digest, self.by, sid)
            await self.statuses.count(name, "queued")
            # Not put: a forget while it was queued left a ``forgotten`` row that wins.
            await self.items.update(item.but(state="queued", digest=digest, job_id=job.id))
            return job
        if item.state == "queued" and item.job_id is not None:
            return await self._ended(item)
        return None

    async def _show_origins(self, listed: Sequence[Item]) -> None:
        """Sources of ``listed`` items written (once per process) show where they came
        from (``origins``); the store unreachable, the next poll tries again."""
        done = [i for i in listed if i.state == "done" and i.source_id]
        wanted: dict[str, str] = {}
        for item in done:
            url = self.feed.origin(item.key)
            if item.key not in self._shown and url is not None and item.source_id:
                wanted[item.source_id] = url
        held = Counter(i.source_id for i in done)  # items sharing one: not told apart here
        wanted = {sid: url for sid, url in wanted.items() if held[sid] == 1}
        if self.origins is None or not wanted:
            return
        try:
            await self.origins(self.feed.kb, wanted)
        except QuorumError as exc:
            log.warning("connector %s: %s", self.feed.name, exc)
            return
        self._shown.update(i.key for i in done)

    async def _part(self, known: dict[str, Item]) -> dict[str, str]:
        """Each source id the feed's items have, with the item that has it. Items sharing
        one are parted (the last written keeps it; the others are queued again with their
        own), where the feed names sources."""
        held: dict[str, str] = {}
        last = sorted(known.values(), key=lambda i: (i.state == "done", i.job_id or 0))
        for item in reversed(last):
            if item.source_id is None:
                continue
            if item.source_id not in held:
                held[item.source_id] = item.key
            elif self.feed.source_id(item.key) is not None:
                parted = item.but(source_id=None, digest=None, state="growing")
                known[item.key] = parted
                await self.items.update(parted)
        return held

    def _id_for(self, key: str, item: Item) -> str | None:
        """The source id ``item`` is ingested as: the one it has, else the feed's readable
        one, with the key's hash after it when another item has that (None: the ingest's)."""
        if item.source_id is not None:
            return item.source_id
        if key in self._chosen:
            return self._chosen[key]
        readable = self.feed.source_id(key)
        if readable is None:
            return None
        sid, digest = readable, hashlib.sha256(key.encode()).hexdigest()
        for n in (10, 20, 64):
            if self._held.get(sid, key) == key:
                break
            sid = f"{readable[: 199 - n]}-{digest[:n]}"
        self._held[sid], self._chosen[key] = key, sid
        return sid

    async def _ended(self, item: Item, *, count: bool = True) -> Job | None:
        """A queued item's job, if it has ended: done (with its source) or failed. The
        job when it has not (a previous process queued it and stopped: run it here too). Its
        row is updated, not put: a removal meanwhile left a ``forgotten`` row that wins."""
        job = await self.jobs.table.get(item.job_id) if item.job_id is not None else None
        if job is None or job.state in ("queued", "running"):
            if not count:  # the job still runs (or was deleted): wait for it as queued
                await self.items.update(item)
            return job
        self._chosen.pop(item.key, None)
        if job.state == "done":
            sid = job.source_id or item.source_id
            await self.items.update(item.but(state="done", source_id=sid, error=None))
            return None
        if count:
            await self.statuses.count(self.feed.name, "failed")
        why = job.error or ("its job was cancelled" if job.state == "cancelled" else "failed")
        await self.items.update(item.but(state="failed", error=why))
        return None

    async def _gone(self, item: Item) -> Job | None:
        """An item no longer listed: its source forgotten (the removal's job) when deletes
        are followed."""
        self._chosen.pop(item.key, None)
        if item.state == "gone":
            return None
        if item.state == "forgotten":  # deleted or changed: its hash stands for nothing now
            await self.items.drop(self.feed.name, item.key)
            return None
        if not self.feed.follow_deletes:
            await self.items.update(item.but(state="gone"))
            return None
        job = None
        if item.source_id is not None:
            job = await self.jobs.remove(self.feed.kb, item.source_id, self.by)
            await self.statuses.count(self.feed.name, "forgotten")
        await self.items.drop(self.feed.name, item.key)
        return job


def readable_id(relative: str, key: str) -> str:
    """The readable source id of an item at ``relative`` (its path under the folder, its key
    under the prefix): without its type, slugged (``team-a/standup.m4a`` ->
    ``team-a-standup``); ``key``'s hash when nothing readable is left."""
    readable = slug(str(PurePosixPath(relative).with_suffix("")))[:200].strip("-")
    return readable or "item-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def _failing(items: Sequence[Item]) -> str | None:
    """The status row's error while some items could not be ingested (None: none)."""
    if not items:
        return None
    first = items[0]
    more = f" and {len(items) - 1} more" if len(items) > 1 else ""
    return (
        f"{first.key} could not be ingested ({first.error}){more}; "
        "each is tried again once it changes."
    )
