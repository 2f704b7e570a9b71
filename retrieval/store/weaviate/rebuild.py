"""A knowledge base's tenant rebuilt without what was deleted from it, so a removed
source's words leave Weaviate's files within seconds, not whenever a compaction comes.

Why: Weaviate (1.39) deletes an object by writing a tombstone; the words stay in the older
segment until a compaction merges that segment with the tombstone's, and it merges only
segments of the same level, so with no later writes no merge may ever come. No setting
bounds it: ``PERSISTENCE_LSM_SEGMENTS_CLEANUP_INTERVAL_HOURS`` (whole hours) reaches only
the object store, not the keyword index; there is no "compact now". Deleting a tenant
deletes its files at once. So ``purge`` (``Holdings.forget`` calls it after every removal):

1. records a fresh tenant as being built (``tenants``), with a heartbeat while it copies;
2. copies every object of the live tenant's live generations (vectors included; older
   generations and orphans stay behind) into it;
3. switches the knowledge base to it for every process, if no other process switched
   meanwhile (else it starts over from the new live tenant), and records the old one as
   retired;
4. catches up: a write or removal that finished in the old tenant after its objects were
   copied is repeated in the new one (a write still running when the switch comes writes
   itself again into the new tenant: ``writes``);
5. deletes the old tenant a moment later (``GRACE_S``): a read in another process that
   still names it fails and is read again from the new one (``tenants.follows_switch``).

A crash before 3 leaves the old tenant live and the new one a spare that the next start
deletes (``Collections.sweep``); after 3, the retired one the same way. Removals that come
within ``COALESCE_S`` of each other in one process share one rebuild.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import weaviate
from weaviate.classes.query import Filter
from weaviate.collections.classes.data import DataObject

from retrieval.errors import SearchUnavailable
from retrieval.store.weaviate.errors import translate_errors
from retrieval.store.weaviate.schema import SEGMENTS, SOURCES, UNITS
from retrieval.store.weaviate.tenants import GRACE_S, fresh_tenant
from retrieval.store.weaviate.writes import MOVES, Writes

log = logging.getLogger("quorum.store")

COALESCE_S = 0.5  # removals within this of the first share its rebuild
BATCH = 200  # objects per insert while copying (and a heartbeat after each)
PROGRESS_S = 10.0  # a progress line in the log at most this often

Generations = dict[str, int]  # source id -> its live generation (0: written before them)


@dataclass(frozen=True)
class Rebuilt:
    """What one rebuild did."""

    tenant: str  # the knowledge base's tenant from now on
    objects: int  # objects copied (windows, units, source records)
    seconds: float


class _Switched(Exception):
    """Another process switched the knowledge base's tenant during this rebuild."""


