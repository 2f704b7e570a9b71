"""The packaged embedding model: offline, normalised, and concurrent queries batched."""

from __future__ import annotations

import asyncio
import math
import os
from collections.abc import Sequence

from retrieval.embed import SentenceTransformerEmbedder


async def test_vectors_are_normalised_and_offline(embedder: SentenceTransformerEmbedder) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    (vec,) = await embedder.embed_documents(["The login service moved to Cognito."])
    assert len(vec) == embedder.dim == 384
    assert math.isclose(math.sqrt(sum(x * x for x in vec)), 1.0, abs_tol=1e-4)


async def test_concurrent_queries_are_batched_and_match_single_encodes(
    embedder: SentenceTransformerEmbedder,
) -> None:
    texts = [f"question number {i} about refresh tokens" for i in range(12)]
    calls: list[int] = []
    original = embedder.encode

    def counting(batch: Sequence[str]) -> list[list[float]]:
        calls.append(len(batch))
        return original(batch)

    embedder.encode = counting  # type: ignore[method-assign,assignment]
    try:
        vectors = await asyncio.gather(*(embedder.embed_query(t) for t in texts))
        again = await embedder.embed_query(texts[3].upper())  # cached (case-insensitive)
    finally:
        del embedder.encode
    assert sum(calls) == 12 and len(calls) < 12  # fewer encode calls than queries
    single = original([texts[5]])[0]
    assert max(abs(a - b) for a, b in zip(vectors[5], single, strict=True)) < 1e-4
    assert again == vectors[3]
