"""The retrieval core against a real Weaviate server: every reader's positions survive
into search hits, hybrid search finds rare terms and paraphrases, filters narrow,
re-ingest is idempotent, bad files are reported, knowledge bases are isolated."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from fpdf import FPDF

from retrieval.encoding.embed import SentenceTransformerEmbedder, cosine
from retrieval.errors import InvalidInput, SearchUnavailable
from retrieval.models import SearchFilters
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint, async_client
from retrieval.write.indexer import ingest

VTT = """WEBVTT

00:00:01.000 --> 00:00:06.000
<v John Park>Morning everyone, let's talk about the login service.

00:12:14.000 --> 00:12:20.500
<v John Park>The Auth0 invoice tripled because of the enterprise connection pricing.

00:12:21.000 --> 00:12:27.000
<v Priya Raman>So the bill is the main reason we are leaving?
"""

SRT = """1
00:00:02,000 --> 00:00:07,000
Marcus Lee: The pager went off twice last night.

2
00:07:45,250 --> 00:07:52,000
Marcus Lee: Refresh tokens were rejected with invalid_grant for twelve minutes.
"""

WHISPER = {
    "language": "en",
    "text": "...",
    "segments": [
        {"id": 0, "start": 0.0, "end": 5.0, "text": " Welcome to the review.", "speaker": "Sofia"},
        {
            "id": 1,
            "start": 421.3,
            "end": 430.0,
            "text": " The zorblax lambda migrates each user lazily on first login.",
            "speaker": "Dana Kim",
        },
    ],
}

TXT = """[00:00:03] Priya Raman: Quick sync on hiring.
[00:05:10] Sofia Alvarez: Customers report discomfort with the new onboarding flow.
"""

MD = """---
title: On-call handbook
url: https://handbook.example/on-call
---
# On-call

## Paging
Page the secondary after fifteen minutes without acknowledgement.

