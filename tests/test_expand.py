"""With a model: other phrasings of a hard question fused by RRF, and the optional rerank
by the fast model, on both backends (the real SDKs against their emulators) and a real
Weaviate."""

from __future__ import annotations

import pytest
import pytest_asyncio

from bot.answer.answer import AnswerConfig, QuickAnswerer
from bot.answer.expand import EXPAND_PROMPT, RERANK_PROMPT, fuse
from bot.config import load_settings
from bot.models import Question, ThreadKey
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.models import Hit, Segment, Source
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from tests.backends import FAST, Reply, Served, last_text, system
from tests.sample_archive import load_sample

THREAD = ThreadKey("console", "local", "c", "t")
HARD = "What made the invoice balloon?"  # no word and little meaning in common with the cost


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def sample_kb(store: WeaviateStore, embedder: SentenceTransformerEmbedder) -> str:
    await load_sample(store, embedder, "expand_sample")
    return "expand_sample"


async def test_hard_question_is_searched_in_other_words_and_reranked(
    sample_kb: str,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    served: Served,
) -> None:
    emu = served.emu
    archive = SearchService(store, embedder).archive(sample_kb)
    config = AnswerConfig(search_k=3, expand_queries=True, model_rerank=True)
    emu.enqueue(Reply(text="Auth0 renewal quote price jump\nenterprise SSO connection pricing"))

    def rerank(body: dict[str, object]) -> Reply:
        prompt = last_text(body)
        n = next(
            line.split("]")[0].strip("[") for line in prompt.splitlines() if "renewal quote" in line
        )
        return Reply(text=f"{n}")

    emu.enqueue(rerank)
    emu.enqueue(Reply(text="The renewal quote jumped to $9,800 a month [1]."))
    llm = served.model(timeout_s=5)
    try:
        out = await QuickAnswerer(llm, config).answer(
            Question(HARD, THREAD, "u1", sample_kb), archive
        )
    finally:
        await llm.aclose()
    expand, ranked, answer = (r.body for r in emu.requests)
    assert expand["model"] == FAST and EXPAND_PROMPT in system(expand)
    assert HARD in str(expand["messages"])
    assert ranked["model"] == FAST and RERANK_PROMPT in system(ranked)
    assert str(ranked["messages"]).count("\\n\\n[") <= 19  # at most 20 passages
    # The passage only the other phrasings found is what Claude reads, and is cited.
    assert "renewal quote" in str(answer["messages"])
    assert out.answer.citations and "Auth kickoff" in out.answer.citations[0].label
    assert out.answer.timings["expand"] > 0 and out.answer.timings["rerank"] > 0
    assert out.usage.input_tokens > 0


async def test_failed_expansion_and_rerank_keep_the_plain_results(
    sample_kb: str,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    served: Served,
) -> None:
    emu = served.emu
    archive = SearchService(store, embedder).archive(sample_kb)
    config = AnswerConfig(search_k=3, expand_queries=True, model_rerank=True)
    emu.enqueue(Reply.error(400), Reply.error(400), Reply(text="Here is what I found [1]."))
    llm = served.model(timeout_s=5)
    try:
        out = await QuickAnswerer(llm, config).answer(
            Question(HARD, THREAD, "u1", sample_kb), archive
        )
    finally:
        await llm.aclose()
    assert out.answer.kind == "answer" and out.answer.sources
    plain = await archive.search(HARD, k=3)
    assert {n.hit.id for n in out.answer.sources} >= {h.id for h in plain[:1]}


def test_rrf_puts_what_several_phrasings_find_first() -> None:
    src = Source("s", "S", "document")

    def hit(i: int) -> Hit:
        return Hit(f"h{i}", Segment("s", i, f"text {i}"), src, 0.0)

    fused = fuse([[hit(1), hit(2), hit(3)], [hit(3), hit(4)], [hit(3), hit(2)]], k=3)
    assert [h.id for h in fused] == ["h3", "h2", "h1"]


def test_the_rerank_setting_answers_to_its_new_and_its_older_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert not AnswerConfig.from_settings(load_settings()).model_rerank
    for name in ("QUORUM_MODEL_RERANK", "QUORUM_CLAUDE_RERANK"):
        with monkeypatch.context() as env:
            env.setenv(name, "true")
            assert AnswerConfig.from_settings(load_settings()).model_rerank, name
