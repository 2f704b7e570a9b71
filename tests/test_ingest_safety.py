"""Ingest never loses or hides data silently: a file with the same name in another folder
does not replace the source already there, and two ingests racing on a fresh knowledge
base both finish."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest

from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import ConfigError, SearchUnavailable
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.errors import translate_errors
from retrieval.store.weaviate.server import EmbeddedServer, async_client, endpoint_from_url
from retrieval.write.indexer import ingest

VTT = "WEBVTT\n\n00:00:01.000 --> 00:00:04.000\n<v Ana>{words}\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


async def test_same_name_in_another_folder_never_replaces_a_source(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    old = write(tmp_path / "2024" / "standup.vtt", VTT.format(words="The 2024 plan is frobnitz."))
    new = write(tmp_path / "2025" / "standup.vtt", VTT.format(words="The 2025 plan is quuxify."))
    first = await ingest(store, embedder, kb, [tmp_path / "2024"])
    assert first.count("added") == 1

    second = await ingest(store, embedder, kb, [tmp_path / "2025"])
    assert second.count("failed") == 1
    reason = second.failed[0].reason or ""
    assert "already holds" in reason and str(old) in reason and ".meta.json" in reason
    [info] = await store.list_sources(kb)
    assert info.source.path == str(old)

    # Given its own id, the second file is kept alongside the first.
    write(new.with_name("standup.meta.json"), json.dumps({"id": "standup-2025"}))
    third = await ingest(store, embedder, kb, [tmp_path / "2025"])
    assert third.count("added") == 1
    assert {i.source.id for i in await store.list_sources(kb)} == {"standup", "standup-2025"}


async def test_a_moved_file_takes_its_source_over(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    before = write(tmp_path / "a" / "retro.vtt", VTT.format(words="We ship on Friday."))
    assert (await ingest(store, embedder, kb, [before])).count("added") == 1
    after = tmp_path / "b" / "retro.vtt"
    after.parent.mkdir()
    before.rename(after)
    report = await ingest(store, embedder, kb, [after], force=True)
    assert report.count("updated") == 1, report.results
    [info] = await store.list_sources(kb)
    assert info.source.path == str(after)


async def test_a_fresh_server_two_stores_at_once_and_a_stale_state_file(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    # server.json left by a crash, naming a live pid that is not a weaviate-server.
    (tmp_path / "server.json").write_text(
        json.dumps({"pid": os.getpid(), "port": 9, "grpc_port": 10, "users": [os.getpid()]})
    )
    server = EmbeddedServer(tmp_path, startup_timeout=60)
    t0 = time.monotonic()
    endpoint = await asyncio.to_thread(server.start)
    try:
        assert time.monotonic() - t0 < 45  # not the whole timeout spent on the stale pid
        # Two processes creating the schema and a knowledge base at once: both succeed.
        async with (
            WeaviateStore.connect(async_client(endpoint), endpoint.url) as a,
            WeaviateStore.connect(async_client(endpoint), endpoint.url) as b,
        ):
            await a.client.collections.delete_all()  # this test's own server: fresh again
            await asyncio.gather(a.ensure_schema(), b.ensure_schema())
            await asyncio.gather(a._ensure_tenant("race"), b._ensure_tenant("race"))
            assert await a.has_kb("race") and await b.has_kb("race")
            # A request Weaviate rejects is said to be rejected, not "not reachable".
            with pytest.raises(SearchUnavailable, match="failed a query|rejected") as info:
                await _past_window(a)
            assert "not reachable" not in str(info.value)
    finally:
        await asyncio.to_thread(server.stop)


async def _past_window(store: WeaviateStore) -> None:
    # A read past Weaviate's query window, as the store reads (fetch_ordered itself now
    # answers [] for a source it does not hold before asking Weaviate anything).
    with translate_errors(store.url):
        await store.segments("race").query.fetch_objects(offset=20_000, limit=10)


def test_a_password_in_the_weaviate_url_is_never_echoed() -> None:
    for url in ("ftp://admin:hunter2@db:8080", "http://admin:hunter2@db:port", "admin:hunter2@"):
        with pytest.raises(ConfigError) as info:
            endpoint_from_url(url)
        assert "hunter2" not in str(info.value) and "***@" in str(info.value)