## Rollback
Flip the quibbleflag feature toggle to route logins back to the old provider.
"""

COURSE = """Course Title: Introduction to MCP
Course Link: https://learn.example/mcp
Course Instructor: Ada Okafor
Lesson 0: Welcome
Lesson Link: https://learn.example/mcp/0
This course explains the Model Context Protocol from first principles.
Lesson 1: Transports
Lesson Link: https://learn.example/mcp/1
Servers speak over stdio or streamable HTTP; stdio suits local subprocess servers.
"""


def make_pdf(path: Path, pages: list[str]) -> None:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    pdf.output(str(path))


def sidecar(path: Path, **meta: object) -> None:
    path.with_name(path.name.rsplit(".", 1)[0] + ".meta.json").write_text(json.dumps(meta))


@pytest.fixture
def archive_dir(tmp_path: Path) -> Path:
    root = tmp_path / "archive"
    root.mkdir()
    (root / "2024-01-09-kickoff.vtt").write_text(VTT)
    sidecar(
        root / "2024-01-09-kickoff.vtt",
        title="Auth kickoff",
        url="https://www.youtube.com/watch?v=abcdefghijk",
        recorded_at="2024-01-09",
        kind="video",
    )
    (root / "2024-02-27-retro.srt").write_text(SRT)
    sidecar(root / "2024-02-27-retro.srt", url="https://media.example/retro.mp4", kind="audio")
    (root / "2024-02-06-review.json").write_text(json.dumps(WHISPER))
    sidecar(root / "2024-02-06-review.json", url="https://www.loom.com/share/" + "a" * 32)
    (root / "2024-03-01-sync.txt").write_text(TXT)
    (root / "on-call.md").write_text(MD)
    (root / "intro-to-mcp.txt").write_text(COURSE)
    make_pdf(
        root / "plan.pdf",
        [
            "Summary: we leave Auth0 for Cognito in February.",
            "Costs: Cognito is cheaper at our volume.",
            "Rollback: the snarfle switch returns traffic to Auth0 within five minutes.",
        ],
    )
    sidecar(root / "plan.pdf", title="Migration plan", url="https://docs.example/plan.pdf")
    return root


@pytest.fixture
async def loaded(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str, archive_dir: Path
) -> str:
    report = await ingest(store, embedder, kb, [archive_dir])
    assert not report.failed, report.failed
    assert report.count("added") == 7
    return kb


async def test_each_reader_keeps_its_position_in_hits(search: SearchService, loaded: str) -> None:
    (hit,) = await search.search(loaded, "Auth0 invoice tripled enterprise connection", k=1)
    assert hit.source.title == "Auth kickoff"
    assert abs((hit.segment.start_s or 0) - 734) < 1  # 00:12:14
    assert hit.segment.speaker == "John Park"
    assert hit.link == "https://www.youtube.com/watch?v=abcdefghijk&t=734s"

    (hit,) = await search.search(loaded, "refresh tokens invalid_grant", k=1)
    assert abs((hit.segment.start_s or 0) - 465.25) < 1 and hit.segment.speaker == "Marcus Lee"
    assert hit.link == "https://media.example/retro.mp4#t=465"

    (hit,) = await search.search(loaded, "zorblax lambda", k=1)
    assert abs((hit.segment.start_s or 0) - 421.3) < 1 and hit.segment.speaker == "Dana Kim"
    assert hit.link == "https://www.loom.com/share/" + "a" * 32 + "?t=421"

    (hit,) = await search.search(loaded, "onboarding discomfort customers", k=1)
    assert abs((hit.segment.start_s or 0) - 310) < 1 and hit.segment.speaker == "Sofia Alvarez"

    (hit,) = await search.search(loaded, "snarfle switch", k=1)
    assert hit.segment.page == 3 and hit.link == "https://docs.example/plan.pdf#page=3"

    (hit,) = await search.search(loaded, "quibbleflag toggle", k=1)
    assert hit.segment.heading and "Rollback" in hit.segment.heading
    assert hit.source.title == "On-call handbook"

    (hit,) = await search.search(loaded, "stdio streamable HTTP transports", k=1)
    assert hit.segment.lesson == 1 and hit.segment.lesson_url == "https://learn.example/mcp/1"
    assert hit.link == "https://learn.example/mcp/1"


async def test_hybrid_finds_rare_terms_and_paraphrases(search: SearchService, loaded: str) -> None:
    hits = await search.search(loaded, "zorblax", k=3)
    assert "zorblax" in hits[0].segment.text  # keyword side: a word the model never saw
    hits = await search.search(loaded, "pain", k=3)
    assert any("discomfort" in h.segment.text for h in hits[:2])  # vector side: no shared word


async def test_filters_narrow(search: SearchService, loaded: str) -> None:
    def titles(hits: list) -> set[str]:  # type: ignore[type-arg]
        return {h.source.title for h in hits}

    everything = await search.search(loaded, "auth login", k=20)
    assert len(titles(everything)) >= 3

    by_john = await search.search(loaded, "auth login", SearchFilters(speaker="JOHN"), k=20)
    assert by_john and all("John Park" in h.segment.speakers for h in by_john)

    by_full = await search.search(loaded, "auth", SearchFilters(speaker="marcus lee"), k=20)
    assert by_full and all(h.segment.speaker == "Marcus Lee" for h in by_full)

    fuzzy = await search.search(loaded, "protocol", SearchFilters(source="MCP"), k=20)
    assert titles(fuzzy) == {"Introduction to MCP"}

    lesson = await search.search(loaded, "protocol", SearchFilters(lesson=0), k=20)
    assert lesson and all(h.segment.lesson == 0 for h in lesson)

    docs = await search.search(loaded, "auth", SearchFilters(kind="document"), k=20)
    assert docs and all(h.source.kind == "document" for h in docs)

    feb = SearchFilters(after=date(2024, 2, 1), before=date(2024, 2, 28))
    dated = await search.search(loaded, "auth tokens lambda", feb, k=20)
    assert dated and all(
        h.source.recorded_at and date(2024, 2, 1) <= h.source.recorded_at <= date(2024, 2, 28)
        for h in dated
    )

    ids = await search.search(loaded, "auth", SearchFilters(source_ids=("2024-02-27-retro",)), k=9)
    assert ids and {h.source.id for h in ids} == {"2024-02-27-retro"}

    assert await search.search(loaded, "auth", SearchFilters(source="no such title"), k=5) == []
    assert await search.search(loaded, "auth", SearchFilters(speaker="nobody"), k=5) == []


@pytest.mark.parametrize(
    ("query", "filters", "k", "message"),
    [
        ("", SearchFilters(), 5, "empty"),
        ("auth", SearchFilters(), 0, "between 1 and 100"),
        ("auth", SearchFilters(), 1000, "between 1 and 100"),
        ("auth", SearchFilters(after=date(2024, 3, 1), before=date(2024, 1, 1)), 5, "reversed"),
        ("auth", SearchFilters(lesson=-1), 5, "Lesson numbers"),
    ],
)
async def test_bad_search_values_are_rejected_clearly(
    search: SearchService, kb: str, query: str, filters: SearchFilters, k: int, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        await search.search(kb, query, filters, k)


async def test_neighbours_and_transcript(search: SearchService, loaded: str) -> None:
    archive = search.archive(loaded)
    (hit,) = await archive.search("zorblax", k=1)
    around = await archive.neighbours(hit.id, before=2, after=2)
    assert hit.id in [h.id for h in around]
    assert [h.segment.position for h in around] == sorted(h.segment.position for h in around)
    whole = await archive.transcript("2024-01-09-kickoff")
    assert whole and [h.segment.position for h in whole] == list(range(len(whole)))
    late = await archive.transcript("2024-01-09-kickoff", start_s=700)
    assert late and all((h.segment.end_s or 0) >= 700 for h in late)
    infos = await archive.sources()
    assert {i.source.title for i in infos} >= {"Auth kickoff", "Migration plan"}
    assert "John Park" in await archive.speakers()


async def test_reingest_is_idempotent_and_replaces_edits(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, search: SearchService, kb: str,
    archive_dir: Path,
) -> None:  # fmt: skip
    await ingest(store, embedder, kb, [archive_dir])
    count = await store.count(kb)
    again = await ingest(store, embedder, kb, [archive_dir])
    assert again.count("skipped") == 7 and await store.count(kb) == count

    path = archive_dir / "2024-03-01-sync.txt"
    path.write_text("[00:00:03] Priya Raman: We now talk only about the grommet budget.\n")
    edited = await ingest(store, embedder, kb, [archive_dir])
    assert edited.count("updated") == 1 and edited.count("skipped") == 6
    hits = await search.search(
        kb, "onboarding discomfort", SearchFilters(source_ids=("2024-03-01-sync",))
    )
    assert all("onboarding" not in h.segment.text for h in hits)
    assert any("grommet" in h.segment.text for h in hits)

    removed = await store.delete_source(kb, "2024-03-01-sync")
    assert removed >= 1
    assert await search.search(kb, "grommet", SearchFilters(source_ids=("2024-03-01-sync",))) == []


async def test_a_corrupt_file_is_reported_and_the_rest_indexed(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str, archive_dir: Path
) -> None:
    (archive_dir / "broken.json").write_text("{not json")
    (archive_dir / "empty.vtt").write_text("")
    (archive_dir / "garbage.pdf").write_bytes(b"%PDF-1.4 \x00\x01 not really a pdf")
    report = await ingest(store, embedder, kb, [archive_dir])
    failed = {Path(f.path).name for f in report.failed}
    assert failed == {"broken.json", "empty.vtt", "garbage.pdf"}
    assert all(f.reason for f in report.failed)
    assert report.count("added") == 7


async def test_knowledge_bases_are_isolated(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, search: SearchService, loaded: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    other = loaded + "x"
    (tmp_path / "secret.txt").write_text("Dana Kim: The vault password rotation is on Friday.\n")
    await ingest(store, embedder, other, [tmp_path / "secret.txt"])
    assert all(h.source.id != "secret" for h in await search.search(loaded, "vault password", k=20))
    assert all(h.source.id == "secret" for h in await search.search(other, "vault password", k=20))
    assert await search.search("never-created", "anything", k=5) == []


async def test_unreachable_weaviate_is_one_clear_sentence(
    embedder: SentenceTransformerEmbedder,
) -> None:
    dead = Endpoint("127.0.0.1", 9, "127.0.0.1", 10)
    with pytest.raises(SearchUnavailable, match=r"http://127\.0\.0\.1:9"):
        async with WeaviateStore.connect(async_client(dead), dead.url):
            pass


async def test_hits_say_how_close_in_meaning_they_are(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, loaded: str
) -> None:
    """A hit's similarity is the cosine between the question and the hit's own stored
    vector (it decides whether an answer is worth giving), whether the hybrid's vector half
    found the hit or only its keyword half did."""
    query = "why did we leave Auth0"
    vector = await embedder.embed_query(query)
    stored = await store.segments(loaded).query.fetch_objects(limit=100, include_vector=True)
    cosines = {str(o.uuid): cosine(vector, o.vector["default"]) for o in stored.objects}
    for alpha in (0.5, 0.0):  # alpha 0: keyword alone ranks, no vector half to explain
        hits = await store.hybrid(loaded, query, vector, None, 5, alpha)
        assert len(hits) == (5 if alpha else 3)  # alpha 0: only the texts that say a word
        for hit in hits:
            assert hit.similarity == pytest.approx(cosines[hit.id], abs=1e-4), alpha


async def test_keyword_search_alone_reads_what_hybrid_reads(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, loaded: str
) -> None:
    """``WeaviateStore.bm25`` (the benchmarks' keyword row) ranks as hybrid search's keyword half
    does: the PDF page that says "rollback" before the section headed "Rollback"."""
    for query in ("rollback", "handbook rollback"):
        vector = await embedder.embed_query(query)
        alone = await store.bm25(loaded, query, None, 10)
        keyword_half = await store.hybrid(loaded, query, vector, None, 10, alpha=0.0)
        assert alone and [h.id for h in alone] == [h.id for h in keyword_half][: len(alone)]
