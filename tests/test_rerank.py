"""The optional reranker seam: a reranker reorders hybrid hits; a bad model path is a
clear configuration error (no cross-encoder ships in a package, so none is loaded here)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.encoding.rerank import load_cross_encoder
from retrieval.errors import ConfigError
from retrieval.models import Document, Hit, Segment, Source
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore


class PreferWord:
    """A stand-in cross-encoder: passages containing a word win."""

    def __init__(self, word: str) -> None:
        self.word = word
        self.seen: list[int] = []

    async def rerank(self, query: str, hits: list[Hit], k: int) -> list[Hit]:
        self.seen.append(len(hits))
        ranked = sorted(hits, key=lambda h: self.word not in h.segment.text)
        return [replace(h, score=1.0 if self.word in h.segment.text else 0.0) for h in ranked[:k]]


async def test_reranker_reorders_and_sees_more_candidates(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    src = Source(id="s", title="S", kind="document", content_hash="x")
    texts = [f"The deployment checklist item {i} covers database backups." for i in range(9)]
    texts.append("The deployment checklist also mentions kumquat rollouts.")
    segs = tuple(Segment("s", i, t) for i, t in enumerate(texts))
    await store.upsert(kb, Document(src, segs), await embedder.embed_documents(texts))
    reranker = PreferWord("kumquat")
    service = SearchService(store, embedder, reranker=reranker, rerank_candidates=10)
    hits = await service.search(kb, "database backups checklist", k=3)
    assert reranker.seen == [10]  # it was given the wider candidate pool
    assert "kumquat" in hits[0].segment.text and len(hits) == 3


def test_missing_model_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="QUORUM_RERANK_MODEL_PATH"):
        load_cross_encoder(tmp_path)
