"""Crash-consistent ingest: ``kill -9`` of an ingest in the middle of writing a source
never lets search see part of it, and the next ingest finishes the job unasked."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import SearchUnavailable
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import EmbeddedServer, Endpoint, async_client
from retrieval.write.indexer import ingest

REPO = Path(__file__).resolve().parent.parent

# Ingests one file with a stand-in embedder and small batches, so the write of its
# segments takes many round trips: the window the test kills the process in.
WRITER = textwrap.dedent(
    """
    import asyncio, hashlib, sys
    from pathlib import Path
    from retrieval.write.indexer import ingest
    from retrieval.store.weaviate import WeaviateStore
    from retrieval.store.weaviate.server import Endpoint, async_client

    class Embedder:
        dim = 384
        async def embed_documents(self, texts):
            return [self._vec(t) for t in texts]
        async def embed_query(self, text):
            return self._vec(text)
        def _vec(self, text):
            seed = hashlib.sha256(text.encode()).digest()
            return [(seed[i % 32] - 128) / 128 for i in range(384)]

    upsert_many = WeaviateStore.upsert_many
    async def slow_upsert_many(self, kb, items, batch_size=256, known=None):
        return await upsert_many(self, kb, items, batch_size=2, known=known)
    WeaviateStore.upsert_many = slow_upsert_many

    async def main():
        port, grpc, kb, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
        endpoint = Endpoint("127.0.0.1", port, "127.0.0.1", grpc)
        async with WeaviateStore.connect(async_client(endpoint), endpoint.url) as store:
            print("connected", flush=True)
            await ingest(store, Embedder(), kb, [Path(path)], force=True)

    asyncio.run(main())
    """
)


def meeting(path: Path, version: str, turns: int = 600) -> Path:
    lines = [
        f"[{n // 3600:02d}:{n // 60 % 60:02d}:{n % 60:02d}] Ana Ruiz: In {version} item {n} "
        f"the {version}word plan covers step {n} of the rollout in some detail here."
        for n in range(turns)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


async def kill_mid_write(
    store: WeaviateStore, endpoint: Endpoint, kb: str, path: Path, before: int
) -> None:
    """Start a writer and kill -9 it once it has written some, not all, of the segments."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        WRITER,
        str(endpoint.port),
        str(endpoint.grpc_port),
        kb,
        str(path),
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.returncode is None:
            if await store.count(kb) > before + 6:
                break
            await asyncio.sleep(0.02)
        if proc.returncode is not None:
            assert proc.stderr is not None
            pytest.fail((await proc.stderr.read()).decode()[-2000:])
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def consistent(search: SearchService, store: WeaviateStore, kb: str, word: str) -> list[str]:
    """Check that search shows only listed sources, whole; returns the texts found."""
    listed = {i.source.id: i.segments for i in await store.list_sources(kb)}
    hits = await search.search(kb, f"{word} plan rollout", k=50)
    assert all(h.source.id in listed for h in hits)
    transcript = await search.archive(kb).transcript("meeting", limit=500) if listed else []
    if listed:
        assert len(transcript) == listed["meeting"]  # exactly one generation, whole
    return [h.segment.text for h in hits]


@pytest.mark.parametrize("case", ["new", "changed"])
async def test_kill_9_mid_ingest_never_shows_half_a_source(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    weaviate_endpoint: Endpoint,
    kb: str,
    tmp_path: Path,
    case: str,
) -> None:
    path = tmp_path / "meeting.txt"
    before = 0
    if case == "changed":
        meeting(path, "old", turns=100)
        assert (await ingest(store, embedder, kb, [path])).count("added") == 1
        before = await store.count(kb)
    meeting(path, "new", turns=200)
    await kill_mid_write(store, weaviate_endpoint, kb, path, before)
    assert await store.count(kb) > before  # the killed writer left segments behind

    texts = await consistent(search, store, kb, "new")
    if case == "new":
        assert texts == [] and await store.list_sources(kb) == []
    else:
        assert texts and all("newword" not in t for t in texts)  # still the old meeting

    # The next ingest, unasked, cleans up and writes the file whole.
    search.forget_sources(kb)
    report = await ingest(store, embedder, kb, [path])
    assert report.count("added" if case == "new" else "updated") == 1, report.results
    [info] = await store.list_sources(kb)
    assert await store.count(kb) == info.segments  # no orphan left
    texts = await consistent(search, store, kb, "new")
    assert texts and all("oldword" not in t for t in texts)


async def test_orphans_of_a_crash_are_cleaned_at_the_next_ingest_start(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    weaviate_endpoint: Endpoint,
    kb: str,
    tmp_path: Path,
) -> None:
    keep = meeting(tmp_path / "keep.txt", "keep", turns=30)
    assert (await ingest(store, embedder, kb, [keep])).count("added") == 1
    lost = meeting(tmp_path / "meeting.txt", "lost", turns=200)
    await kill_mid_write(store, weaviate_endpoint, kb, lost, await store.count(kb))
    [info] = await store.list_sources(kb)
    assert await store.count(kb) > info.segments
    assert await store.clean_orphans(kb, min_age_s=0) > 0
    assert await store.count(kb) == info.segments


async def test_weaviate_killed_right_after_the_switch_over_reports_the_truth_and_reads_whole(
    embedder: SentenceTransformerEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """kill -9 of Weaviate just after an update's records flipped, before the old version
    is cleared: the ingest says "updated" (the new version is live), and once Weaviate is
    back the summary and a page of the transcript are the new version's, whole."""
    server = EmbeddedServer(tmp_path / "server", startup_timeout=120)
    endpoint = await asyncio.to_thread(server.start)
    watchdog = asyncio.create_task(server.watch(interval_s=0.2))
    drop_older = WeaviateStore._drop_older_many

    async def killed_first(self: WeaviateStore, *args: Any) -> dict[str, int]:
        state = json.loads((tmp_path / "server" / "server.json").read_text())
        os.kill(int(state["pid"]), signal.SIGKILL)
        await asyncio.sleep(0.5)
        return await drop_older(self, *args)

    try:
        client = async_client(endpoint, timeout_s=5)
        async with WeaviateStore.connect(client, endpoint.url) as store:
            path = meeting(tmp_path / "meeting.txt", "old", turns=100)
            assert (await ingest(store, embedder, "k", [path])).count("added") == 1
            meeting(path, "new", turns=200)
            with monkeypatch.context() as m:
                m.setattr(WeaviateStore, "_drop_older_many", killed_first)
                report = await ingest(store, embedder, "k", [path])
            assert [r.status for r in report.results] == ["updated"], report.results

            search = SearchService(store, embedder)
            archive = search.archive("k")
            for _ in range(600):  # until the watchdog has Weaviate back
                with contextlib.suppress(SearchUnavailable):
                    summary = await archive.summary("meeting")
                    break
                await asyncio.sleep(0.2)
            assert "oldword" not in summary.segment.text
            page = await archive.transcript("meeting", limit=20)
            assert len(page) == 20 and all("newword" in h.segment.text for h in page)
    finally:
        watchdog.cancel()
        await asyncio.gather(watchdog, return_exceptions=True)
        await asyncio.to_thread(server.stop)
