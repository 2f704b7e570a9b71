"""The ``Store`` contract, run on each store ``retrieval/store/registry.py`` lists (Weaviate,
the real server, and the in-memory one), opened as ``quorum`` opens it. What a caller of
the protocol relies on: a source replaced whole, listings newest first, hybrid search by
words and by meaning within filters, ordered reads of each level, deletes, an unknown
knowledge base empty and a bad name refused."""

from __future__ import annotations

import asyncio
import inspect
import os
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest
import pytest_asyncio

from bot.config import load_settings
from bot.wiring import open_retrieval
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import ConfigError, InvalidInput, SearchUnavailable
from retrieval.models import Document, Hit, Level, SearchFilters, Segment, Source
from retrieval.search.route import Route, best, fuse
from retrieval.search.search import SearchService
from retrieval.store import Embedded, Store, StoredSource, UpsertResult, registry
from retrieval.store.memory import MemoryStore
from retrieval.store.weaviate import WeaviateSettings, WeaviateStore
from retrieval.store.weaviate.schema import segment_properties, segment_uuid
from retrieval.store.weaviate.server import Endpoint

STANDUP = Source(
    "standup",
    "Platform standup",
    "video",
    url="https://www.youtube.com/watch?v=s1",
    recorded_at=date(2024, 3, 4),
    speakers=("Priya Raman", "Marcus Lee"),
    content_hash="h1",
    path="/in/standup.vtt",
)
NOTES = Source("notes", "Billing notes", "document", recorded_at=date(2024, 1, 2))
TEXTS = [
    "Priya: the Postgres failover drill is on Thursday.",
    "Marcus: the pager woke me twice, refresh tokens were rejected with invalid_grant.",
    "Priya: the cache warmup takes eleven minutes after a deploy.",
]


def standup(texts: list[str], content_hash: str = "h1") -> Document:
    segs = tuple(
        Segment(
            "standup",
            n,
            text,
            start_s=60.0 * n,
            end_s=60.0 * n + 50,
            speakers=("Priya Raman",) if text.startswith("Priya") else ("Marcus Lee",),
        )
        for n, text in enumerate(texts)
    )
    summary = Segment("standup", 0, "Topics: failover drill, pager, cache warmup", level="summary")
    source = replace(STANDUP, content_hash=content_hash)
    return Document(source, segs, (summary,))


NOTES_DOC = Document(
    NOTES, (Segment("notes", 0, "The invoice tripled: pricing per seat.", page=2),)
)


def reach(weaviate: Endpoint) -> dict[str, object]:
    """Where the tests' stores are, as ``load_settings`` overrides under each store's prefix:
    Weaviate is the session's server. A store that runs elsewhere adds its own here."""
    return {
        "weaviate_mode": "local",
        "weaviate_url": weaviate.url,
        "weaviate_grpc_port": weaviate.grpc_port,
    }


@pytest_asyncio.fixture(scope="module", params=registry.names())
async def any_store(
    request: pytest.FixtureRequest,
    weaviate_endpoint: Endpoint,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Store]:
    """Each registered store in turn, chosen by ``QUORUM_STORE`` and opened through the
    registry as ``quorum`` opens it (each test writes a knowledge base of its own)."""
    data = tmp_path_factory.mktemp(request.param)
    with pytest.MonkeyPatch.context() as env:  # the developer's settings stay out
        env.chdir(data)
        for name in [n for n in os.environ if n.startswith("QUORUM_")]:
            env.delenv(name)
        settings = load_settings(store=request.param, **reach(weaviate_endpoint))
        own = settings.store_settings()
    async with registry.kind(request.param).open(own, data) as store:
        yield store


