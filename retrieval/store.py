"""Weaviate storage: one tenant per knowledge base, idempotent upserts, hybrid search
with filters, neighbours, transcripts, deletes (the schema is in ``retrieval.schema``).

A source becomes visible whole or not at all. Each write of a source is a *generation*
(a microsecond timestamp): its segments are written under new ids carrying that
generation, then the source record is written naming it (the flip), then older
generations are deleted. Every read keeps only segments of a source's live generation,
so a crash (of Quorum or of Weaviate) mid-write leaves invisible orphans, never half a
source; ``clean_orphans`` (run at the start of each ingest) deletes them.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

import weaviate
from weaviate.classes.aggregate import GroupByAggregate
from weaviate.classes.config import Configure, Property
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery, Sort
from weaviate.classes.tenants import Tenant
from weaviate.collections.classes.data import DataObject
from weaviate.collections.classes.filters import _Filters
from weaviate.exceptions import UnexpectedStatusCodeError, WeaviateBaseError, WeaviateQueryError

from retrieval.errors import InvalidInput, SearchUnavailable
from retrieval.models import Document, Hit, Level, SourceInfo
from retrieval.names import title_matches as title_matches  # re-exported for callers
from retrieval.schema import (
    SEGMENT_PROPERTIES,
    SEGMENTS,
    SOURCE_PROPERTIES,
    SOURCES,
    UNIT_PROPERTIES,
    UNITS,
    VECTOR,
    as_datetime,
    check_kb,
    hit_from_object,
    segment_properties,
    segment_uuid,
    source_from_object,
    source_uuid,
)
from retrieval.schema import speaker_keys as speaker_keys  # re-exported for callers

# What keyword search reads: the text, where it sits, and what it is part of (title and
# speakers: "what did the retro say about rollback" finds a window that never says "retro").
# A unit's own words count twice: its context (title, speakers, heading) is shared by every
# unit of its source, so it may tip a tie but not outrank the words that were said.
QUERY_PROPERTIES = ["text^2", "heading", "lesson_title", "context"]


@dataclass(frozen=True)
class UpsertResult:
    """What an upsert did to one source."""

    status: str  # "added" | "updated" | "skipped"
    segments: int
    removed: int = 0


@dataclass(frozen=True)
class StoredSource:
    """What the store remembers of an indexed file: its content hash and path."""

    content_hash: str
    path: str


@dataclass(frozen=True)
class Embedded:
    """A document ready to write: one vector per window, one per unit of its other levels."""

    doc: Document
    vectors: Sequence[Sequence[float]]
    level_vectors: Sequence[Sequence[float]] = ()


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


def _status(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, UnexpectedStatusCodeError) else None


def _already_exists(exc: BaseException) -> bool:
    """A 422 "already exists": another process created it first, which is what we wanted."""
    return _status(exc) == 422 and "already exists" in str(exc).lower()


def _gen(obj: Any) -> int:
    """An object's generation; 0 for one written before generations existed."""
    return int(obj.properties.get("generation") or 0)


