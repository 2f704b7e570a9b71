"""Opening the retrieval layer: start or reach Weaviate (the embedded server this process
runs, or one by URL), connect, and hand out the store, the embedder and the search
service. Everything Weaviate-specific stays in ``retrieval/``: callers pass a
``RetrievalConfig`` of plain values and get Quorum types back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from retrieval.chunking import ChunkConfig
from retrieval.embed import EmbedBackend, LazyEmbedder
from retrieval.errors import ConfigError
from retrieval.rerank import CrossEncoderReranker
from retrieval.search import SearchService
from retrieval.store import Store
from retrieval.transcribe import Transcriber
from retrieval.weaviate_server import (
    WEAVIATE_VERSION,
    EmbeddedServer,
    Endpoint,
    async_client,
    endpoint_from_url,
    find_binary,
)

WeaviateMode = Literal["embedded", "local", "cloud"]


@dataclass(frozen=True)
class RetrievalConfig:
    """What the retrieval layer needs to start, as plain values (the bot's settings
    fill it in; ``bot.wiring.retrieval_config``)."""

    data_dir: Path
    weaviate_mode: WeaviateMode = "embedded"
    weaviate_url: str | None = None
    weaviate_grpc_port: int | None = None
    weaviate_api_key: str | None = None
    weaviate_binary: str | None = None
    weaviate_timeout_s: float = 30.0
    weaviate_replicas: int = 1  # a cluster's replication factor (see ``retrieval.schema``)
    embed_model_path: Path | None = None
    embed_batch_size: int = 64
    embed_backend: EmbedBackend = "onnx"
    embed_onnx_path: Path | None = None
    rerank_model_path: Path | None = None
    hybrid_alpha: float = 0.5
    chunking: ChunkConfig = field(default_factory=ChunkConfig)
    whisper_model: str | None = None  # a model folder or name; None: the packaged tiny.en

    def transcriber(self) -> Transcriber:
        """The Whisper transcriber for audio and video (its model loads on first use),
        keeping transcripts under ``data_dir/transcripts``."""
        return Transcriber(self.whisper_model, self.data_dir / "transcripts")


@dataclass
class Retrieval:
    """Everything the retrieval layer hands out, built once."""

    config: RetrievalConfig
    endpoint: Endpoint
    store: Store
    embedder: LazyEmbedder
    search: SearchService
    transcriber: Transcriber

    @property
    def chunking(self) -> ChunkConfig:
        """How sources are cut into windows."""
        return self.config.chunking


async def _endpoint(config: RetrievalConfig, stack: contextlib.AsyncExitStack) -> Endpoint:
    api_key = config.weaviate_api_key
    if config.weaviate_mode == "embedded":
        binary = find_binary(config.weaviate_binary)
        if binary is None:
            return await _client_embedded(config, stack)
        server = EmbeddedServer(config.data_dir / "weaviate-server", binary)
        starting = asyncio.ensure_future(asyncio.to_thread(server.start))
        try:
            endpoint = await asyncio.shield(starting)
        except asyncio.CancelledError:  # stopped while starting: the thread still starts it
            with contextlib.suppress(Exception):
                await starting
                await asyncio.to_thread(server.stop)
            raise
        stack.push_async_callback(asyncio.to_thread, server.stop)
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
        persistence_data_path=str(config.data_dir / "weaviate"),
        version=WEAVIATE_VERSION,
        hostname="127.0.0.1",
        additional_env_vars={"DISABLE_TELEMETRY": "true", "GO_PROFILING_DISABLE": "true"},
    )
    embedded = EmbeddedV4(opts)
    await asyncio.to_thread(embedded.start)
    stack.push_async_callback(asyncio.to_thread, embedded.stop)
    return Endpoint("127.0.0.1", opts.port, "127.0.0.1", opts.grpc_port)


@contextlib.asynccontextmanager
async def open_retrieval(
    config: RetrievalConfig, *, warm: bool = False
) -> AsyncIterator[Retrieval]:
    """Start or reach Weaviate, connect, and hand out the retrieval services; with
    ``warm`` the embedding model loads while Weaviate starts."""
    async with contextlib.AsyncExitStack() as stack:
        embedder = LazyEmbedder(
            config.embed_model_path,
            config.embed_batch_size,
            config.embed_backend,
            config.embed_onnx_path,
        )
        stack.push_async_callback(asyncio.to_thread, embedder.finish_loading)  # runs last
        if warm:
            embedder.warm()
        endpoint = await _endpoint(config, stack)
        client = async_client(endpoint, timeout_s=config.weaviate_timeout_s)
        store = await stack.enter_async_context(
            Store.connect(client, endpoint.url, config.weaviate_replicas)
        )
        reranker = None
        if config.rerank_model_path:
            reranker = await asyncio.to_thread(
                CrossEncoderReranker.from_path, config.rerank_model_path
            )
        search = SearchService(store, embedder, alpha=config.hybrid_alpha, reranker=reranker)
        yield Retrieval(config, endpoint, store, embedder, search, config.transcriber())
