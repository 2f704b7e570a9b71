"""Forgetting rebuilds a knowledge base's Weaviate tenant without the removed source
(``retrieval/store/weaviate/rebuild.py``), on the real server, with two clients standing
for two processes (``quorum serve`` and a ``quorum remove``): what is written or removed
while a rebuild runs is neither lost nor brought back, a process that cached the old
tenant reads and writes the new one, a crash leaves the old tenant live and its spare is
swept at the next start, and removals in quick succession share one rebuild."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.schema import SEGMENTS
from retrieval.store.weaviate.server import Endpoint, async_client
from retrieval.store.weaviate.tenants import STALE_BUILD_S, fresh_tenant
from retrieval.write.indexer import ingest

NOTES = {
    "budget": "# Budget\n\nThe travel budget for the offsite is four thousand euros.\n",
    "hiring": "# Hiring\n\nWe open two backend roles and one designer role in March.\n",
    "roadmap": "# Roadmap\n\nThe mobile app ships offline mode in the second quarter.\n",
}


def notes(folder: Path, names: dict[str, str]) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = []
    for name, text in names.items():
        (folder / f"{name}.md").write_text(text)
        paths.append(folder / f"{name}.md")
    return paths


async def ids(store: WeaviateStore, kb: str) -> set[str]:
    return {i.source.id for i in await store.list_sources(kb)}


async def tenants(store: WeaviateStore) -> set[str]:
    return set(await store.client.collections.use(SEGMENTS).tenants.get())


@pytest.fixture
async def other(weaviate_endpoint: Endpoint) -> AsyncIterator[WeaviateStore]:
    """A second client: another process (its own cache of each knowledge base's tenant)."""
    async with WeaviateStore.connect(
        async_client(weaviate_endpoint), weaviate_endpoint.url
    ) as store:
        yield store


@pytest.fixture
async def filled(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> str:
    """``kb`` holding ``NOTES``."""
    await ingest(store, embedder, kb, notes(tmp_path / "a", NOTES))
    return kb


async def test_a_rebuild_keeps_what_was_written_and_drops_what_was_removed_meanwhile(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    kb: str,
    filled: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = await store.names.live(kb, fresh=True)
    copy = store._copy_all

    async def copy_then_change(kb_: str, src: str, dst: str) -> Any:
        copied = await copy(kb_, src, dst)
        # After the copy, before the switch: an add and a removal land in the old tenant.
        await ingest(
            store,
            embedder,
            kb,
            notes(
                tmp_path / "b",
                {"offsite": "# Offsite\n\nThe offsite moves to the lakeside lodge in Annecy.\n"},
            ),
        )
        assert await store.delete_source(kb, "hiring") > 0
        return copied

    monkeypatch.setattr(store, "_copy_all", copy_then_change)
    rebuilt = await store.rebuild(kb)
    assert rebuilt.tenant != old and await store.names.live(kb, fresh=True) == rebuilt.tenant
    assert await ids(store, kb) == {"budget", "roadmap", "offsite"}
    assert old not in await tenants(store)  # the old tenant's files went with it
    assert (
        kb in await store.knowledge_bases() and rebuilt.tenant not in await store.knowledge_bases()
    )
    vector = await embedder.embed_query("Where is the offsite?")
    hits = await store.hybrid(kb, "offsite lodge Annecy", vector, None, 3, 0.5)
    assert hits and hits[0].source.id == "offsite"


async def test_another_process_reads_and_writes_the_new_tenant_even_mid_write(
    store: WeaviateStore,
    other: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    kb: str,
    filled: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert await ids(other, kb) == set(NOTES)  # ``other`` caches the tenant now
    caught_up = asyncio.Event()
    catch_up = store._catch_up

    async def catch_up_then_say(*args: Any) -> int:
        done = await catch_up(*args)
        caught_up.set()
        return done

    monkeypatch.setattr(store, "_catch_up", catch_up_then_say)
    write = other._upsert_in
    tries: list[str] = []

    async def slow_write(kb_: str, *args: Any) -> Any:
        # The first try chose the old tenant before the switch, and writes after it.
        tries.append(other.names.cached(kb_))
        if len(tries) == 1:
            await caught_up.wait()
        return await write(kb_, *args)

    monkeypatch.setattr(other, "_upsert_in", slow_write)
    late = notes(tmp_path / "b", {"late": "# Late\n\nThe quarterly review moves to Friday.\n"})
    writing = asyncio.create_task(ingest(other, embedder, kb, late))
    await asyncio.sleep(0.5)
    rebuilt = await store.rebuild(kb, grace_s=0.5)
    await writing
    assert tries[0] != rebuilt.tenant and tries[-1] == rebuilt.tenant  # written again
    assert await ids(store, kb) == {*NOTES, "late"}
    # A late write in a process that had not seen the old tenant makes it again: it goes.
    await other.create_tenant(tries[0])
    assert await other.drop_stray(kb, rebuilt.tenant) is False  # the live one stays
    assert await other.drop_stray(kb, tries[0]) and tries[0] not in await tenants(store)
    # A process whose cached name is the deleted tenant: its reads follow the switch.
    other.names._live[kb] = (tries[0], time.monotonic())
    assert await ids(other, kb) == {*NOTES, "late"}
    assert other.names.cached(kb) == rebuilt.tenant


async def test_a_crash_mid_rebuild_leaves_the_old_tenant_live_and_the_spare_is_swept(
    store: WeaviateStore, filled: str
) -> None:
    kb = filled
    live = await store.names.live(kb, fresh=True)
    half = fresh_tenant(kb)  # what a rebuild killed mid-copy left
    await store.names.spare(kb, half, "built")
    await store.create_tenant(half)
    assert half not in await store.sweep()  # its heartbeat is fresh: maybe another process's
    assert await store.names.live(kb, fresh=True) == live
    assert await ids(store, kb) == set(NOTES)
    assert kb in await store.knowledge_bases() and half not in await store.knowledge_bases()
    assert half in await store.sweep(now=time.time() + STALE_BUILD_S + 1)
    assert half not in await tenants(store) and await ids(store, kb) == set(NOTES)
    # Killed between marking the live tenant retired and switching: it stays live.
    await store.names.spare(kb, live, "retired")
    assert await store.sweep(now=time.time() + STALE_BUILD_S + 1) == []
    assert live in await tenants(store) and await ids(store, kb) == set(NOTES)
    assert kb in await store.knowledge_bases()


async def test_removals_in_quick_succession_share_one_rebuild(
    store: WeaviateStore, filled: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    kb = filled
    rebuild = store.rebuild
    runs: list[str] = []

    async def counted(kb_: str, *args: Any) -> Any:
        runs.append(kb_)
        return await rebuild(kb_, *args)

    monkeypatch.setattr(store, "rebuild", counted)

    async def remove(source_id: str) -> None:
        await store.delete_source(kb, source_id)
        await store.purge(kb)

    await asyncio.gather(*(remove(s) for s in NOTES))
    assert runs == [kb] and await ids(store, kb) == set()
