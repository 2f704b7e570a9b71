"""The composition root: builds Weaviate, the embedder, the search service, the session
store, Claude and the engine from settings, inside one AsyncExitStack.

Nothing else in Quorum constructs a client; every command and adapter receives these.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.align import SentenceVectors
from bot.config import Settings
from bot.engine import Engine, ResearchHook
from bot.llm import ClaudeLLM
from bot.router import ResearchRouter
from bot.sessions import SessionStore
from retrieval.chunking import ChunkConfig
from retrieval.embed import SentenceTransformerEmbedder
from retrieval.errors import ConfigError
from retrieval.rerank import CrossEncoderReranker
from retrieval.search import SearchService
from retrieval.store import Store
from retrieval.weaviate_server import (
    WEAVIATE_VERSION,
    EmbeddedServer,
    Endpoint,
    async_client,
    endpoint_from_url,
    find_binary,
)


class LazyEmbedder:
    """Loads the model on first use, so commands that never embed (``sources``,
    ``remove``) start at once; ``warm()`` starts loading early, alongside Weaviate.

    Loading runs on a daemon thread: a command that fails early (Weaviate unreachable)
    exits at once instead of waiting for a model it will never use."""

    def __init__(self, path: Path | None, batch_size: int) -> None:
        self._path = path
        self._batch_size = batch_size
        self._model: SentenceTransformerEmbedder | None = None
        self._loading: asyncio.Future[SentenceTransformerEmbedder] | None = None

    def warm(self) -> None:
        """Start loading the model in the background (idempotent)."""
        if self._loading is not None:
            return
        loop = asyncio.get_running_loop()
        future: asyncio.Future[SentenceTransformerEmbedder] = loop.create_future()

        def settle(model: SentenceTransformerEmbedder | None, exc: BaseException | None) -> None:
            if future.done():
                return
            if exc is not None:
                future.set_exception(exc)
            elif model is not None:
                future.set_result(model)

        def work() -> None:
            try:
                model = SentenceTransformerEmbedder.from_path(self._path, self._batch_size)
            except BaseException as exc:  # delivered to whoever awaits the model
                with contextlib.suppress(RuntimeError):  # the loop may be gone
                    loop.call_soon_threadsafe(settle, None, exc)
                return
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, model, None)

        threading.Thread(target=work, name="quorum-model-load", daemon=True).start()
        self._loading = future

    async def get(self) -> SentenceTransformerEmbedder:
        """The loaded embedder."""
        if self._model is None:
            self.warm()
            assert self._loading is not None
            self._model = await asyncio.shield(self._loading)
        return self._model

    @property
    def dim(self) -> int:
        """Vector length (loads nothing: MiniLM's is 384 until the model says otherwise)."""
        return self._model.dim if self._model else 384

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text."""
        return await (await self.get()).embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        """A query's vector (cached)."""
        return await (await self.get()).embed_query(text)


@dataclass
class Retrieval:
    """Everything the retrieval layer needs, built once."""

    settings: Settings
    endpoint: Endpoint
    store: Store
    embedder: LazyEmbedder
    search: SearchService

    @property
    def chunking(self) -> ChunkConfig:
        """Chunk sizes from settings."""
        s = self.settings
        return ChunkConfig(
            max_seconds=s.chunk_seconds,
            overlap_seconds=s.chunk_overlap_seconds,
            max_chars=s.chunk_chars,
            overlap_chars=s.chunk_overlap_chars,
        )


async def _endpoint(settings: Settings, stack: contextlib.AsyncExitStack) -> Endpoint:
    api_key = settings.weaviate_api_key.get_secret_value() if settings.weaviate_api_key else None
    if settings.weaviate_mode == "embedded":
        binary = find_binary(settings.weaviate_binary)
        if binary is None:
            return await _client_embedded(settings, stack)
        server = EmbeddedServer(settings.data_dir / "weaviate-server", binary)
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
    if not settings.weaviate_url:
        raise ConfigError(f"QUORUM_WEAVIATE_URL is required in {settings.weaviate_mode} mode.")
    if settings.weaviate_mode == "cloud" and not api_key:
        raise ConfigError("QUORUM_WEAVIATE_API_KEY is required in cloud mode.")
    return endpoint_from_url(settings.weaviate_url, api_key, settings.weaviate_grpc_port)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def _client_embedded(settings: Settings, stack: contextlib.AsyncExitStack) -> Endpoint:
    """No weaviate-server binary and no Go: weaviate-client's embedded mode downloads the
    same pinned release on first use (a laptop with internet access)."""
    from weaviate.embedded import EmbeddedOptions, EmbeddedV4

    opts = EmbeddedOptions(
        persistence_data_path=str(settings.data_dir / "weaviate"),
        version=WEAVIATE_VERSION,
        hostname="127.0.0.1",
        additional_env_vars={"DISABLE_TELEMETRY": "true", "GO_PROFILING_DISABLE": "true"},
    )
    embedded = EmbeddedV4(opts)
    await asyncio.to_thread(embedded.start)
    stack.push_async_callback(asyncio.to_thread, embedded.stop)
    return Endpoint("127.0.0.1", opts.port, "127.0.0.1", opts.grpc_port)


@contextlib.asynccontextmanager
async def open_retrieval(settings: Settings, *, warm: bool = False) -> AsyncIterator[Retrieval]:
    """Start or reach Weaviate, connect, and hand out the retrieval services; with
    ``warm`` the embedding model loads while Weaviate starts."""
    async with contextlib.AsyncExitStack() as stack:
        embedder = LazyEmbedder(settings.embed_model_path, settings.embed_batch_size)
        if warm:
            embedder.warm()
        endpoint = await _endpoint(settings, stack)
        client = async_client(endpoint, timeout_s=settings.weaviate_timeout_s)
        store = await stack.enter_async_context(Store.connect(client, endpoint.url))
        reranker = None
        if settings.rerank_model_path:
            reranker = await asyncio.to_thread(
                CrossEncoderReranker.from_path, settings.rerank_model_path
            )
        search = SearchService(store, embedder, alpha=settings.hybrid_alpha, reranker=reranker)
        yield Retrieval(settings, endpoint, store, embedder, search)


@dataclass
class CoreServices:
    """The running core: the engine adapters call, and the parts it was built from."""

    settings: Settings
    retrieval: Retrieval
    sessions: SessionStore
    llm: ClaudeLLM | None
    engine: Engine


@contextlib.asynccontextmanager
async def open_core(
    settings: Settings,
    *,
    retrieval: Retrieval | None = None,
    research: ResearchHook | None = None,
) -> AsyncIterator[CoreServices]:
    """Retrieval (or the one given, left open), the session store, Claude (None without an
    API key: answers are then extractive), the research router (quick or deep per question)
    and the engine, closed in reverse on exit."""
    async with contextlib.AsyncExitStack() as stack:
        if retrieval is None:
            retrieval = await stack.enter_async_context(open_retrieval(settings, warm=True))
        sessions = await stack.enter_async_context(SessionStore.open(settings.sessions_path))
        llm = ClaudeLLM.from_settings(settings)
        if llm is not None:
            stack.push_async_callback(llm.aclose)
        vectors = SentenceVectors(retrieval.embedder)  # shared: quick answers warm it
        engine = Engine.from_settings(
            settings,
            archives=retrieval.search.archive,
            sessions=sessions,
            llm=llm,
            research=research or ResearchRouter.from_settings(settings, llm, vectors),
            embedder=vectors,
        )
        yield CoreServices(settings, retrieval, sessions, llm, engine)
