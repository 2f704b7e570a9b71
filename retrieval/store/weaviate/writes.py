"""Writes to the store: idempotent upserts, many documents at a time, deletes and the
clean-up of what a crashed write left.

A source becomes visible whole or not at all. Each write of a source is a *generation*
(a microsecond timestamp): its segments are written under new ids carrying that
generation, then the source record is written naming it (the flip), then older
generations are deleted. Every read keeps only segments of a source's live generation,
so a crash (of Quorum or of Weaviate) mid-write leaves invisible orphans, never half a
source; ``clean_orphans`` (run at the start of each ingest) deletes them: an older
generation of a live source at once, a generation no record names once it is an hour
old (a younger one may be another ingest still writing; README says the same). The
clean-up after a flip is best-effort: if Weaviate fails then, the new version is live
all the same and the write reports it so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from weaviate.classes.aggregate import GroupByAggregate
from weaviate.classes.query import Filter
from weaviate.collections.classes.data import DataObject

from retrieval.errors import SearchUnavailable
from retrieval.models import Document, check_kb
from retrieval.store.base import Embedded, StoredSource, UpsertResult
from retrieval.store.weaviate.collections import Collections
from retrieval.store.weaviate.errors import translate_errors
from retrieval.store.weaviate.schema import (
    VECTOR,
    as_datetime,
    segment_properties,
    segment_uuid,
    source_uuid,
)

log = logging.getLogger("quorum.store")

MOVES = 3  # a write tries this many tenants when rebuilds keep switching under it


def _source_object(item: Embedded, generation: int) -> DataObject[Any, Any]:
    """A document's source record, naming ``generation`` as its live one."""
    source, doc = item.doc.source, item.doc
    src_props: dict[str, Any] = {
        "source_id": source.id,
        "title": source.title,
        "kind": source.kind,
        "url": source.url,
        "recorded_at": as_datetime(source.recorded_at) if source.recorded_at else None,
        "speakers": list(source.speakers),
        "path": source.path,
        "content_hash": source.content_hash,
        "description": source.description,
        "segment_count": len(doc.segments),
        "unit_count": len(doc.levels),
        "generation": generation,
    }
    return DataObject(
        properties={k: v for k, v in src_props.items() if v is not None},
        uuid=source_uuid(source.id),
        vector={VECTOR: [float(x) for x in item.vectors[0]] if item.vectors else []},
    )