class Rebuilds(Writes):
    """``purge``: deletions made physical by rebuilding the tenant."""

    def __init__(self, client: weaviate.WeaviateAsyncClient, url: str, replicas: int = 1) -> None:
        super().__init__(client, url, replicas)
        self._purges: dict[str, asyncio.Future[Rebuilt | None]] = {}
        self._rebuilding: dict[str, asyncio.Lock] = {}

    async def purge(self, kb: str) -> None:
        """Make what was deleted from ``kb`` leave the store's files: the tenant is
        rebuilt without it (one rebuild for the removals of the next ``COALESCE_S``)."""
        if not await self.has_kb(kb):
            return
        pending = self._purges.get(kb)
        if pending is None:
            pending = asyncio.ensure_future(self._purge_soon(kb))
            self._purges[kb] = pending
        await asyncio.shield(pending)

    async def _purge_soon(self, kb: str) -> Rebuilt | None:
        await asyncio.sleep(COALESCE_S)
        async with self._rebuilding.setdefault(kb, asyncio.Lock()):
            # From here on a removal may come after the copy: it needs a rebuild of its own.
            self._purges.pop(kb, None)
            return await self.rebuild(kb)

    async def rebuild(self, kb: str, grace_s: float = GRACE_S) -> Rebuilt:
        """Copy ``kb``'s live objects to a fresh tenant, switch to it, delete the old."""
        t0 = time.monotonic()
        with translate_errors(self.url):
            await self.sweep()
        for attempt in range(1, MOVES + 1):
            with translate_errors(self.url):
                old = await self.names.live(kb, fresh=True)
                new = fresh_tenant(kb)
                log.info("Rebuilding %s's index without what was removed (%s)...", kb, new)
                await self.names.spare(kb, new, "built")
                try:
                    await self.create_tenant(new)
                    copied, objects = await self._copy_all(kb, old, new)
                    if await self.names.live(kb, fresh=True) != old:
                        raise _Switched
                except BaseException as exc:
                    await self._abandon(new)
                    if isinstance(exc, _Switched) and attempt < MOVES:
                        continue
                    raise
                await self.names.spare(kb, old, "retired")
                await self.names.switch(kb, new)
                await self.names.unspare(new)
                objects += await self._catch_up(old, new, copied)
            break
        else:  # pragma: no cover - the loop raises or breaks
            raise AssertionError("unreachable")
        await asyncio.sleep(grace_s)  # reads under way end; later ones follow the switch
        with translate_errors(self.url):
            await self.drop_tenant(old)
            await self.names.unspare(old)
        took = time.monotonic() - t0
        log.info("Rebuilt %s's index: %d objects in %.1f s.", kb, objects, took)
        return Rebuilt(new, objects, took)

    async def _abandon(self, tenant: str) -> None:
        """Delete a tenant this rebuild made and will not use (best effort: else the
        next start's sweep does)."""
        try:
            await self.drop_tenant(tenant)
            await self.names.unspare(tenant)
        except Exception:
            log.warning("could not delete the unused tenant %s; the next start will", tenant)

    def _at(self, name: str, tenant: str) -> Any:
        return self._use(name).with_tenant(tenant)

    async def _records(self, tenant: str) -> dict[str, tuple[int, Any]]:
        """Each source record of ``tenant`` (with its vector) and its live generation."""
        out: dict[str, tuple[int, Any]] = {}
        async for o in self._at(SOURCES, tenant).iterator(include_vector=True):
            out[str(o.properties.get("source_id"))] = (_generation(o), o)
        return out

    async def _copy_all(self, kb: str, old: str, new: str) -> tuple[Generations, int]:
        """Every live object of ``old`` written to ``new``, records last; the generations
        copied, and how many objects."""
        records = await self._records(old)
        live = {sid: gen for sid, (gen, _) in records.items()}
        copied = 0
        said = time.monotonic()
        for name in (SEGMENTS, UNITS):
            batch: list[Any] = []
            async for o in self._at(name, old).iterator(include_vector=True):
                if live.get(str(o.properties.get("source_id"))) != _generation(o):
                    continue  # an older generation or an orphan: left behind
                batch.append(o)
                if len(batch) >= BATCH:
                    copied += await self._put(name, new, batch)
                    batch = []
                    await self.names.spare(kb, new, "built")  # the heartbeat
                    if time.monotonic() - said >= PROGRESS_S:
                        said = time.monotonic()
                        log.info("... %s: %d objects copied", kb, copied)
            copied += await self._put(name, new, batch)
        copied += await self._put(SOURCES, new, [o for _, o in records.values()])
        return live, copied

    async def _catch_up(self, old: str, new: str, copied: Generations) -> int:
        """What changed in ``old`` after it was copied, repeated in ``new``: sources
        written there since (unless ``new`` has a newer write of them), and sources
        removed there since (unless written to ``new`` again); how many objects."""
        records = await self._records(old)
        before = {sid: gen for sid, (gen, _) in records.items()}
        now = {sid: gen for sid, (gen, _) in (await self._records(new)).items()}
        objects = 0
        for sid, gen in before.items():
            if copied.get(sid) == gen or now.get(sid, -1) >= gen:
                continue
            for name in (SEGMENTS, UNITS):
                units = [o async for o in _of(self._at(name, old), sid, gen)]
                objects += await self._put(name, new, units)
            objects += await self._put(SOURCES, new, [records[sid][1]])
        for sid, gen in copied.items():
            if sid not in before and now.get(sid) == gen:
                where = Filter.by_property("source_id").equal(sid)
                await self._at(SOURCES, new).data.delete_many(where=where)
                for name in (SEGMENTS, UNITS):
                    await self._at(name, new).data.delete_many(where=where & _generation_is(gen))
        return objects

    async def _put(self, name: str, tenant: str, objects: list[Any]) -> int:
        """``objects`` (as read, vectors included) written to ``name`` in ``tenant``."""
        if not objects:
            return 0
        result = await self._at(name, tenant).data.insert_many(
            [
                DataObject(
                    properties={k: v for k, v in o.properties.items() if v is not None},
                    uuid=o.uuid,
                    vector=o.vector,
                )
                for o in objects
            ]
        )
        if result.errors:
            first = next(iter(result.errors.values()))
            raise SearchUnavailable(
                f"Weaviate at {self.url} refused a copy while rebuilding: {first.message}"
            )
        return len(objects)


def _generation(obj: Any) -> int:
    return int(obj.properties.get("generation") or 0)


def _generation_is(gen: int) -> Any:
    if gen:
        return Filter.by_property("generation").equal(gen)
    return Filter.by_property("generation").is_none(True)


async def _of(col: Any, source_id: str, gen: int) -> AsyncIterator[Any]:
    """A source's objects of one generation in ``col``, vectors included."""
    where = Filter.by_property("source_id").equal(source_id) & _generation_is(gen)
    offset = 0
    while True:
        page = await col.query.fetch_objects(
            filters=where, limit=500, offset=offset, include_vector=True
        )
        for o in page.objects:
            yield o
        if len(page.objects) < 500:
            return
        offset += 500
