"""What every bench shares: one percentile, and one way to get a store on a throw-away
Weaviate server (the same binary and settings the product uses)."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

from bot.config import load_settings
from retrieval.store import Store
from retrieval.weaviate_server import EmbeddedServer, Endpoint, async_client, find_binary


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile, ``p`` from 0 to 100 (nearest rank; 0.0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def weaviate_binary() -> Path:
    """The weaviate-server the product would run (``QUORUM_WEAVIATE_BINARY``, PATH, the
    cached build), or exit saying how to get one."""
    binary = find_binary(load_settings().weaviate_binary)
    if binary is None:
        raise SystemExit("weaviate-server not found: run `make install` first.")
    return binary


@contextlib.asynccontextmanager
async def temp_server(data_dir: Path) -> AsyncIterator[Endpoint]:
    """A weaviate-server of its own on free ports, its data in ``data_dir``."""
    server = EmbeddedServer(data_dir, weaviate_binary())
    endpoint = await asyncio.to_thread(server.start)
    try:
        yield endpoint
    finally:
        await asyncio.to_thread(server.stop)


@contextlib.asynccontextmanager
async def temp_store(data_dir: Path, timeout_s: float = 30.0) -> AsyncIterator[Store]:
    """A connected ``Store`` on a weaviate-server of its own (``temp_server``)."""
    async with (
        temp_server(data_dir) as endpoint,
        Store.connect(async_client(endpoint, timeout_s=timeout_s), endpoint.url) as store,
    ):
        yield store