async def test_a_store_offers_every_method_of_the_protocol(any_store: Store) -> None:
    """Each store has each of ``Store``'s methods with the same parameters (names, kinds
    and defaults), so a caller written against the protocol runs on any of them."""
    differ = []
    for name in sorted(n for n, _ in inspect.getmembers(Store, inspect.isfunction)):
        if name.startswith("_"):
            continue
        want = inspect.signature(getattr(Store, name))
        have = getattr(type(any_store), name, None)
        shape = [(p.name, p.kind, p.default) for p in want.parameters.values()]
        got = inspect.signature(have) if have else None
        if got is None or shape != [(p.name, p.kind, p.default) for p in got.parameters.values()]:
            differ.append(f"{name}: {got} is not {want}")
    assert differ == []


async def write(
    store: Store, embedder: SentenceTransformerEmbedder, kb: str, *docs: Document
) -> list[UpsertResult]:
    items = [
        Embedded(
            doc,
            await embedder.embed_documents([s.text for s in doc.segments]),
            await embedder.embed_documents([s.text for s in doc.levels]),
        )
        for doc in docs
    ]
    results = await store.upsert_many(kb, items)
    return [r for r in results if isinstance(r, UpsertResult)]


async def test_a_source_is_replaced_whole(
    any_store: Store, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    first = await write(any_store, embedder, kb, standup(TEXTS))
    [before] = await any_store.list_sources(kb)
    again = await write(any_store, embedder, kb, standup(TEXTS[:2], "h2"))

    assert [(r.status, r.segments) for r in first] == [("added", 3)]
    assert [(r.status, r.segments, r.removed) for r in again] == [("updated", 2, 4)]
    [info] = await any_store.list_sources(kb)
    # When each version was written (retention's date for a source the audit never saw).
    assert before.indexed_at and info.indexed_at and before.indexed_at < info.indexed_at
    assert abs(info.indexed_at - time.time()) < 60
    assert (info.source.title, info.source.speakers, info.segments) == (
        "Platform standup",
        ("Priya Raman", "Marcus Lee"),
        2,
    )
    stored = await any_store.stored_sources(kb, ["standup", "missing"])
    assert {k: (v.content_hash, v.path) for k, v in stored.items()} == {
        "standup": ("h2", "/in/standup.vtt")
    }
    read = await any_store.fetch_ordered(kb, "standup")
    assert [h.segment.text for h in read] == TEXTS[:2]
    assert await any_store.count(kb) == 2 and await any_store.clean_orphans(kb, 0) == 0


async def test_hybrid_search_finds_words_and_meaning_within_filters(
    any_store: Store, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    await write(any_store, embedder, kb, NOTES_DOC, standup(TEXTS))
    assert [i.source.id for i in await any_store.list_sources(kb)] == ["standup", "notes"]

    async def ask(
        query: str, filters: SearchFilters | None = None, level: Level = "window"
    ) -> list[Hit]:
        vector = await embedder.embed_query(query)
        return await any_store.hybrid(kb, query, vector, filters, 3, 0.5, level)

    rare = await ask("invalid_grant")
    assert rare[0].segment.text == TEXTS[1]
    assert rare[0].link == "https://www.youtube.com/watch?v=s1&t=60s"
    meaning = await ask("how long does the cache take to warm up after shipping")
    assert meaning[0].segment.position == 2 and meaning[0].similarity is not None
    assert await any_store.get(kb, meaning[0].id) == replace(meaning[0], score=0.0, similarity=None)
    by_priya = await ask("pager tokens", SearchFilters(speaker="priya"))
    assert {h.segment.speakers for h in by_priya} == {("Priya Raman",)}
    before = await ask("invoice pricing", SearchFilters(before=date(2024, 2, 1)))
    assert [h.source.id for h in before] == ["notes"]
    summary = await ask("what was discussed", level="summary")
    assert [h.segment.text for h in summary] == ["Topics: failover drill, pager, cache warmup"]
    with pytest.raises(ValueError):
        await ask("x", SearchFilters(source="standup"))


async def test_ordered_reads_narrow_by_position_and_time(
    any_store: Store, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    await write(any_store, embedder, kb, standup(TEXTS))

    at = await any_store.fetch_ordered(kb, "standup", positions=(1, 2))
    spans = await any_store.fetch_ordered(kb, "standup", start_s=100.0, end_s=125.0)
    page = await any_store.fetch_ordered(kb, "standup", offset=1, limit=1)
    summary = await any_store.fetch_ordered(kb, "standup", level="summary")

    assert [h.segment.position for h in at] == [1, 2]
    assert [h.segment.position for h in spans] == [1, 2]  # 60-110 and 120-170 overlap it
    assert [h.segment.position for h in page] == [1]
    assert [h.segment.level for h in summary] == ["summary"]


async def test_a_deleted_source_is_gone_and_others_stay(
    any_store: Store, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    await write(any_store, embedder, kb, NOTES_DOC, standup(TEXTS))

    assert await any_store.delete_source(kb, "standup") == 3
    assert [i.source.id for i in await any_store.list_sources(kb)] == ["notes"]
    assert await any_store.fetch_ordered(kb, "standup") == []
    assert await any_store.stored_sources(kb, ["standup"]) == {}
    vector = await embedder.embed_query("pager")
    hits = await any_store.hybrid(kb, "pager", vector, None, 5, 0.5)
    assert {h.source.id for h in hits} == {"notes"}


async def test_a_source_s_path_is_set_in_place(
    any_store: Store, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    await write(any_store, embedder, kb, standup(TEXTS))
    [before] = await any_store.list_sources(kb)
    assert await any_store.set_path(kb, "standup", "s3://calls/in/standup.vtt")
    assert not await any_store.set_path(kb, "missing", "s3://calls/in/missing.vtt")
    [info] = await any_store.list_sources(kb)
    assert info.source.path == "s3://calls/in/standup.vtt"
    assert (info.indexed_at, info.segments) == (before.indexed_at, before.segments)  # not rewritten
    stored = await any_store.stored_sources(kb, ["standup"])
    assert (stored["standup"].path, stored["standup"].content_hash) == (
        "s3://calls/in/standup.vtt",
        before.source.content_hash,
    )
    assert [h.segment.text for h in await any_store.fetch_ordered(kb, "standup")] == TEXTS


async def test_an_unknown_knowledge_base_is_empty_and_a_bad_name_refused(
    any_store: Store,
) -> None:
    unknown = f"t{uuid.uuid4().hex[:12]}"
    assert await any_store.list_sources(unknown) == []
    assert await any_store.fetch_ordered(unknown, "standup") == []
    assert await any_store.hybrid(unknown, "x", [0.0] * 384, None, 3, 0.5) == []
    with pytest.raises(InvalidInput):
        await any_store.list_sources("no spaces allowed")
    assert await any_store.ready()
    info = await any_store.server_info()
    assert info.url and info.version


async def test_a_store_that_is_down_says_so() -> None:
    down = MemoryStore(down=True)
    assert not await down.ready()
    with pytest.raises(SearchUnavailable):
        await down.list_sources("kb")


async def test_a_reader_during_a_write_sees_the_old_source_and_a_dead_write_leaves_orphans(
    embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    """Generations in memory, as ``tests/test_crash_consistency.py`` shows them in Weaviate:
    between a write's units and its flip a reader still sees the old source whole; a write
    that dies there leaves only invisible orphans, which ``clean_orphans`` removes."""
    store = MemoryStore()
    await write(store, embedder, kb, standup(TEXTS))
    doc = standup(TEXTS[:2], "h2")
    item = Embedded(doc, await embedder.embed_documents(TEXTS[:2]), [[0.0] * 384])

    writing = asyncio.create_task(store.upsert_many(kb, [item]))
    await asyncio.sleep(0)  # the write has put its units and not yet flipped
    assert [h.segment.text for h in await store.fetch_ordered(kb, "standup")] == TEXTS
    assert await store.count(kb) == 5  # its two windows are there, not live
    writing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await writing

    assert [i.segments for i in await store.list_sources(kb)] == [3]
    assert await store.stored_sources(kb, ["standup"]) == {
        "standup": StoredSource("h1", "/in/standup.vtt")
    }
    assert await store.clean_orphans(kb, min_age_s=0) == 3  # two windows, one summary
    assert await store.count(kb) == 3


async def test_a_fused_routes_levels_asked_together_find_what_each_level_finds_alone(
    any_store: Store, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    """``hybrid_levels`` (one round of requests for a fused route) returns, level by level,
    exactly what ``hybrid`` returns for each: same hits, order, text, scores, similarity."""
    await write(any_store, embedder, kb, NOTES_DOC, standup(TEXTS))
    query = "what did Priya say about the pager"
    vector = await embedder.embed_query(query)
    plan: Route = (("window", 1.0), ("summary", 0.5), ("turn", 0.7))
    together = await any_store.hybrid_levels(kb, query, vector, None, 2, 0.5, plan)
    alone = [await any_store.hybrid(kb, query, vector, None, 2, 0.5, lv) for lv, _ in plan]

    assert together == alone
    assert [len(run) for run in together] == [2, 1, 0]  # no turns were written
    assert together[1][0].segment.text == "Topics: failover drill, pager, cache warmup"
    assert all(h.similarity is not None for run in together for h in run)
    by_notes = await any_store.hybrid_levels(
        kb, query, vector, SearchFilters(source_ids=("notes",)), 2, 0.5, plan
    )
    assert [[h.source.id for h in run] for run in by_notes] == [["notes"], [], []]
    assert await any_store.hybrid_levels(f"{kb}x", query, vector, None, 2, 0.5, plan) == [
        [],
        [],
        [],
    ]


async def test_levels_asked_together_skip_a_dead_writes_orphans_and_still_fill_k(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    """Units a crashed write left behind (another generation than the source's live one)
    match the query best, yet never come back, and each level still gets its k live hits."""
    await write(store, embedder, kb, standup(TEXTS))
    orphan = "Marcus: the pager rejected refresh tokens with invalid_grant, the pager again."
    vector = await embedder.embed_query(orphan)
    for n in range(3):
        seg = Segment("standup", 10 + n, orphan, start_s=600.0 + n, end_s=601.0 + n)
        await store.segments(kb).data.insert(
            properties={**segment_properties(STANDUP, seg), "generation": 1},
            uuid=segment_uuid("standup", 10 + n, 1),
            vector={"default": vector},
        )
    query = "who said the pager rejected refresh tokens with invalid_grant"

    windows, summaries = await store.hybrid_levels(
        kb, query, vector, None, 2, 0.5, (("window", 1.0), ("summary", 1.0)), read=3
    )

    assert len(windows) == 2 and orphan not in [h.segment.text for h in windows]
    assert windows[0].segment.text == TEXTS[1]
    assert [h.segment.level for h in summaries] == ["summary"]


async def test_levels_read_only_as_many_as_the_fusion_can_use_and_fuse_as_all_of_them(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    """Asked to read 3, the store reads the 3 hits the weighted fusion ranks first (each
    level's list a prefix of its own), and fusing them gives the first hits that fusing
    every candidate gives."""
    await write(store, embedder, kb, NOTES_DOC, standup(TEXTS))
    query = "what was the standup about"
    vector = await embedder.embed_query(query)
    plan: Route = (("summary", 1.0), ("window", 0.5))
    every = await store.hybrid_levels(kb, query, vector, None, 4, 0.5, plan)
    some = await store.hybrid_levels(kb, query, vector, None, 4, 0.5, plan, read=3)

    assert [len(run) for run in every] == [1, 4]
    assert sum(len(run) for run in some) == 3
    assert all(run == full[: len(run)] for run, full in zip(some, every, strict=True))
    weighted = [(w, run) for (_, w), run in zip(plan, every, strict=True)]
    assert fuse([(w, run) for (_, w), run in zip(plan, some, strict=True)], 3) == fuse(weighted, 3)


class ReadsWhatItIsTold(MemoryStore):
    """The memory store, reading for a fused route only the hits ``route.best`` names (as
    the Weaviate store does), and noting what each search asked to read."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[int | None] = []

    async def hybrid_levels(
        self,
        kb: str,
        query: str,
        vector: Sequence[float],
        filters: SearchFilters | None,
        k: int,
        alpha: float,
        plan: Sequence[tuple[Level, float]],
        read: int | None = None,
    ) -> list[list[Hit]]:
        self.reads.append(read)
        runs = await super().hybrid_levels(kb, query, vector, filters, k, alpha, plan)
        if read is None:
            return runs
        ids = [(w, [h.id for h in run]) for (_, w), run in zip(plan, runs, strict=True)]
        wanted = best(ids, read)
        return [[h for h in run if h.id in wanted] for run in runs]


async def test_a_fused_search_reads_every_candidate_when_the_best_ones_repeat_each_other(
    embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    """A topic outranks the seven windows it holds: of the six hits read first, five only
    repeat it, so the search reads every candidate and still answers with two hits."""
    store = ReadsWhatItIsTold()
    windows = tuple(
        Segment("standup", n, f"rollback plan step {n}", start_s=10.0 * n, end_s=10.0 * n + 9)
        for n in range(7)
    )
    topic = Segment("standup", 0, "the rollback plan", start_s=0.0, end_s=100.0, level="topic")
    other = Document(NOTES, (Segment("notes", 0, "Lunch: the rollback plan for pizza."),))
    await write(store, embedder, kb, Document(STANDUP, windows, (topic,)), other)
    search = SearchService(store, embedder)

    hits = await search.search(kb, "rollback plan", SearchFilters(levels=("topic", "window")), 2)

    assert [(h.source.id, h.segment.level) for h in hits] == [
        ("standup", "topic"),
        ("notes", "window"),
    ]
    assert store.reads == [6, None]


def test_the_store_is_chosen_by_name_and_its_settings_fail_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``QUORUM_STORE`` names a registered store (else one sentence naming the variable);
    the chosen store's own variables keep their names and fail at start, named."""
    assert isinstance(load_settings().store_settings(), WeaviateSettings)
    monkeypatch.setenv("QUORUM_STORE", "redis")
    with pytest.raises(ConfigError, match="QUORUM_STORE"):
        load_settings()
    monkeypatch.setenv("QUORUM_STORE", "weaviate")
    monkeypatch.setenv("QUORUM_WEAVIATE_REPLICAS", "0")
    with pytest.raises(ConfigError, match="QUORUM_WEAVIATE_REPLICAS"):
        load_settings()
    monkeypatch.setenv("QUORUM_WEAVIATE_REPLICAS", "3")
    monkeypatch.setenv("QUORUM_WEAVIATE_URL", "http://weaviate-0:8080")
    own = load_settings().store_settings()
    assert isinstance(own, WeaviateSettings) and (own.replicas, own.url) == (
        3,
        "http://weaviate-0:8080",
    )
    assert load_settings(weaviate_mode="cloud").store_settings().model_dump()["mode"] == "cloud"


async def test_the_retrieval_layer_opens_the_store_settings_name(
    embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    """``retrieval/service.py`` opens whichever store ``QUORUM_STORE`` names: with
    ``memory`` a search finds what was written, and no Weaviate starts or keeps files."""
    settings = load_settings(store="memory", data_dir=tmp_path)
    async with open_retrieval(settings) as r:
        await write(r.store, embedder, kb, NOTES_DOC)
        [hit] = await r.search.search(kb, "why did the invoice triple", k=1)
        info = await r.store.server_info()
    assert hit.segment.text == "The invoice tripled: pricing per seat." and info.url == "memory:"
    kept = await asyncio.to_thread(lambda: sorted(p.name for p in tmp_path.iterdir()))
    assert not [name for name in kept if name.startswith("weaviate")]
