"""Opening the Weaviate store: start or reach the server (the embedded one this process
runs, or one by URL), connect, and stop what was started on exit."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.errors import ConfigError
from retrieval.store.weaviate.server import (
    WEAVIATE_VERSION,
    EmbeddedServer,
    Endpoint,
    async_client,
    endpoint_from_url,
    find_binary,
)

if TYPE_CHECKING:
    from retrieval.service import RetrievalConfig
    from retrieval.store.weaviate.store import WeaviateStore


@contextlib.asynccontextmanager
async def open_weaviate(config: RetrievalConfig) -> AsyncIterator[WeaviateStore]:
    """The store on the Weaviate ``config`` names (started first in embedded mode), with
    its schema in place; the client closes, and a server started here stops, on exit.

    The client library is imported while the embedded server boots: a one-shot
    ``quorum search`` pays the longer of the two, not both."""
    async with contextlib.AsyncExitStack() as stack:
        endpoint = await _endpoint(config, stack, _load_store)
        from retrieval.store.weaviate.store import WeaviateStore

        client = async_client(endpoint, timeout_s=config.weaviate_timeout_s)
        yield await stack.enter_async_context(
            WeaviateStore.connect(client, endpoint.url, config.weaviate_replicas)
        )


DATA_DIR_NAMES = ("weaviate-server", "weaviate")
"""What Weaviate keeps under the data dir: the server's state and data, or the embedded
client's data."""

_booting: dict[Path, tuple[EmbeddedServer, Future[Endpoint]]] = {}
"""Embedded servers ``boot`` started in this process, by data dir, until ``open_weaviate``
takes them over."""


def boot(config: RetrievalConfig) -> None:
    """Start the embedded server ``config`` names now, on a thread of its own, for a
    command that will open the store once it has imported and parsed what it needs:
    ``open_weaviate`` on the same data dir takes the booting server over. Nothing for a
    server reached by URL, or without a binary (``open_weaviate`` says what is wrong)."""
    if config.weaviate_mode != "embedded":
        return
    try:
        binary = find_binary(config.weaviate_binary)
    except ConfigError:
        return
    if binary is None:
        return
    server = EmbeddedServer(config.data_dir / DATA_DIR_NAMES[0], binary)
    if server.data_dir in _booting:
        return
    started: Future[Endpoint] = Future()

    def start() -> None:
        try:
            started.set_result(server.start())
        except BaseException as exc:  # handed to whoever opens the store
            started.set_exception(exc)

    # A daemon: a command that ends before opening the store does not wait for the boot
    # (the server's reaper stops a server whose users have all exited).
    threading.Thread(target=start, name="quorum-weaviate-boot", daemon=True).start()
    _booting[server.data_dir] = (server, started)


def _load_store() -> None:
    """Import the store and the client library (on a worker thread: the event loop and
    the server's start go on meanwhile)."""
    importlib.import_module("retrieval.store.weaviate.store")


async def _endpoint(
    config: RetrievalConfig,
    stack: contextlib.AsyncExitStack,
    meanwhile: Callable[[], None] = lambda: None,
) -> Endpoint:
    """Where the store is; in embedded mode the server is started, ``meanwhile`` running on
    a thread while it boots."""
    api_key = config.weaviate_api_key
    if config.weaviate_mode == "embedded":
        binary = find_binary(config.weaviate_binary)
        if binary is None:
            return await _client_embedded(config, stack)
        booted = _booting.pop(config.data_dir / DATA_DIR_NAMES[0], None)
        if booted is not None:
            server, starting = booted[0], asyncio.wrap_future(booted[1])
        else:
            server = EmbeddedServer(config.data_dir / DATA_DIR_NAMES[0], binary)
            starting = asyncio.ensure_future(asyncio.to_thread(server.start))
        try:
            await asyncio.to_thread(meanwhile)
            endpoint = await asyncio.shield(starting)
        except BaseException:  # stopped (or the import failed) while the thread starts it
            with contextlib.suppress(Exception):
                await starting
                await asyncio.to_thread(server.stop)
            raise
        stack.push_async_callback(asyncio.to_thread, partial(server.stop, linger=config.one_shot))
        # If the server dies under a running bot or chat, it comes back on the same ports.
        watchdog = asyncio.create_task(server.watch(), name="quorum-weaviate-watchdog")
        stack.push_async_callback(_cancel, watchdog)
        return endpoint
    if not config.weaviate_url:
        raise ConfigError(f"QUORUM_WEAVIATE_URL is required in {config.weaviate_mode} mode.")
    if config.weaviate_mode == "cloud" and not api_key:
        raise ConfigError("QUORUM_WEAVIATE_API_KEY is required in cloud mode.")
    return endpoint_from_url(config.weaviate_url, api_key, config.weaviate_grpc_port)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _client_embedded(config: RetrievalConfig, stack: contextlib.AsyncExitStack) -> Endpoint:
    """No weaviate-server binary and no Go: weaviate-client's embedded mode downloads the
    same pinned release on first use (a laptop with internet access)."""
    from weaviate.embedded import EmbeddedOptions, EmbeddedV4

    opts = EmbeddedOptions(
        persistence_data_path=str(config.data_dir / DATA_DIR_NAMES[1]),
        version=WEAVIATE_VERSION,
        hostname="127.0.0.1",
        additional_env_vars={"DISABLE_TELEMETRY": "true", "GO_PROFILING_DISABLE": "true"},
    )
    embedded = EmbeddedV4(opts)
    await asyncio.to_thread(embedded.start)
    stack.push_async_callback(asyncio.to_thread, embedded.stop)
    return Endpoint("127.0.0.1", opts.port, "127.0.0.1", opts.grpc_port)
