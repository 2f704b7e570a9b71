"""``quorum serve``'s warm-up, before ``/readyz``: every knowledge base the store holds has
its first search paid (its tenant found, its stems checked, every level searched), and
one whole extractive answer runs without being stored, so the first user's question
pays what any later one pays."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters import lifecycle
from adapters.lifecycle import _warm_up, served_kbs
from bot.config import load_settings
from bot.models import ThreadKey
from bot.wiring import open_core, retrieval_config
from retrieval.encoding.embed import LazyEmbedder, SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.service import Retrieval
from retrieval.store.weaviate import WeaviateStore
from tests.sample_archive import load_sample


async def test_warm_up_pays_every_knowledge_base_s_first_search_and_stores_nothing(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    kb: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The session's server holds every test's knowledge bases: more than serve warms.
    monkeypatch.setattr(lifecycle, "WARM_KBS", 10_000)
    await load_sample(store, embedder, kb)
    # The default knowledge base is another, empty one: the API serves ``kb`` by token.
    settings = load_settings(data_dir=tmp_path / "data", default_kb=f"{kb}x")
    settings.data_dir.mkdir(parents=True)
    lazy = LazyEmbedder(None, settings.embed_batch_size)
    lazy._model = embedder  # the session's model, already loaded
    config = retrieval_config(settings)
    retrieval = Retrieval(config, store, lazy, SearchService(store, lazy), config.transcriber())
    store._stems.pop(kb, None)  # as a fresh process knows it
    async with open_core(settings, retrieval=retrieval) as services:
        assert kb in await served_kbs(services)
        await _warm_up(services)
        # The first question would have checked this knowledge base's stems: done.
        assert store._stems[kb][0] is True
        # The warm-up's answer is nowhere in the session store.
        warm_thread = ThreadKey("warm-up", "-", "-", "-")
        assert await services.sessions.history(warm_thread) == []
        assert await services.sessions.recent_queries() == []


async def test_the_warm_answer_runs_the_whole_quick_path_extractively(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    await load_sample(store, embedder, kb)
    settings = load_settings(data_dir=tmp_path / "data")
    settings.data_dir.mkdir(parents=True)
    lazy = LazyEmbedder(None, settings.embed_batch_size)
    lazy._model = embedder
    config = retrieval_config(settings)
    retrieval = Retrieval(config, store, lazy, SearchService(store, lazy), config.transcriber())
    async with open_core(settings, retrieval=retrieval) as services:
        answer = await services.engine.warm(kb, "What did John say about the hosted UI?")
        assert answer.kind == "extractive"
        assert answer.citations and all(c.link for c in answer.citations)
        assert answer.exchange_id is None
