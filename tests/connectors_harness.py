"""What the connector tests share: the core as `quorum serve` opens it (on the session's
Weaviate server and model), with its connectors polling as serve runs them, and waits."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

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
from tests.conftest import SIGNER


@contextlib.asynccontextmanager
async def serving(
    settings: Settings,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    replicas: int = 1,
) -> AsyncIterator[CoreServices]:
    """The core with its connectors polling (``replicas`` pollers, as that many `quorum
    serve` processes would run them) and summaries announced, until the block ends."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    lazy = LazyEmbedder(None, settings.embed_batch_size)
    lazy._model = embedder  # the session's model, already loaded
    search = SearchService(store, lazy, signer=SIGNER)
    config = retrieval_config(settings)
    retrieval = Retrieval(config, store, lazy, search, config.transcriber())
    async with open_core(settings, retrieval=retrieval) as services:
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
