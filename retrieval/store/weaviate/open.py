"""Opening the Weaviate store: start or reach the server (the embedded one this process
runs, or one by URL), connect, and stop what was started on exit. ``open_weaviate`` and
``boot`` are the store's opener and booter in ``retrieval/store/registry.py``."""

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
from retrieval.store.registry import Booter, Opener
from retrieval.store.weaviate.server import (
    WEAVIATE_VERSION,
    EmbeddedServer,
    Endpoint,
    async_client,
    endpoint_from_url,
    find_binary,
)
from retrieval.store.weaviate.settings import DATA_DIR_NAMES, WeaviateSettings

if TYPE_CHECKING:
    from retrieval.store.weaviate.store import WeaviateStore


@contextlib.asynccontextmanager
async def open_weaviate(
    settings: WeaviateSettings, data_dir: Path, one_shot: bool = False
) -> AsyncIterator[WeaviateStore]:
    """The store on the Weaviate ``settings`` name (started first in embedded mode, its data
    under ``data_dir``), with its schema in place; the client closes, and a server started
    here stops (or, ``one_shot``, is left to its reaper), on exit.

    The client library is imported while the embedded server boots: a one-shot
    ``quorum search`` pays the longer of the two, not both."""
    async with contextlib.AsyncExitStack() as stack:
        endpoint = await _endpoint(settings, data_dir, one_shot, stack, _load_store)
        # Imported by _load_store while the server booted: here it only binds the name.
        from retrieval.store.weaviate.store import WeaviateStore

        client = async_client(endpoint, timeout_s=settings.timeout_s)
        yield await stack.enter_async_context(
            WeaviateStore.connect(client, endpoint.url, settings.replicas)
        )


_booting: dict[Path, tuple[EmbeddedServer, Future[Endpoint]]] = {}
"""Embedded servers ``boot`` started in this process, by data dir, until ``open_weaviate``
takes them over."""


def boot(settings: WeaviateSettings, data_dir: Path) -> None:
    """Start the embedded server ``settings`` name now, on a thread of its own, for a
    command that will open the store once it has imported and parsed what it needs:
    ``open_weaviate`` on the same data dir takes the booting server over. Nothing for a
    server reached by URL, or without a binary (``open_weaviate`` says what is wrong)."""
    if settings.mode != "embedded":
        return
    try:
        binary = find_binary(settings.binary)
    except ConfigError:
        return
    if binary is None:
        return
    server = EmbeddedServer(data_dir / DATA_DIR_NAMES[0], binary)
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
    settings: WeaviateSettings,
    data_dir: Path,
    one_shot: bool,
    stack: contextlib.AsyncExitStack,
    meanwhile: Callable[[], None] = lambda: None,
) -> Endpoint:
    """Where the store is; in embedded mode the server is started, ``meanwhile`` running on
    a thread while it boots."""
    api_key = settings.api_key.get_secret_value() if settings.api_key else None
    if settings.mode == "embedded":
        binary = find_binary(settings.binary)
        if binary is None:
            return await _client_embedded(data_dir, stack)
        booted = _booting.pop(data_dir / DATA_DIR_NAMES[0], None)
        if booted is not None:
            server, starting = booted[0], asyncio.wrap_future(booted[1])
        else:
            server = EmbeddedServer(data_dir / DATA_DIR_NAMES[0], binary)
            starting = asyncio.ensure_future(asyncio.to_thread(server.start))
        try:
            await asyncio.to_thread(meanwhile)
            endpoint = await asyncio.shield(starting)
        except BaseException:  # stopped (or the import failed) while the thread starts it
            with contextlib.suppress(Exception):
                await starting
                await asyncio.to_thread(server.stop)
            raise
        stack.push_async_callback(asyncio.to_thread, partial(server.stop, linger=one_shot))
        # If the server dies under a running bot or chat, it comes back on the same ports.
        watchdog = asyncio.create_task(server.watch(), name="quorum-weaviate-watchdog")
        stack.push_async_callback(_cancel, watchdog)
        return endpoint
    if not settings.url:
        raise ConfigError(f"QUORUM_WEAVIATE_URL is required in {settings.mode} mode.")
    if settings.mode == "cloud" and not api_key:
        raise ConfigError("QUORUM_WEAVIATE_API_KEY is required in cloud mode.")
    return endpoint_from_url(settings.url, api_key, settings.grpc_port)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _client_embedded(data_dir: Path, stack: contextlib.AsyncExitStack) -> Endpoint:
    """No weaviate-server binary and no Go: weaviate-client's embedded mode downloads the
    same pinned release on first use (a laptop with internet access)."""
    # weaviate-client's embedded mode: only without a binary
    from weaviate.embedded import EmbeddedOptions, EmbeddedV4

    opts = EmbeddedOptions(
        persistence_data_path=str(data_dir / DATA_DIR_NAMES[1]),
        version=WEAVIATE_VERSION,
        hostname="127.0.0.1",
        additional_env_vars={"DISABLE_TELEMETRY": "true", "GO_PROFILING_DISABLE": "true"},
    )
    embedded = EmbeddedV4(opts)
    await asyncio.to_thread(embedded.start)
    stack.push_async_callback(asyncio.to_thread, embedded.stop)
    return Endpoint("127.0.0.1", opts.port, "127.0.0.1", opts.grpc_port)


# The registry's line names these by string: here mypy checks that they fit, and that what
# ``open_weaviate`` yields meets the ``Store`` protocol.
_OPENER: Opener = open_weaviate
_BOOTER: Booter = boot
