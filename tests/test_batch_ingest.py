"""Ingest batches across files (one encode and shared Weaviate writes for many small
files) and still reports every file on its own: a file Weaviate rejects, an unreadable
file and a duplicate id each fail alone, and every other file is searchable whole, at
every level; re-ingesting changed files together leaves none of their old units."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import SearchUnavailable
from retrieval.models import Document, Level, SearchFilters, Segment, Source
from retrieval.search.search import SearchService
from retrieval.store import Embedded, UpsertResult
from retrieval.store.weaviate import WeaviateStore
from retrieval.write import indexer
from retrieval.write.indexer import ingest


class CountingEmbedder:
    """The real embedder, counting how many encode calls ingest makes."""

    def __init__(self, real: SentenceTransformerEmbedder) -> None:
        self.real = real
        self.calls = 0

    @property
    def dim(self) -> int:
        return self.real.dim

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        return await self.real.embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.real.embed_query(text)


async def test_many_small_files_share_encodes_and_each_is_reported(
    tmp_path: Path, store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    for i in range(40):
        (tmp_path / f"note-{i:02d}.md").write_text(
            f"# Note {i}\n\nThe zephyr{i} widget ships on day {i} of the quarter.\n"
        )
    (tmp_path / "broken.md").write_bytes(b"\xff\xfe\x00\xd8 not text")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "note-07.md").write_text("# Again\n\nA second file with id note-07.\n")
    counting = CountingEmbedder(embedder)
    report = await ingest(store, counting, kb, [tmp_path])

    by_path = {Path(r.path).relative_to(tmp_path).as_posix(): r for r in report.results}
    assert len(by_path) == 42
    assert by_path["broken.md"].status == "failed"
    assert by_path["sub/note-07.md"].status == "failed"
    assert "already used" in (by_path["sub/note-07.md"].reason or "")
    assert [by_path[f"note-{i:02d}.md"].status for i in range(40)] == ["added"] * 40
    assert counting.calls <= 2  # 40 files, not 40 encodes
    search = SearchService(store, embedder)
    hits = await search.search(kb, "zephyr17 widget", k=3)
    assert hits[0].source.id == "note-17" and hits[0].segment.heading == "Note 17"
    assert len(await store.list_sources(kb)) == 40

    again = await ingest(store, counting, kb, [tmp_path])  # unchanged: skipped, no encode
    assert again.count("skipped") == 40 and counting.calls <= 2


async def test_long_files_are_written_as_they_are_encoded_not_a_group_at_a_time(
    tmp_path: Path,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    kb: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each note fills a batch by itself (as a long recording does at the real size): it is
    # encoded and handed to the writer on its own, so progress moves file by file.
    monkeypatch.setattr(indexer, "EMBED_BATCH", 1)
    for i in range(5):
        (tmp_path / f"long-{i}.md").write_text(f"# Long {i}\n\nThe okapi{i} survey notes.\n")
    counting = CountingEmbedder(embedder)
    report = await ingest(store, counting, kb, [tmp_path])
    assert report.count("added") == 5
    assert counting.calls == 5  # one encode per file, not one for the group of five


async def test_a_document_weaviate_rejects_fails_alone(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    def doc(sid: str, text: str) -> Document:
        source = Source(sid, sid.title(), "document", content_hash=sid)
        return Document(source, (Segment(sid, 0, text),))

    good = [doc("alpha", "alpha quokka notes"), doc("gamma", "gamma quokka notes")]
    vectors = await embedder.embed_documents([d.segments[0].text for d in good])
    bad = doc("beta", "beta quokka notes")
    await store.upsert(kb, good[0], [vectors[0]])  # the index now holds 384-d vectors
    items = [Embedded(bad, [[0.5, 0.5, 0.5]]), Embedded(good[1], [vectors[1]])]
    results = await store.upsert_many(kb, items)
    assert isinstance(results[0], SearchUnavailable) and "rejected" in str(results[0])
    assert isinstance(results[1], UpsertResult) and results[1].status == "added"
    listed = {i.source.id for i in await store.list_sources(kb)}
    assert listed == {"alpha", "gamma"}
    hits = await SearchService(store, embedder).search(kb, "quokka notes", k=10)
    assert {h.source.id for h in hits} == {"alpha", "gamma"}


def meeting(path: Path, word: str) -> None:
    """A ten-minute transcript (several windows: it gets topics and a summary)."""
    lines = [
        f"[00:{n // 6:02d}:{n % 6 * 10:02d}] Ana Ruiz: In part {n} the {word} plan moves "
        f"step {n} of the {word} rollout forward."
        for n in range(60)
    ]
    path.write_text("\n".join(lines) + "\n")


async def test_changed_files_written_together_keep_only_their_new_levels(
    tmp_path: Path, store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str
) -> None:
    for name in ("one", "two", "three"):
        meeting(tmp_path / f"{name}.txt", "quokka")
    first = await ingest(store, embedder, kb, [tmp_path])
    assert first.count("added") == 3
    search = SearchService(store, embedder)
    every: tuple[Level, ...] = ("turn", "topic", "summary")
    for level in every[1:]:
        only = SearchFilters(levels=(level,))
        assert await search.search(kb, "quokka rollout", only, k=5)  # written with the batch

    for name in ("one", "two", "three"):
        meeting(tmp_path / f"{name}.txt", "wombat")
    again = await ingest(store, embedder, kb, [tmp_path])
    assert again.count("updated") == 3
    records = (await store.sources_collection(kb).query.fetch_objects(limit=10)).objects
    live = sum(int(o.properties["unit_count"]) for o in records)
    total = (await store.units(kb).aggregate.over_all(total_count=True)).total_count
    assert total == live > 0  # the old ones went
    for level in every:
        hits = await search.search(kb, "quokka wombat rollout", SearchFilters(levels=(level,)), 10)
        assert hits and all("quokka" not in h.segment.text for h in hits)
