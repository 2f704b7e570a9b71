"""What every bench shares: one percentile, and one way to get a store on a throw-away
Weaviate server (the same binary and settings the product uses)."""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

from bot.config import load_settings
from retrieval.store.weaviate import WeaviateSettings, WeaviateStore
from retrieval.store.weaviate.server import EmbeddedServer, Endpoint, async_client, find_binary


def percentile(values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile, ``p`` from 0 to 100 (nearest rank; 0.0 for no values)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def weaviate_binary() -> Path:
    """The weaviate-server the product would run (``QUORUM_WEAVIATE_BINARY``, PATH, the
    cached build), or exit saying how to get one."""
    binary = find_binary(load_settings().part(WeaviateSettings).binary)
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
async def temp_store(data_dir: Path, timeout_s: float = 30.0) -> AsyncIterator[WeaviateStore]:
    """A connected ``WeaviateStore`` on a weaviate-server of its own (``temp_server``)."""
    async with (
        temp_server(data_dir) as endpoint,
        WeaviateStore.connect(async_client(endpoint, timeout_s=timeout_s), endpoint.url) as store,
    ):
        yield store


class KeptIndex:
    """An ingest kept in ``root`` between runs of a bench (``--index DIR``): a marker file
    named for what was ingested says it finished, so a stopped ingest is never reused."""

    def __init__(self, root: Path, marker: str) -> None:
        self.root = root
        self.marker = root / marker

    def reused(self, say: Callable[[str], object]) -> bool:
        """True (and says so) when a finished ingest is there to search again."""
        if not self.marker.exists():
            return False
        say(f"reusing the index in {self.root} (delete it to ingest again)")
        return True

    def keep(self) -> None:
        """Mark the ingest finished."""
        self.marker.touch()
