"""A weaviate-server that dies under a running Quorum comes back: the process using it
restarts it on the same ports, and its client reconnects without being rebuilt."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import SearchUnavailable
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.reaper import pid_alive
from retrieval.store.weaviate.server import EmbeddedServer, async_client
from retrieval.write.indexer import ingest


async def test_a_killed_server_is_restarted_and_search_comes_back(
    tmp_path: Path, embedder: SentenceTransformerEmbedder
) -> None:
    server = EmbeddedServer(tmp_path / "server", startup_timeout=60)
    endpoint = await asyncio.to_thread(server.start)
    watchdog = asyncio.create_task(server.watch(interval_s=0.2))
    try:
        async with WeaviateStore.connect(
            async_client(endpoint, timeout_s=5), endpoint.url
        ) as store:
            search = SearchService(store, embedder)
            notes = tmp_path / "standup.txt"
            notes.write_text("[00:00:05] Ana Ruiz: The grommet cache is flushed nightly.\n")
            assert (await ingest(store, embedder, "k", [notes])).count("added") == 1
            assert await search.search("k", "grommet cache")

            old_pid = json.loads((tmp_path / "server" / "server.json").read_text())["pid"]
            os.kill(old_pid, signal.SIGKILL)
            failures, slowest = 0, 0.0
            deadline = time.monotonic() + 120
            while True:
                t0 = time.monotonic()
                try:
                    hits = await search.search("k", "grommet cache")
                except SearchUnavailable:  # while it is down: one clear error, quickly
                    failures += 1
                    slowest = max(slowest, time.monotonic() - t0)
                    assert time.monotonic() < deadline, "the server never came back"
                    await asyncio.sleep(0.5)
                    continue
                if hits:
                    break
            assert slowest < 15
            # The server answers a moment before the restarter has recorded its new pid.
            for _ in range(50):
                state = json.loads((tmp_path / "server" / "server.json").read_text())
                if state["pid"] != old_pid:
                    break
                await asyncio.sleep(0.1)
            assert state["pid"] != old_pid and pid_alive(state["pid"])
            assert state["port"] == endpoint.port  # same ports: nobody had to reconnect anew
    finally:
        watchdog.cancel()
        await asyncio.gather(watchdog, return_exceptions=True)
        await asyncio.to_thread(server.stop)
