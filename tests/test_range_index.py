"""Range indexes on what searches narrow by ranges (a question's dates, a source's span of
positions and seconds, older generations): a new store makes them, and an archive an older
Quorum made without them gets them when the store connects, once, with the same hits
after as before, on one server and (slow) on a three-node cluster with three copies. On
servers of this module's own: the migration rebuilds collections every other test
shares."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import date
from pathlib import Path

import pytest
import pytest_asyncio
from weaviate import WeaviateAsyncClient
from weaviate.classes.config import Configure, Property

from bench.cluster_nodes import local_cluster
from retrieval.models import Document, SearchFilters, Segment, Source
from retrieval.store import Embedded
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.reindex import add_range_indexes
from retrieval.store.weaviate.schema import (
    RANGE_FILTERED,
    SEGMENT_PROPERTIES,
    SEGMENTS,
    SOURCE_PROPERTIES,
    SOURCES,
    UNIT_PROPERTIES,
    UNITS,
    VECTOR,
    replication,
)
from retrieval.store.weaviate.server import EmbeddedServer, Endpoint, async_client

DAYS = [date(2024, 1, 8), date(2024, 2, 12), date(2024, 3, 11), date(2024, 4, 15)]
LOG = "quorum.store"  # where the store says what it does


@pytest.fixture(scope="module")
def own_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    server = EmbeddedServer(tmp_path_factory.mktemp("weaviate-ranges"))
    yield server.start()
    server.stop()


@pytest_asyncio.fixture
async def old_archive(own_server: Endpoint) -> AsyncIterator[Endpoint]:
    """The server holding Quorum's collections as an older Quorum made them."""
    await make_old_collections(own_server)
    yield own_server


async def make_old_collections(endpoint: Endpoint, replicas: int = 1) -> None:
    """Quorum's collections (and nothing else) as an older Quorum made them: no range
    index anywhere."""
    client = async_client(endpoint)
    await client.connect()
    try:
        await client.collections.delete_all()
        mt = Configure.multi_tenancy(
            enabled=True, auto_tenant_creation=True, auto_tenant_activation=True
        )
        for name, props in (
            (SEGMENTS, SEGMENT_PROPERTIES),
            (UNITS, UNIT_PROPERTIES),
            (SOURCES, SOURCE_PROPERTIES),
        ):
            await client.collections.create(
                name,
                properties=[_unranged(p) for p in props],
                multi_tenancy_config=mt,
                vector_config=Configure.Vectors.self_provided(name=VECTOR),
                inverted_index_config=Configure.inverted_index(index_null_state=name != SOURCES),
                replication_config=replication(replicas) if replicas > 1 else None,
            )
    finally:
        await client.close()


def _unranged(prop: Property) -> Property:
    return prop.model_copy(update={"indexRangeFilters": None})


def meeting(n: int, day: date) -> Embedded:
    """A recorded meeting on ``day``, three timed windows and a summary."""
    sid = f"meeting-{n}"
    source = Source(sid, f"Weekly sync {n}", "video", recorded_at=day, content_hash=f"h{n}")
    windows = tuple(
        Segment(sid, p, f"Priya: the failover drill, week {n}, item {p}.", 60.0 * p, 60.0 * p + 50)
        for p in range(3)
    )
    summary = (Segment(sid, 0, f"Topics: failover drill {n}", level="summary"),)
    vectors = [[1.0, 0.1 * n, 0.01 * p] for p in range(3)]
    return Embedded(Document(source, windows, summary), vectors, [[0.5, 0.1 * n, 1.0]])


async def write_old(endpoint: Endpoint, kb: str, replicas: int = 1) -> None:
    """Meetings on each of ``DAYS``, written as an older Quorum would (its schema as is)."""
    old = WeaviateStore(async_client(endpoint), endpoint.url, replicas)  # schema untouched
    await old.client.connect()
    try:
        await old.upsert_many(kb, [meeting(n, day) for n, day in enumerate(DAYS)])
    finally:
        await old.client.close()


async def dated(store: WeaviateStore, kb: str) -> dict[str, list[str]]:
    """What date filters (and a span of a source) find, by which filter."""
    found: dict[str, list[str]] = {}
    for name, filters in {
        "after": SearchFilters(after=DAYS[2]),
        "before": SearchFilters(before=DAYS[1]),
        "between": SearchFilters(after=DAYS[1], before=DAYS[2]),
    }.items():
        hits = await store.hybrid(kb, "failover drill", [1.0, 0.2, 0.0], filters, 20, 0.5)
        found[name] = sorted(h.id for h in hits)
    span = await store.fetch_ordered(kb, "meeting-1", positions=(1, 2), start_s=100.0, end_s=130.0)
    found["span"] = [h.id for h in span]
    return found