def _brief(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


@contextlib.contextmanager
def translate_errors(url: str) -> Iterator[None]:
    """Turn client and transport errors into SearchUnavailable naming the server, by what
    happened: unreachable, refused credentials, a rejected request, or a failed query."""
    try:
        yield
    except (InvalidInput, SearchUnavailable):
        raise
    except UnexpectedStatusCodeError as exc:
        status = exc.status_code
        if status in (401, 403):
            raise SearchUnavailable(
                f"Weaviate at {url} refused Quorum's credentials (HTTP {status}); "
                "check QUORUM_WEAVIATE_API_KEY."
            ) from exc
        if status < 500:
            raise SearchUnavailable(
                f"Weaviate at {url} rejected a request (HTTP {status}): {_brief(exc)}"
            ) from exc
        raise SearchUnavailable(f"Weaviate at {url} failed (HTTP {status}); see its log.") from exc
    except WeaviateQueryError as exc:
        raise SearchUnavailable(f"Weaviate at {url} failed a query: {_brief(exc)}") from exc
    except (WeaviateBaseError, OSError, TimeoutError) as exc:
        raise SearchUnavailable(
            f"Weaviate at {url} is not reachable or failed ({type(exc).__name__}); "
            "check that it is running."
        ) from exc


class Store:
    """Quorum's Weaviate collections, reached through one async client."""

    def __init__(self, client: weaviate.WeaviateAsyncClient, url: str) -> None:
        self.client = client
        self.url = url
        self._tenants: set[str] = set()

    @classmethod
    @contextlib.asynccontextmanager
    async def connect(cls, client: weaviate.WeaviateAsyncClient, url: str) -> AsyncIterator[Store]:
        """Connect, make sure the schema exists, and close on exit."""
        try:
            with translate_errors(url):
                await client.connect()
        except SearchUnavailable:
            with contextlib.suppress(Exception):
                await client.close()
            raise
        try:
            store = cls(client, url)
            await store.ensure_schema()
            yield store
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def ensure_schema(self) -> None:
        """Create the two collections if they are missing. Idempotent across processes:
        when two create them at once, the loser's 422 "already exists" is success."""
        with translate_errors(self.url):
            existing = await self.client.collections.list_all(simple=True)
            mt = Configure.multi_tenancy(
                enabled=True, auto_tenant_creation=True, auto_tenant_activation=True
            )
            for name, props in ((SEGMENTS, SEGMENT_PROPERTIES), (UNITS, UNIT_PROPERTIES)):
                if name in existing:
                    await self._add_missing_properties(name, props)
                else:
                    await self._create(
                        name,
                        properties=props,
                        multi_tenancy_config=mt,
                        vector_config=Configure.Vectors.self_provided(name=VECTOR),
                        inverted_index_config=Configure.inverted_index(index_null_state=True),
                    )
            if SOURCES in existing:
                await self._add_missing_properties(SOURCES, SOURCE_PROPERTIES)
            else:
                await self._create(
                    SOURCES,
                    properties=SOURCE_PROPERTIES,
                    multi_tenancy_config=mt,
                    vector_config=Configure.Vectors.self_provided(name=VECTOR),
                )

    async def _create(self, name: str, **config: Any) -> None:
        try:
            await self.client.collections.create(name, **config)
        except UnexpectedStatusCodeError as exc:
            if not _already_exists(exc):
                raise

    async def _add_missing_properties(self, name: str, wanted: Sequence[Property]) -> None:
        """Add properties a newer Quorum defines to a collection an older one created, so
        an existing archive keeps working (its old segments simply lack the new fields)."""
        col = self.client.collections.use(name)
        config = await col.config.get(simple=True)
        have = {p.name for p in config.properties}
        for prop in wanted:
            if prop.name not in have:
                try:
                    await col.config.add_property(prop)
                except UnexpectedStatusCodeError as exc:
                    if not _already_exists(exc):  # another process added it first
                        raise

    async def _ensure_tenant(self, kb: str) -> None:
        if kb in self._tenants:
            return
        with translate_errors(self.url):
            for name in (SEGMENTS, UNITS, SOURCES):
                col = self.client.collections.use(name)
                if await col.tenants.get_by_name(kb) is None:
                    try:
                        await col.tenants.create([Tenant(name=kb)])
                    except UnexpectedStatusCodeError as exc:
                        if not _already_exists(exc):  # another ingest created it first
                            raise
        self._tenants.add(kb)

    async def has_kb(self, kb: str) -> bool:
        """True when the knowledge base has been created (something was ingested)."""
        check_kb(kb)
        if kb in self._tenants:
            return True
        # SOURCES gets its tenant last in _ensure_tenant, so seeing it there means both exist.
        with translate_errors(self.url):
            found = await self.client.collections.use(SOURCES).tenants.get_by_name(kb) is not None
        if found:
            self._tenants.add(kb)
        return found

    async def knowledge_bases(self) -> list[str]:
        """Every knowledge base (tenant) name."""
        with translate_errors(self.url):
            tenants = await self.client.collections.use(SEGMENTS).tenants.get()
        return sorted(tenants)

    def segments(self, kb: str) -> Any:
        """The segment collection bound to one tenant."""
        return self.client.collections.use(SEGMENTS).with_tenant(check_kb(kb))

    def units(self, kb: str) -> Any:
        """The collection of the other levels (turns, topics, summaries), in one tenant."""
        return self.client.collections.use(UNITS).with_tenant(check_kb(kb))

    def of_level(self, kb: str, level: Level) -> tuple[Any, _Filters | None]:
        """The collection holding ``level`` and the filter that keeps only it."""
        if level == "window":
            return self.segments(kb), None
        return self.units(kb), Filter.by_property("level").equal(level)

    def sources_collection(self, kb: str) -> Any:
        """The source collection bound to one tenant."""
        return self.client.collections.use(SOURCES).with_tenant(check_kb(kb))

    async def source_hash(self, kb: str, source_id: str) -> str | None:
        """The content hash stored for a source, or None when it is not indexed."""
        stored = await self.stored_source(kb, source_id)
        return None if stored is None else stored.content_hash

    async def stored_source(self, kb: str, source_id: str) -> StoredSource | None:
        """The content hash and file path stored for a source; None when it is not indexed."""
        if not await self.has_kb(kb):
            return None
        with translate_errors(self.url):
            obj = await self.sources_collection(kb).query.fetch_object_by_id(source_uuid(source_id))
        if obj is None:
            return None
        props = obj.properties
        return StoredSource(str(props.get("content_hash") or ""), str(props.get("path") or ""))

    async def stored_sources(self, kb: str, source_ids: Sequence[str]) -> dict[str, StoredSource]:
        """``stored_source`` for many ids in one query: those indexed, by id."""
        ids = sorted(set(source_ids))
        if not ids or not await self.has_kb(kb):
            return {}
        found: dict[str, StoredSource] = {}
        with translate_errors(self.url):
            for i in range(0, len(ids), 500):
                res = await self.sources_collection(kb).query.fetch_objects(
                    filters=Filter.by_property("source_id").contains_any(ids[i : i + 500]),
                    limit=500,
                    return_properties=["source_id", "content_hash", "path"],
                )
                for o in res.objects:
                    props = o.properties
                    found[str(props.get("source_id"))] = StoredSource(
                        str(props.get("content_hash") or ""), str(props.get("path") or "")
                    )
        return found

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
        await self._ensure_tenant(kb)
        ids = [item.doc.source.id for item in items]
        previous = known if known is not None else await self.stored_sources(kb, ids)
        generation = time.time_ns() // 1000
        with translate_errors(self.url):
            failed = await self._insert_units(kb, items, generation, batch_size)
            await self._flip(kb, items, generation, failed, batch_size)
            flipped = [ids[n] for n in range(len(items)) if n not in failed]
            removed = await self._drop_older_many(kb, flipped, generation)
            await self._drop_unflipped(kb, [ids[n] for n in failed], generation)
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
            objects = [
                (
                    n,
                    DataObject(
                        properties={
                            **segment_properties(item.doc.source, seg),
                            "generation": generation,
                        },
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
        """Delete a source and its segments; returns how many segments went."""
        if not await self.has_kb(kb):
            return 0
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

    async def _live(self, kb: str, objects: Sequence[Any]) -> list[Any]:
        """The objects that belong to their source's live generation."""
        ids = sorted({str(o.properties.get("source_id")) for o in objects})
        if not ids:
            return []
        res = await self.sources_collection(kb).query.fetch_objects(
            filters=Filter.by_property("source_id").contains_any(ids),
            limit=len(ids),
            return_properties=["source_id", "generation"],
        )
        live = {
            str(o.properties.get("source_id")): int(o.properties.get("generation") or 0)
            for o in res.objects
        }
        return [
            o
            for o in objects
            if live.get(str(o.properties.get("source_id")))
            == int(o.properties.get("generation") or 0)
        ]

    async def list_sources(self, kb: str) -> list[SourceInfo]:
        """Every source in the knowledge base, newest recording first, then by title."""
        if not await self.has_kb(kb):
            return []
        infos: list[SourceInfo] = []
        with translate_errors(self.url):
            async for obj in self._iterate(self.sources_collection(kb)):
                infos.append(source_from_object(obj))
        infos.sort(key=lambda i: (-(i.source.recorded_at or date.min).toordinal(), i.source.title))
        return infos

    async def _iterate(self, col: Any) -> AsyncIterator[Any]:
        offset = 0
        while True:
            page = await col.query.fetch_objects(limit=500, offset=offset)
            for obj in page.objects:
                yield obj
            if len(page.objects) < 500:
                return
            offset += 500

    async def count(self, kb: str) -> int:
        """How many segments the knowledge base holds."""
        if not await self.has_kb(kb):
            return 0
        with translate_errors(self.url):
            agg = await self.segments(kb).aggregate.over_all(total_count=True)
        return int(agg.total_count or 0)

    async def hybrid(
        self,
        kb: str,
        query: str,
        vector: Sequence[float],
        where: _Filters | None,
        k: int,
        alpha: float,
        level: Level = "window",
    ) -> list[Hit]:
        """Hybrid search (BM25 on the text and its context, vector on our own embedding),
        relativeScore fusion, over the units of one level."""
        if not await self.has_kb(kb):
            return []
        limit = k
        col, only = self.of_level(kb, level)
        if only is not None:
            where = only if where is None else Filter.all_of([only, where])
        with translate_errors(self.url):
            while True:
                res = await col.query.hybrid(
                    query=query,
                    vector=list(vector),
                    target_vector=VECTOR,
                    alpha=alpha,
                    fusion_type=HybridFusion.RELATIVE_SCORE,
                    query_properties=QUERY_PROPERTIES,
                    filters=where,
                    limit=limit,
                    return_metadata=MetadataQuery(score=True),
                    include_vector=[VECTOR],
                )
                live = await self._live(kb, res.objects)
                # Orphans took places: ask once more with room for them (rare: after a crash).
                if len(live) == len(res.objects) or len(res.objects) < limit or limit > k:
                    break
                limit = min(k + 2 * (len(res.objects) - len(live)) + 10, 1000)
        return [hit_from_object(o, float(o.metadata.score or 0.0), vector) for o in live[:k]]

    async def bm25(self, kb: str, query: str, where: _Filters | None, k: int) -> list[Hit]:
        """Keyword search alone (for benchmarks and diagnostics)."""
        with translate_errors(self.url):
            res = await self.segments(kb).query.bm25(
                query=query, filters=where, limit=k, return_metadata=MetadataQuery(score=True)
            )
            live = await self._live(kb, res.objects)
        return [hit_from_object(o, float(o.metadata.score or 0.0)) for o in live]

    async def near_vector(
        self, kb: str, vector: Sequence[float], where: _Filters | None, k: int
    ) -> list[Hit]:
        """Vector search alone (for benchmarks and diagnostics)."""
        with translate_errors(self.url):
            res = await self.segments(kb).query.near_vector(
                near_vector=list(vector),
                target_vector=VECTOR,
                filters=where,
                limit=k,
                return_metadata=MetadataQuery(distance=True),
            )
            live = await self._live(kb, res.objects)
        return [hit_from_object(o, 1.0 - float(o.metadata.distance or 0.0)) for o in live]

    async def get(self, kb: str, hit_id: str) -> Hit | None:
        """One segment by id."""
        if not await self.has_kb(kb):
            return None
        with translate_errors(self.url):
            obj = await self.segments(kb).query.fetch_object_by_id(hit_id)
            live = [] if obj is None else await self._live(kb, [obj])
        return hit_from_object(live[0]) if live else None

    async def fetch_ordered(
        self,
        kb: str,
        where: _Filters,
        offset: int = 0,
        limit: int = 200,
        level: Level = "window",
    ) -> list[Hit]:
        """Segments (or units of ``level``) matching ``where`` in source order (by source,
        then position)."""
        if not await self.has_kb(kb):
            return []
        col, only = self.of_level(kb, level)
        if only is not None:
            where = Filter.all_of([only, where])
        with translate_errors(self.url):
            res = await col.query.fetch_objects(
                filters=where,
                sort=Sort.by_property("source_id").by_property("position"),
                offset=offset,
                limit=limit,
            )
            live = await self._live(kb, res.objects)
        return [hit_from_object(o) for o in live]
