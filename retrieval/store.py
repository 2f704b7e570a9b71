"""Weaviate storage: schema, one tenant per knowledge base, idempotent upserts, hybrid
search with filters, neighbours, transcripts, deletes.

Two multi-tenant collections: ``QuorumSource`` (one object per file, with its content
hash) and ``QuorumSegment`` (one per chunk, source fields denormalised so a search
returns everything in one round trip). Ids are uuid5 of the source id (and position), so
re-ingesting a file overwrites its objects; segments past the new end are deleted after
the new ones are written, so a failure midway never loses what was indexed.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from difflib import SequenceMatcher
from typing import Any
from uuid import NAMESPACE_URL, uuid5

import weaviate
from weaviate.classes.config import Configure, DataType, Property, Tokenization
from weaviate.classes.query import Filter, HybridFusion, MetadataQuery, Sort
from weaviate.classes.tenants import Tenant
from weaviate.collections.classes.data import DataObject
from weaviate.collections.classes.filters import _Filters
from weaviate.exceptions import WeaviateBaseError

from retrieval.errors import InvalidInput, SearchUnavailable
from retrieval.links import segment_link
from retrieval.models import Document, Hit, Segment, Source, SourceInfo

SOURCES = "QuorumSource"
SEGMENTS = "QuorumSegment"
VECTOR = "default"
KB_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_NS = uuid5(NAMESPACE_URL, "https://quorum.invalid/segments")


def check_kb(kb: str) -> str:
    """Validate a knowledge-base name (it becomes a Weaviate tenant)."""
    if not KB_PATTERN.match(kb):
        raise InvalidInput(
            "Knowledge base names use letters, digits, '-' and '_' (at most 64): "
            f"{kb!r} is not one."
        )
    return kb


def segment_uuid(source_id: str, position: int) -> str:
    """Deterministic id of a segment."""
    return str(uuid5(_NS, f"{source_id}#{position}"))


def source_uuid(source_id: str) -> str:
    """Deterministic id of a source."""
    return str(uuid5(_NS, source_id))


def speaker_keys(names: Sequence[str]) -> list[str]:
    """Lower-cased full names and their parts, so ``speaker:john`` finds "John Park"."""
    keys: list[str] = []
    for name in names:
        low = " ".join(name.lower().split())
        for key in (low, *low.split()):
            if key and key not in keys:
                keys.append(key)
    return keys


def _as_datetime(d: date) -> datetime:
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


@dataclass(frozen=True)
class UpsertResult:
    """What an upsert did to one source."""

    status: str  # "added" | "updated" | "skipped"
    segments: int
    removed: int = 0


@contextlib.contextmanager
def translate_errors(url: str) -> Iterator[None]:
    """Turn client and transport errors into SearchUnavailable naming the server."""
    try:
        yield
    except (InvalidInput, SearchUnavailable):
        raise
    except (WeaviateBaseError, OSError, TimeoutError) as exc:
        raise SearchUnavailable(
            f"Weaviate at {url} is not reachable or failed ({type(exc).__name__}); "
            "check that it is running."
        ) from exc


_SEGMENT_PROPS = [
    Property(name="text", data_type=DataType.TEXT, tokenization=Tokenization.WORD),
    Property(name="source_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
    Property(name="source_title", data_type=DataType.TEXT, skip_vectorization=True),
    Property(name="source_url", data_type=DataType.TEXT, index_searchable=False),
    Property(name="source_kind", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
    Property(name="recorded_at", data_type=DataType.DATE),
    Property(name="speakers", data_type=DataType.TEXT_ARRAY, index_searchable=False),
    Property(name="speaker_keys", data_type=DataType.TEXT_ARRAY, tokenization=Tokenization.FIELD),
    Property(name="start_s", data_type=DataType.NUMBER),
    Property(name="end_s", data_type=DataType.NUMBER),
    Property(name="page", data_type=DataType.INT),
    Property(name="heading", data_type=DataType.TEXT),
    Property(name="lesson", data_type=DataType.INT),
    Property(name="lesson_title", data_type=DataType.TEXT),
    Property(name="lesson_url", data_type=DataType.TEXT, index_searchable=False),
    Property(name="position", data_type=DataType.INT),
]

_SOURCE_PROPS = [
    Property(name="source_id", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
    Property(name="title", data_type=DataType.TEXT),
    Property(name="kind", data_type=DataType.TEXT, tokenization=Tokenization.FIELD),
    Property(name="url", data_type=DataType.TEXT, index_searchable=False),
    Property(name="recorded_at", data_type=DataType.DATE),
    Property(name="speakers", data_type=DataType.TEXT_ARRAY, index_searchable=False),
    Property(name="path", data_type=DataType.TEXT, index_searchable=False),
    Property(name="content_hash", data_type=DataType.TEXT, index_searchable=False),
    Property(name="description", data_type=DataType.TEXT),
    Property(name="segment_count", data_type=DataType.INT),
]


def _segment_props(source: Source, seg: Segment) -> dict[str, Any]:
    props: dict[str, Any] = {
        "text": seg.text,
        "source_id": source.id,
        "source_title": source.title,
        "source_url": source.url,
        "source_kind": source.kind,
        "recorded_at": _as_datetime(source.recorded_at) if source.recorded_at else None,
        "speakers": list(seg.speakers),
        "speaker_keys": speaker_keys(seg.speakers),
        "start_s": seg.start_s,
        "end_s": seg.end_s,
        "page": seg.page,
        "heading": seg.heading,
        "lesson": seg.lesson,
        "lesson_title": seg.lesson_title,
        "lesson_url": seg.lesson_url,
        "position": seg.position,
    }
    return {k: v for k, v in props.items() if v is not None}


def _date(value: Any) -> date | None:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return None


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


def hit_from_object(obj: Any, score: float = 0.0) -> Hit:
    """Build a Hit from a QuorumSegment object returned by the client."""
    p = obj.properties
    source = Source(
        id=str(p.get("source_id") or ""),
        title=str(p.get("source_title") or ""),
        kind=p.get("source_kind") or "document",
        url=p.get("source_url"),
        recorded_at=_date(p.get("recorded_at")),
    )
    segment = Segment(
        source_id=source.id,
        position=int(p.get("position") or 0),
        text=str(p.get("text") or ""),
        start_s=_opt_float(p.get("start_s")),
        end_s=_opt_float(p.get("end_s")),
        speakers=tuple(p.get("speakers") or ()),
        page=_opt_int(p.get("page")),
        heading=p.get("heading"),
        lesson=_opt_int(p.get("lesson")),
        lesson_title=p.get("lesson_title"),
        lesson_url=p.get("lesson_url"),
    )
    return Hit(
        id=str(obj.uuid),
        segment=segment,
        source=source,
        score=score,
        link=segment_link(source, segment),
    )


def _source_from_object(obj: Any) -> SourceInfo:
    p = obj.properties
    source = Source(
        id=str(p.get("source_id") or ""),
        title=str(p.get("title") or ""),
        kind=p.get("kind") or "document",
        url=p.get("url"),
        recorded_at=_date(p.get("recorded_at")),
        speakers=tuple(p.get("speakers") or ()),
        path=str(p.get("path") or ""),
        content_hash=str(p.get("content_hash") or ""),
        description=p.get("description"),
    )
    return SourceInfo(source=source, segments=int(p.get("segment_count") or 0))


def title_matches(query: str, source: Source) -> bool:
    """Fuzzy title match: "MCP" finds "Introduction to MCP", "auth deepdive" finds
    "Auth deep dive"."""
    q = " ".join(query.casefold().split())
    title = source.title.casefold()
    if not q:
        return False
    if q in title or q == source.id.casefold() or q in source.id.casefold():
        return True
    squashed_q, squashed_t = q.replace(" ", ""), re.sub(r"[^a-z0-9]", "", title)
    if squashed_q and squashed_q in squashed_t:
        return True
    words = re.findall(r"[a-z0-9]+", title)
    q_words = re.findall(r"[a-z0-9]+", q)
    if q_words and all(
        any(w.startswith(qw) or SequenceMatcher(None, qw, w).ratio() >= 0.8 for w in words)
        for qw in q_words
    ):
        return True
    return SequenceMatcher(None, q, title).ratio() >= 0.75


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
        with translate_errors(url):
            await client.connect()
        try:
            store = cls(client, url)
            await store.ensure_schema()
            yield store
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def ensure_schema(self) -> None:
        """Create the two collections if they are missing."""
        with translate_errors(self.url):
            existing = await self.client.collections.list_all(simple=True)
            mt = Configure.multi_tenancy(
                enabled=True, auto_tenant_creation=True, auto_tenant_activation=True
            )
            if SEGMENTS not in existing:
                await self.client.collections.create(
                    SEGMENTS,
                    properties=_SEGMENT_PROPS,
                    multi_tenancy_config=mt,
                    vector_config=Configure.Vectors.self_provided(name=VECTOR),
                    inverted_index_config=Configure.inverted_index(index_null_state=True),
                )
            if SOURCES not in existing:
                await self.client.collections.create(
                    SOURCES,
                    properties=_SOURCE_PROPS,
                    multi_tenancy_config=mt,
                    vector_config=Configure.Vectors.self_provided(name=VECTOR),
                )

    async def _ensure_tenant(self, kb: str) -> None:
        if kb in self._tenants:
            return
        with translate_errors(self.url):
            for name in (SEGMENTS, SOURCES):
                col = self.client.collections.use(name)
                if await col.tenants.get_by_name(kb) is None:
                    await col.tenants.create([Tenant(name=kb)])
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

    def sources_collection(self, kb: str) -> Any:
        """The source collection bound to one tenant."""
        return self.client.collections.use(SOURCES).with_tenant(check_kb(kb))

    async def source_hash(self, kb: str, source_id: str) -> str | None:
        """The content hash stored for a source, or None when it is not indexed."""
        if not await self.has_kb(kb):
            return None
        with translate_errors(self.url):
            obj = await self.sources_collection(kb).query.fetch_object_by_id(source_uuid(source_id))
        return None if obj is None else str(obj.properties.get("content_hash") or "")

    async def upsert(
        self,
        kb: str,
        doc: Document,
        vectors: Sequence[Sequence[float]],
        batch_size: int = 256,
    ) -> UpsertResult:
        """Write a document's segments and source record; remove segments past its end."""
        check_kb(kb)
        if len(vectors) != len(doc.segments):
            raise ValueError("one vector per segment")
        await self._ensure_tenant(kb)
        source = doc.source
        previous = await self.source_hash(kb, source.id)
        segments = self.segments(kb)
        with translate_errors(self.url):
            for i in range(0, len(doc.segments), batch_size):
                objects = [
                    DataObject(
                        properties=_segment_props(source, seg),
                        uuid=segment_uuid(source.id, seg.position),
                        vector={VECTOR: list(vec)},
                    )
                    for seg, vec in zip(
                        doc.segments[i : i + batch_size], vectors[i : i + batch_size], strict=True
                    )
                ]
                result = await segments.data.insert_many(objects)
                if result.has_errors:
                    first = next(iter(result.errors.values()))
                    raise SearchUnavailable(
                        f"Weaviate at {self.url} rejected a segment: {first.message}"
                    )
            stale = await segments.data.delete_many(
                where=Filter.by_property("source_id").equal(source.id)
                & Filter.by_property("position").greater_or_equal(len(doc.segments))
            )
            src_props: dict[str, Any] = {
                "source_id": source.id,
                "title": source.title,
                "kind": source.kind,
                "url": source.url,
                "recorded_at": _as_datetime(source.recorded_at) if source.recorded_at else None,
                "speakers": list(source.speakers),
                "path": source.path,
                "content_hash": source.content_hash,
                "description": source.description,
                "segment_count": len(doc.segments),
            }
            src_obj = DataObject(
                properties={k: v for k, v in src_props.items() if v is not None},
                uuid=source_uuid(source.id),
                vector={VECTOR: [float(x) for x in vectors[0]] if vectors else []},
            )
            await self.sources_collection(kb).data.insert_many([src_obj])
        status = "added" if previous is None else "updated"
        return UpsertResult(status=status, segments=len(doc.segments), removed=stale.successful)

    async def delete_source(self, kb: str, source_id: str) -> int:
        """Delete a source and its segments; returns how many segments went."""
        if not await self.has_kb(kb):
            return 0
        with translate_errors(self.url):
            res = await self.segments(kb).data.delete_many(
                where=Filter.by_property("source_id").equal(source_id)
            )
            await self.sources_collection(kb).data.delete_many(
                where=Filter.by_property("source_id").equal(source_id)
            )
        return int(res.successful)

    async def list_sources(self, kb: str) -> list[SourceInfo]:
        """Every source in the knowledge base, newest recording first, then by title."""
        if not await self.has_kb(kb):
            return []
        infos: list[SourceInfo] = []
        with translate_errors(self.url):
            async for obj in self._iterate(self.sources_collection(kb)):
                infos.append(_source_from_object(obj))
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
    ) -> list[Hit]:
        """Hybrid search (BM25 on the text, vector on our own embedding), relativeScore fusion."""
        if not await self.has_kb(kb):
            return []
        with translate_errors(self.url):
            res = await self.segments(kb).query.hybrid(
                query=query,
                vector=list(vector),
                target_vector=VECTOR,
                alpha=alpha,
                fusion_type=HybridFusion.RELATIVE_SCORE,
                query_properties=["text", "heading", "lesson_title"],
                filters=where,
                limit=k,
                return_metadata=MetadataQuery(score=True),
            )
        return [hit_from_object(o, float(o.metadata.score or 0.0)) for o in res.objects]

    async def bm25(self, kb: str, query: str, where: _Filters | None, k: int) -> list[Hit]:
        """Keyword search alone (for benchmarks and diagnostics)."""
        with translate_errors(self.url):
            res = await self.segments(kb).query.bm25(
                query=query, filters=where, limit=k, return_metadata=MetadataQuery(score=True)
            )
        return [hit_from_object(o, float(o.metadata.score or 0.0)) for o in res.objects]

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
        return [hit_from_object(o, 1.0 - float(o.metadata.distance or 0.0)) for o in res.objects]

    async def get(self, kb: str, hit_id: str) -> Hit | None:
        """One segment by id."""
        if not await self.has_kb(kb):
            return None
        with translate_errors(self.url):
            obj = await self.segments(kb).query.fetch_object_by_id(hit_id)
        return None if obj is None else hit_from_object(obj)

    async def fetch_ordered(
        self, kb: str, where: _Filters, offset: int = 0, limit: int = 200
    ) -> list[Hit]:
        """Segments matching ``where`` in source order (by source, then position)."""
        if not await self.has_kb(kb):
            return []
        with translate_errors(self.url):
            res = await self.segments(kb).query.fetch_objects(
                filters=where,
                sort=Sort.by_property("source_id").by_property("position"),
                offset=offset,
                limit=limit,
            )
        return [hit_from_object(o) for o in res.objects]
