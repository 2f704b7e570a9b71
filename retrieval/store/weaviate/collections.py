"""Quorum's Weaviate collections and what they hold for a source: the schema (created or
extended idempotently; range indexes an older archive lacks added by ``reindex``), one
tenant per knowledge base, the per-tenant collections of each level, the stored record of
a source, and the filter that keeps only live generations (``writes`` explains
generations)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import weaviate
from weaviate.classes.config import Configure, Property
from weaviate.classes.query import Filter
from weaviate.classes.tenants import Tenant
from weaviate.collections.classes.filters import _Filters
from weaviate.exceptions import UnexpectedStatusCodeError, WeaviateInvalidInputError

from retrieval.errors import ConfigError
from retrieval.models import Level, check_kb
from retrieval.store.base import StoredSource
from retrieval.store.weaviate.errors import already_exists, translate_errors
from retrieval.store.weaviate.reindex import add_range_indexes
from retrieval.store.weaviate.schema import (
    RANGE_FILTERED,
    SEGMENT_PROPERTIES,
    SEGMENTS,
    SOURCE_PROPERTIES,
    SOURCES,
    UNFILTERED,
    UNIT_PROPERTIES,
    UNITS,
    VECTOR,
    consistency,
    replication,
    source_uuid,
)

log = logging.getLogger(__name__)


class Collections:
    """Quorum's Weaviate collections, reached through one async client."""

    def __init__(self, client: weaviate.WeaviateAsyncClient, url: str, replicas: int = 1) -> None:
        self.client = client
        self.url = url
        self.replicas = replicas  # copies of every object, one per node (a cluster's factor)
        self._consistency = consistency(replicas)
        self._tenants: set[str] = set()
        self._stems: dict[str, tuple[bool, float]] = {}  # kb -> (stores stems?, asked at)

    async def ensure_schema(self) -> None:
        """Create the two collections if they are missing. Idempotent across processes:
        when two create them at once, the loser's 422 "already exists" is success."""
        with translate_errors(self.url):
            existing = await self.client.collections.list_all(simple=True)
            mt = Configure.multi_tenancy(
                enabled=True, auto_tenant_creation=True, auto_tenant_activation=True
            )
            if self.replicas > 1 and not {SEGMENTS, UNITS, SOURCES} <= set(existing):
                await self._check_nodes()
            unranged: dict[str, list[str]] = {}
            for name, props in ((SEGMENTS, SEGMENT_PROPERTIES), (UNITS, UNIT_PROPERTIES)):
                if name in existing:
                    unranged[name] = await self._add_missing_properties(name, props)
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
            if any(unranged.values()):
                await add_range_indexes(self.client, unranged)

    async def _check_nodes(self) -> None:
        """More copies than nodes cannot be kept: say so before Weaviate refuses."""
        nodes = await self.client.cluster.nodes()
        if len(nodes) < self.replicas:
            raise ConfigError(
                f"QUORUM_WEAVIATE_REPLICAS is {self.replicas} but Weaviate at {self.url} has "
                f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}: start a cluster of at "
                f"least {self.replicas} or lower the setting."
            )

    def _use(self, name: str) -> Any:
        """A collection read and written at the consistency level replication needs."""
        col = self.client.collections.use(name)
        return col if self._consistency is None else col.with_consistency_level(self._consistency)

    async def _create(self, name: str, **config: Any) -> None:
        if self.replicas > 1:
            config["replication_config"] = replication(self.replicas)
        try:
            await self.client.collections.create(name, **config)
        except UnexpectedStatusCodeError as exc:
            if not already_exists(exc):
                raise

    async def _add_missing_properties(self, name: str, wanted: Sequence[Property]) -> list[str]:
        """Add properties a newer Quorum defines to a collection an older one created, so
        an existing archive keeps working (its old segments simply lack the new fields).
        Returns the range-filtered properties it has without their range index."""
        col = self.client.collections.use(name)
        config = await col.config.get()  # the full config: the simple one lacks replication
        factor = config.replication_config.factor
        if factor != self.replicas:
            raise ConfigError(
                f"Weaviate's {name} keeps {factor} cop{'ies' if factor != 1 else 'y'} of each "
                f"object but QUORUM_WEAVIATE_REPLICAS is {self.replicas}: set "
                f"QUORUM_WEAVIATE_REPLICAS={factor} (the factor of existing collections is "
                "changed in Weaviate, not by Quorum)."
            )
        have = {p.name for p in config.properties}
        unranged = [
            p.name
            for p in config.properties
            if p.name in RANGE_FILTERED and not p.index_range_filters
        ]
        for prop in wanted:
            if prop.name not in have:
                try:
                    await col.config.add_property(prop)
                except UnexpectedStatusCodeError as exc:
                    if not already_exists(exc):  # another process added it first
                        raise
        for p in config.properties:
            if p.name in UNFILTERED and p.index_filterable:
                await _drop_filterable(col, name, p.name)
        return unranged

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
                        if not already_exists(exc):  # another ingest created it first
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
        return self._use(SEGMENTS).with_tenant(check_kb(kb))

    def units(self, kb: str) -> Any:
        """The collection of the other levels (turns, topics, summaries), in one tenant."""
        return self._use(UNITS).with_tenant(check_kb(kb))

    def _of_level(self, kb: str, level: Level) -> tuple[Any, _Filters | None]:
        """The collection holding ``level`` and the filter that keeps only it."""
        if level == "window":
            return self.segments(kb), None
        return self.units(kb), Filter.by_property("level").equal(level)

    def sources_collection(self, kb: str) -> Any:
        """The source collection bound to one tenant."""
        return self._use(SOURCES).with_tenant(check_kb(kb))

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

    async def _live_generation(self, kb: str, source_id: str) -> _Filters | None:
        """The filter that keeps only ``source_id``'s live generation (None: the source
        is not listed). A read that pages or limits must ask for it in the query: filtering
        afterwards would fill a page with an older generation's units and drop them."""
        res = await self.sources_collection(kb).query.fetch_objects(
            filters=Filter.by_property("source_id").equal(source_id),
            limit=1,
            return_properties=["generation"],
        )
        if not res.objects:
            return None
        generation = int(res.objects[0].properties.get("generation") or 0)
        if generation:
            return Filter.by_property("generation").equal(generation)
        return Filter.by_property("generation").is_none(True)  # written before generations

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

    async def _iterate(self, col: Any) -> AsyncIterator[Any]:
        offset = 0
        while True:
            page = await col.query.fetch_objects(limit=500, offset=offset)
            for obj in page.objects:
                yield obj
            if len(page.objects) < 500:
                return
            offset += 500


async def _drop_filterable(col: Any, name: str, prop: str) -> None:
    """Drop the filterable index of a property that holds words (``schema.UNFILTERED``)."""
    try:
        await col.config.delete_property_index(prop, "filterable")
        log.warning("Dropped the filterable index of %s.%s (it kept removed words).", name, prop)
    except (UnexpectedStatusCodeError, WeaviateInvalidInputError) as exc:
        # An older server without the route, or another process dropped it first.
        log.warning("Could not drop the filterable index of %s.%s: %s", name, prop, exc)
