"""Quorum's Weaviate collections and what they hold for a source: the schema (created or
extended idempotently; range indexes an older archive lacks added by ``reindex``), one
tenant per knowledge base, the per-tenant collections of each level, the stored record of
a source, and the filter that keeps only live generations (``writes`` explains
generations)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import weaviate
from weaviate.classes.config import Configure, Property, Reconfigure
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
from retrieval.store.weaviate.tenants import (
    GRACE_S,
    REGISTRY,
    STALE_BUILD_S,
    TenantNames,
    follows_switch,
    registry_config,
)

log = logging.getLogger(__name__)


class Collections:
    """Quorum's Weaviate collections, reached through one async client."""

    def __init__(self, client: weaviate.WeaviateAsyncClient, url: str, replicas: int = 1) -> None:
        self.client = client
        self.url = url
        self.replicas = replicas  # copies of every object, one per node (a cluster's factor)
        self._consistency = consistency(replicas)
        self._tenants: set[str] = set()  # tenants known to exist
        self.names = TenantNames(client, self._use)  # each knowledge base's live tenant
        self._stems: dict[str, tuple[bool, float]] = {}  # kb -> (stores stems?, asked at)

    async def ensure_schema(self) -> None:
        """Create the two collections if they are missing. Idempotent across processes:
        when two create them at once, the loser's 422 "already exists" is success."""
        with translate_errors(self.url):
            existing = await self.client.collections.list_all(simple=True)
            # No tenant made by a write: a late write to a tenant a rebuild deleted fails
            # (and is written again to the live one) instead of bringing it back.
            mt = Configure.multi_tenancy(
                enabled=True, auto_tenant_creation=False, auto_tenant_activation=True
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
            if REGISTRY not in existing:
                await self._create(REGISTRY, **registry_config())
            if any(unranged.values()):
                await add_range_indexes(self.client, unranged)
            await self.sweep()

    async def sweep(self, now: float | None = None) -> list[str]:
        """Delete the tenants a crash left: a rebuild's half-built tenant (no heartbeat for
        ``STALE_BUILD_S``) and a tenant switched away from (``GRACE_S`` after). Returns
        the tenants deleted."""
        now = time.time() if now is None else now
        live, spares = await self.names.everything()
        gone: list[str] = []
        for spare in spares:
            if live.get(spare.kb, spare.kb) == spare.tenant:  # live: a crash mid-switch
                await self.names.unspare(spare.tenant)
                continue
            age = now - spare.at
            if age > (STALE_BUILD_S if spare.state == "built" else GRACE_S):
                log.warning(
                    "Deleting Weaviate tenant %s of %s (%s, %.0f s ago).",
                    spare.tenant,
                    spare.kb,
                    "a rebuild that stopped" if spare.state == "built" else "switched away",
                    age,
                )
                await self.drop_tenant(spare.tenant)
                await self.names.unspare(spare.tenant)
                gone.append(spare.tenant)
        return gone

    async def create_tenant(self, tenant: str) -> None:
        """Make ``tenant`` in every collection (idempotent across processes)."""
        for name in (SEGMENTS, UNITS, SOURCES):
            col = self.client.collections.use(name)
            if await col.tenants.get_by_name(tenant) is None:
                try:
                    await col.tenants.create([Tenant(name=tenant)])
                except UnexpectedStatusCodeError as exc:
                    if not already_exists(exc):  # another ingest created it first
                        raise
        self._tenants.add(tenant)

    async def drop_tenant(self, tenant: str) -> None:
        """Delete ``tenant`` from every collection: Weaviate deletes its files."""
        self._tenants.discard(tenant)
        for name in (SOURCES, SEGMENTS, UNITS):  # the records first: nothing half-visible
            col = self.client.collections.use(name)
            if await col.tenants.get_by_name(tenant) is None:
                continue
            try:
                await col.tenants.remove([tenant])
            except UnexpectedStatusCodeError:
                if await col.tenants.get_by_name(tenant) is not None:
                    raise  # not another process deleting it first

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
        mt = config.multi_tenancy_config
        if mt is not None and mt.enabled and mt.auto_tenant_creation:
            # An older Quorum let writes make tenants: see ``ensure_schema``.
            await col.config.update(
                multi_tenancy_config=Reconfigure.multi_tenancy(auto_tenant_creation=False)
            )
        for p in config.properties:
            if p.name in UNFILTERED and p.index_filterable:
                await _drop_filterable(col, name, p.name)
        return unranged

    async def _ensure_tenant(self, kb: str) -> str:
        """``kb``'s live tenant (asked afresh), made when missing; its name."""
        with translate_errors(self.url):
            tenant = await self.names.live(kb, fresh=True)
            if tenant not in self._tenants:
                await self.create_tenant(tenant)
        return tenant

    async def has_kb(self, kb: str) -> bool:
        """True when the knowledge base has been created (something was ingested)."""
        check_kb(kb)
        with translate_errors(self.url):
            tenant = await self.names.live(kb)
            if tenant in self._tenants:
                return True
            # SOURCES gets its tenant last in create_tenant: seen there, all exist.
            col = self.client.collections.use(SOURCES)
            found = await col.tenants.get_by_name(tenant) is not None
            if not found and tenant != (now := await self.names.live(kb, fresh=True)):
                tenant = now  # the cached one was switched away from and deleted
                found = await col.tenants.get_by_name(tenant) is not None
        if found:
            self._tenants.add(tenant)
        return found

    async def knowledge_bases(self) -> list[str]:
        """Every knowledge base's name (its tenant's, or the one ``QuorumTenants`` maps
        its rebuilt tenant to; spares are none)."""
        with translate_errors(self.url):
            tenants = set(await self.client.collections.use(SEGMENTS).tenants.get())
            live, spares = await self.names.everything()
        named = set(live.values()) | {s.tenant for s in spares if live.get(s.kb, s.kb) != s.tenant}
        return sorted({kb for kb, t in live.items() if t in tenants} | (tenants - named))

    def segments(self, kb: str) -> Any:
        """The segment collection bound to one knowledge base's tenant."""
        return self._use(SEGMENTS).with_tenant(self.names.cached(check_kb(kb)))

    def units(self, kb: str) -> Any:
        """The collection of the other levels (turns, topics, summaries), in one tenant."""
        return self._use(UNITS).with_tenant(self.names.cached(check_kb(kb)))

    def _of_level(self, kb: str, level: Level) -> tuple[Any, _Filters | None]:
        """The collection holding ``level`` and the filter that keeps only it."""
        if level == "window":
            return self.segments(kb), None
        return self.units(kb), Filter.by_property("level").equal(level)

    def sources_collection(self, kb: str) -> Any:
        """The source collection bound to one tenant."""
        return self._use(SOURCES).with_tenant(self.names.cached(check_kb(kb)))

    async def source_hash(self, kb: str, source_id: str) -> str | None:
        """The content hash stored for a source, or None when it is not indexed."""
        stored = await self.stored_source(kb, source_id)
        return None if stored is None else stored.content_hash

    @follows_switch
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

    @follows_switch
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
