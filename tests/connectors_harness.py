"""What the connector tests share: the core as `quorum serve` opens it (on the session's
Weaviate server and model), with its connectors polling as serve runs them, and waits."""

from __future__ import annotations

import asyncio
import contextlib
import time
import wave
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapters.chat.announce import announcer
from bot.config import Settings
from bot.connectors import ConnectorStatus, statuses_of
from bot.connectors.run import run_connectors
from bot.jobs import Job
from bot.wiring import CoreServices, open_core, retrieval_config
from retrieval.encoding.embed import LazyEmbedder, SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.service import Retrieval
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.conftest import SIGNER


@dataclass(frozen=True)
class Parts:
    """The session's Weaviate server (the settings pointed at it) and model."""

    store: WeaviateStore
    embedder: SentenceTransformerEmbedder


@pytest.fixture
def parts(
    weaviate_env: Endpoint, store: WeaviateStore, embedder: SentenceTransformerEmbedder
) -> Parts:
    """The store and model every connector test's core is opened on."""
    return Parts(store, embedder)


@contextlib.asynccontextmanager
async def serving(
    settings: Settings,
    parts: Parts,
    replicas: int = 1,
    *,
    inline: bool = True,
) -> AsyncIterator[CoreServices]:
    """The core with its connectors polling (``replicas`` pollers, as that many `quorum
    serve` processes would run them) and summaries announced, until the block ends.
    ``inline``: the jobs run here when no worker is alive (else they wait for one)."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    lazy = LazyEmbedder(None, settings.embed_batch_size)
    lazy._model = parts.embedder  # the session's model, already loaded
    search = SearchService(parts.store, lazy, signer=SIGNER)
    config = retrieval_config(settings)
    retrieval = Retrieval(config, parts.store, lazy, search, config.transcriber())
    async with open_core(settings, retrieval=retrieval, inline_jobs=inline) as services:
        services.writer.add_announcer(announcer(settings, search))
        tasks = [
            asyncio.create_task(run_connectors(services, holder=f"replica-{n}"))
            for n in range(replicas)
        ]
        try:
            yield services
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for task in tasks:  # a connector that died is a failure, not a quiet test
                if not task.cancelled() and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]


def wav(path: Path, seconds: float = 1.0) -> Path:
    """A short WAV of room noise: a recording a transcript can sit beside."""
    rng = np.random.default_rng(3)
    pcm = (rng.normal(0, 200, int(16_000 * seconds))).astype(np.int16)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(pcm.tobytes())
    return path


async def kept_media(services: CoreServices, kb: str, source_id: str) -> list[Path]:
    """The files a source's page serves (the media store's copies)."""
    [source] = [
        i.source
        for i in await services.retrieval.store.list_sources(kb)
        if i.source.id == source_id
    ]
    assert services.retrieval.media is not None
    return services.retrieval.media.copies(kb, source.content_hash)


async def until(check: Callable[[], Awaitable[Any]], within_s: float = 60.0) -> Any:
    """Poll ``check`` until it returns something truthy; that value."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if found := await check():
            return found
        await asyncio.sleep(0.1)
    raise AssertionError("timed out")


async def jobs_of(services: CoreServices, kb: str) -> list[Job]:
    """The knowledge base's jobs, oldest first."""
    return sorted(await services.jobs.table.listing(kb, 1000), key=lambda j: j.id)


async def status(services: CoreServices, name: str) -> ConnectorStatus:
    """One connector's status row (waiting for its first)."""
    found: ConnectorStatus = await until(lambda: statuses_of(services.sessions).get(name))
    return found


async def settled(services: CoreServices, kb: str, count: int) -> list[Job]:
    """Wait until ``kb`` has ``count`` jobs, all finished; them."""

    async def done() -> list[Job] | None:
        jobs = await jobs_of(services, kb)
        finished = len(jobs) >= count and all(j.state not in ("queued", "running") for j in jobs)
        return jobs if finished else None

    jobs: list[Job] = await until(done)
    return jobs


async def polls(services: CoreServices, name: str, n: int = 3) -> None:
    """Wait for ``n`` more polls of connector ``name``."""
    first = (await status(services, name)).last_run or 0.0
    seen = {first}

    async def more() -> bool:
        seen.add((await status(services, name)).last_run or 0.0)
        return len(seen) > n

    await until(more)