class Writes(Collections):
    """Writing and deleting sources, each visible whole or not at all."""

    async def upsert(
        self,
        kb: str,
        doc: Document,
        vectors: Sequence[Sequence[float]],
        batch_size: int = 256,
        level_vectors: Sequence[Sequence[float]] = (),
    ) -> UpsertResult:
        """Write a document's segments, its units of other levels and its source record;
        remove what an older write left."""
        item = Embedded(doc, vectors, level_vectors)
        result = (await self.upsert_many(kb, [item], batch_size))[0]
        if isinstance(result, SearchUnavailable):
            raise result
        return result

    async def upsert_many(
        self,
        kb: str,
        items: Sequence[Embedded],
        batch_size: int = 256,
        known: dict[str, StoredSource] | None = None,
    ) -> list[UpsertResult | SearchUnavailable]:
        """Write several documents in shared requests, one result per document, in order:
        each one's segments and units under one generation, then the source records (the
        flip, each source whole), then older generations go. A unit or record Weaviate
        rejects fails its own document (an error in its place), never the others; a
        failure of Weaviate itself raises. ``known``: the stored sources, if looked up."""
        check_kb(kb)
        for item in items:
            if len(item.vectors) != len(item.doc.segments) or len(item.level_vectors) != len(
                item.doc.levels
            ):
                raise ValueError("one vector per segment")
        if not items:
            return []
        # Into the live tenant, whole; written again when a rebuild switched tenants
        # meanwhile (``rebuild``: its catch-up copies only what was written before).
        for attempt in range(1, MOVES + 1):
            tenant = await self._ensure_tenant(kb)
            with self.names.pinned(kb, tenant):
                try:
                    out = await self._upsert_in(kb, items, batch_size, known)
                except SearchUnavailable:
                    if attempt < MOVES and await self._moved(kb, tenant):
                        known = None
                        continue
                    raise
            if attempt == MOVES or not await self._moved(kb, tenant):
                return out
            known = None
            await self.drop_stray(kb, tenant)
        raise AssertionError("unreachable")

    async def drop_stray(self, kb: str, tenant: str) -> bool:
        """Delete ``tenant``, a tenant of ``kb`` this write chose before a switch, when it
        is neither live nor a rebuild's spare: the rebuild had deleted it and this write
        made it again (a process that had not seen it yet). True when it went."""
        with translate_errors(self.url):
            live, spares = await self.names.everything()
            if tenant == live.get(kb, kb) or tenant in {s.tenant for s in spares}:
                return False
            log.warning("Deleting Weaviate tenant %s, made again by a late write.", tenant)
            await self.drop_tenant(tenant)
        return True

    async def _moved(self, kb: str, tenant: str) -> bool:
        """True when ``kb``'s live tenant is no longer ``tenant`` (a rebuild switched)."""
        with translate_errors(self.url):
            return await self.names.live(kb, fresh=True) != tenant

    async def _upsert_in(
        self,
        kb: str,
        items: Sequence[Embedded],
        batch_size: int,
        known: dict[str, StoredSource] | None,
    ) -> list[UpsertResult | SearchUnavailable]:
        """``upsert_many`` into the tenant pinned for ``kb``."""
        ids = [item.doc.source.id for item in items]
        previous = known if known is not None else await self.stored_sources(kb, ids)
        generation = time.time_ns() // 1000
        with translate_errors(self.url):
            failed = await self._insert_units(kb, items, generation, batch_size)
            await self._flip(kb, items, generation, failed, batch_size)
        flipped = [ids[n] for n in range(len(items)) if n not in failed]
        removed: dict[str, int] = {}
        try:
            with translate_errors(self.url):
                removed = await self._drop_older_many(kb, flipped, generation)
                await self._drop_unflipped(kb, [ids[n] for n in failed], generation)
        except SearchUnavailable as exc:
            # The new versions are live already; what older ones left is invisible and the
            # next ingest's clean-up takes it. Reporting them "failed" would be untrue.
            log.warning("clearing older versions after the switch-over failed: %s", exc)
        out: list[UpsertResult | SearchUnavailable] = []
        for n, item in enumerate(items):
            sid = item.doc.source.id
            status = "added" if sid not in previous else "updated"
            ok = UpsertResult(status, len(item.doc.segments), removed.get(sid, 0))
            out.append(failed.get(n, ok))
        return out

    async def _insert_units(
        self, kb: str, items: Sequence[Embedded], generation: int, batch_size: int
    ) -> dict[int, SearchUnavailable]:
        """Write every document's windows, then its other levels, under ``generation``;
        what Weaviate rejected, by the index of the document it belongs to."""
        failed: dict[int, SearchUnavailable] = {}
        for col, level_units in ((self.segments(kb), False), (self.units(kb), True)):
            # in a thread: every unit's properties hold the stems of its words (a big
            # batch takes a while), and a bot that ingests uploads keeps answering
            objects = await asyncio.to_thread(_objects, items, level_units, generation)
            for i in range(0, len(objects), batch_size):
                chunk = objects[i : i + batch_size]
                result = await col.data.insert_many([o for _, o in chunk])
                for at, err in result.errors.items():
                    failed.setdefault(chunk[at][0], self._rejected("a segment", err.message))
        return failed

    async def _flip(
        self,
        kb: str,
        items: Sequence[Embedded],
        generation: int,
        failed: dict[int, SearchUnavailable],
        batch_size: int,
    ) -> None:
        """Write the source records of the documents not in ``failed`` (adding to it the
        ones Weaviate rejects): from each record on, this generation is that source."""
        records = [
            (n, _source_object(item, generation)) for n, item in enumerate(items) if n not in failed
        ]
        for i in range(0, len(records), batch_size):
            chunk = records[i : i + batch_size]
            result = await self.sources_collection(kb).data.insert_many([o for _, o in chunk])
            for at, err in result.errors.items():
                failed.setdefault(chunk[at][0], self._rejected("a source record", err.message))

    def _rejected(self, what: str, message: str) -> SearchUnavailable:
        return SearchUnavailable(f"Weaviate at {self.url} rejected {what}: {message}")

    async def _drop_older_many(
        self, kb: str, source_ids: Sequence[str], generation: int
    ) -> dict[str, int]:
        """``_drop_older`` for sources written together under one generation: an aggregate
        per collection, and a delete only where something is stale (new files have none)."""
        if len(source_ids) <= 1:
            return {sid: await self._drop_older(kb, sid, generation) for sid in source_ids}
        stale = Filter.by_property("source_id").contains_any(list(source_ids)) & (
            Filter.by_property("generation").less_than(generation)
            | Filter.by_property("generation").is_none(True)
        )
        removed: dict[str, int] = {}
        for col in (self.segments(kb), self.units(kb)):
            found = await col.aggregate.over_all(
                filters=stale,
                group_by=GroupByAggregate(prop="source_id", limit=len(source_ids)),
                total_count=True,
            )
            counts = {str(g.grouped_by.value): int(g.total_count or 0) for g in found.groups}
            if any(counts.values()):
                await col.data.delete_many(where=stale)
            for sid, count in counts.items():
                removed[sid] = removed.get(sid, 0) + count
        return removed

    async def _drop_unflipped(self, kb: str, source_ids: Sequence[str], generation: int) -> None:
        """Delete what this write left of documents that failed: never live, and clutter
        until ``clean_orphans`` would get to them."""
        if not source_ids:
            return
        where = Filter.by_property("source_id").contains_any(list(source_ids)) & (
            Filter.by_property("generation").equal(generation)
        )
        for col in (self.segments(kb), self.units(kb)):
            await col.data.delete_many(where=where)

    async def _drop_older(self, kb: str, source_id: str, generation: int) -> int:
        """Delete a source's segments older than ``generation`` (a newer one being written
        by another ingest is left alone); returns how many went."""
        of_source = Filter.by_property("source_id").equal(source_id)
        removed = 0
        for col in (self.segments(kb), self.units(kb)):
            older = await col.data.delete_many(
                where=of_source & Filter.by_property("generation").less_than(generation)
            )
            # Segments written before generations existed have none.
            legacy = await col.data.delete_many(
                where=of_source & Filter.by_property("generation").is_none(True)
            )
            removed += int(older.successful) + int(legacy.successful)
        return removed

    async def delete_source(self, kb: str, source_id: str) -> int:
        """Delete a source and its segments; returns how many segments went. (Its words
        leave Weaviate's files when ``purge`` rebuilds the tenant without it.)"""
        if not await self.has_kb(kb):
            return 0
        gone = 0
        for attempt in range(1, MOVES + 1):  # again in the new tenant after a switch
            with translate_errors(self.url):
                tenant = await self.names.live(kb, fresh=True)
            with self.names.pinned(kb, tenant):
                try:
                    gone = max(gone, await self._delete_in(kb, source_id))
                except SearchUnavailable:
                    if attempt == MOVES or not await self._moved(kb, tenant):
                        raise
                    continue
            if not await self._moved(kb, tenant):
                break
        return gone

    async def set_path(self, kb: str, source_id: str, path: str) -> bool:
        """Show ``path`` as a source's path: its record updated in place (units do not hold
        it; its vector and generation stay); False when the source is not indexed."""
        if not await self.has_kb(kb):
            return False
        for _ in range(MOVES):  # again in the new tenant after a switch
            with translate_errors(self.url):
                tenant = await self.names.live(kb, fresh=True)
                with self.names.pinned(kb, tenant):
                    records = self.sources_collection(kb)
                    if await records.query.fetch_object_by_id(source_uuid(source_id)) is None:
                        return False
                    await records.data.update(
                        uuid=source_uuid(source_id), properties={"path": path}
                    )
            if not await self._moved(kb, tenant):
                break
        return True

    async def _delete_in(self, kb: str, source_id: str) -> int:
        with translate_errors(self.url):
            # The record first: its segments are invisible from then on, whatever happens.
            await self.sources_collection(kb).data.delete_many(
                where=Filter.by_property("source_id").equal(source_id)
            )
            res = await self.segments(kb).data.delete_many(
                where=Filter.by_property("source_id").equal(source_id)
            )
            await self.units(kb).data.delete_many(
                where=Filter.by_property("source_id").equal(source_id)
            )
        return int(res.successful)

    async def clean_orphans(self, kb: str, min_age_s: float = 3600.0) -> int:
        """Delete segments no source record makes live: generations of a source older than
        its live one, and other generations older than ``min_age_s`` (a younger one may be
        an ingest still writing). Returns how many went."""
        if not await self.has_kb(kb):
            return 0
        with translate_errors(self.url):
            tenant = await self.names.live(kb, fresh=True)
        with self.names.pinned(kb, tenant):
            return await self._clean_orphans_in(kb, min_age_s)

    async def _clean_orphans_in(self, kb: str, min_age_s: float) -> int:
        cutoff = (time.time_ns() // 1000) - int(min_age_s * 1_000_000)
        with translate_errors(self.url):
            live = {
                str(o.properties.get("source_id")): (
                    int(o.properties.get("generation") or 0),
                    int(o.properties.get("segment_count") or 0),
                    int(o.properties.get("unit_count") or 0),
                )
                async for o in self._iterate(self.sources_collection(kb))
            }
            removed = 0
            for nth, col in ((1, self.segments(kb)), (2, self.units(kb))):
                groups = await col.aggregate.over_all(
                    group_by=GroupByAggregate(prop="source_id", limit=1_000_000),
                    total_count=True,
                )
                for group in groups.groups:
                    sid, count = str(group.grouped_by.value), int(group.total_count or 0)
                    if sid not in live:
                        res = await col.data.delete_many(
                            where=Filter.by_property("source_id").equal(sid)
                            & Filter.by_property("generation").less_than(cutoff)
                        )
                        removed += int(res.successful)
                    elif count > live[sid][nth]:  # more than the live generation has
                        generation = live[sid][0]
                        removed += await self._drop_older(kb, sid, generation)
                        res = await col.data.delete_many(  # a crashed update's
                            where=Filter.by_property("source_id").equal(sid)
                            & Filter.by_property("generation").greater_than(generation)
                            & Filter.by_property("generation").less_than(cutoff)
                        )
                        removed += int(res.successful)
        return removed


def _objects(
    items: Sequence[Embedded], level_units: bool, generation: int
) -> list[tuple[int, DataObject[Any, Any]]]:
    """The objects to write (windows, or the other levels), each with the index of the
    document it belongs to."""
    return [
        (
            n,
            DataObject(
                properties={**segment_properties(item.doc.source, seg), "generation": generation},
                uuid=segment_uuid(item.doc.source.id, seg.position, generation, seg.level),
                vector={VECTOR: list(vec)},
            ),
        )
        for n, item in enumerate(items)
        for seg, vec in zip(
            item.doc.levels if level_units else item.doc.segments,
            item.level_vectors if level_units else item.vectors,
            strict=True,
        )
    ]