async def ranged(client: WeaviateAsyncClient, name: str) -> set[str]:
    """The properties of collection ``name`` that have a range index."""
    config = await client.collections.use(name).config.get()
    return {p.name for p in config.properties if p.index_range_filters}


async def test_an_archive_without_range_indexes_gets_them_on_start_with_the_same_hits(
    old_archive: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger=LOG):
        async with WeaviateStore.connect(async_client(old_archive), old_archive.url) as store:
            assert await ranged(store.client, SEGMENTS) == set()  # nothing stored: nothing to index
    assert [r for r in caplog.records if r.name == LOG] == []
    await write_old(old_archive, "team")
    old = WeaviateStore(async_client(old_archive), old_archive.url)
    await old.client.connect()
    try:
        before = await dated(old, "team")
    finally:
        await old.client.close()
    assert [len(ids) for ids in before.values()] == [6, 6, 6, 2]  # 2 meetings x 3 windows

    with caplog.at_level(logging.INFO, logger=LOG):
        async with WeaviateStore.connect(async_client(old_archive), old_archive.url) as store:
            assert await ranged(store.client, SEGMENTS) == set(RANGE_FILTERED)
            assert await ranged(store.client, UNITS) == set(RANGE_FILTERED)
            assert await dated(store, "team") == before
    said = [r.getMessage() for r in caplog.records if r.name == LOG]
    assert "for 16 stored objects" in said[0] and said[-1].startswith("Weaviate's date and")

    caplog.clear()
    async with WeaviateStore.connect(async_client(old_archive), old_archive.url) as store:
        assert await dated(store, "team") == before
    assert [r for r in caplog.records if r.name == LOG] == []  # once: a second start is quiet


async def test_a_slow_index_is_waited_for_a_bounded_time_and_finishes_anyway(
    old_archive: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    await write_old(old_archive, "team")
    client = async_client(old_archive)
    await client.connect()
    try:
        with caplog.at_level(logging.WARNING, logger=LOG):
            done = await add_range_indexes(client, {SEGMENTS: ["recorded_at"]}, wait_s=0)
        assert not done
        assert "going on without it" in caplog.records[-1].getMessage()
        # Weaviate goes on building it: a later start finds it there.
        for _ in range(150):
            if "recorded_at" in await ranged(client, SEGMENTS):
                break
            await asyncio.sleep(0.2)
        assert "recorded_at" in await ranged(client, SEGMENTS)
        assert await add_range_indexes(client, {SEGMENTS: ["recorded_at"]})
    finally:
        await client.close()


async def test_a_new_store_has_range_indexes_from_the_start(store: WeaviateStore) -> None:
    assert await ranged(store.client, SEGMENTS) == set(RANGE_FILTERED)
    assert await ranged(store.client, UNITS) == set(RANGE_FILTERED)


async def test_an_index_weaviate_refuses_is_said_and_the_start_goes_on(
    old_archive: Endpoint, caplog: pytest.LogCaptureFixture
) -> None:
    await write_old(old_archive, "team")
    client = async_client(old_archive)
    await client.connect()
    try:
        with caplog.at_level(logging.WARNING, logger=LOG):
            done = await add_range_indexes(client, {SEGMENTS: ["no_such_property"]})
    finally:
        await client.close()
    assert not done
    said = [r.getMessage() for r in caplog.records if r.name == LOG]
    assert "did not add a range index to QuorumSegment.no_such_property (HTTP 404" in said[1]
    assert "The next start tries again." in said[-1]


@pytest.mark.slow
async def test_an_archive_on_a_cluster_gets_its_range_indexes(
    tmp_path: Path,
) -> None:
    with local_cluster(tmp_path) as cluster:
        entry = cluster.nodes[0].endpoint
        await make_old_collections(entry, replicas=3)
        await write_old(entry, "team", replicas=3)
        old = WeaviateStore(async_client(entry), entry.url, 3)
        await old.client.connect()
        try:
            before = await dated(old, "team")
        finally:
            await old.client.close()
        async with WeaviateStore.connect(async_client(entry), entry.url, 3) as store:
            assert await ranged(store.client, SEGMENTS) == set(RANGE_FILTERED)
            assert await dated(store, "team") == before
        for node in cluster.nodes:  # asked through each node, the same hits
            client = async_client(node.endpoint)
            await client.connect()
            try:
                assert await dated(WeaviateStore(client, node.url, 3), "team") == before
            finally:
                await client.close()
