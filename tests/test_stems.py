"""Keyword search matches every form of a word (English stems, ``retrieval.search.stems``) against
a real Weaviate server: a question that says "migrating" finds the meeting that said
"migration", stems never show in anything displayed, and a knowledge base indexed before
stems searches as it did."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import retrieval.write.levels
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.models import LEVELS
from retrieval.search.search import SearchService
from retrieval.search.stems import MARK, stemmed_query
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.indexer import ingest

# Five minutes of a meeting (several windows, so it also gets topics and a summary). No
# cue says "migrating" or "rollbacks"; one says "migration", one says "rollback".
CUES = [
    ("Ana Silva", "Morning all, the agenda today is the quarterly hiring plan."),
    ("Ben Okoye", "We opened four positions and two offers went out last Friday."),
    ("Ana Silva", "The zephyrine migration finished on Tuesday without any downtime."),
    ("Ben Okoye", "Good. The budget review for the design team moves to next month."),
    ("Ana Silva", "For the release, one rollback took eleven minutes because of caching."),
    ("Ben Okoye", "Next week we will review the office seating chart and the parking."),
    ("Ana Silva", "Lunch on Thursday is catered, please answer the survey by noon."),
    ("Ben Okoye", "That is everything on my list, thanks everyone for coming today."),
]
STEM = re.compile(rf"\b{MARK}[a-z]+\b")


def vtt() -> str:
    def at(s: int) -> str:
        return f"00:{s // 60:02d}:{s % 60:02d}.000"

    lines = ["WEBVTT", ""]
    for n, (speaker, text) in enumerate(CUES):
        lines += [f"{at(n * 40)} --> {at(n * 40 + 30)}", f"<v {speaker}>{text}", ""]
    return "\n".join(lines)


@pytest.fixture
def meeting(tmp_path: Path) -> Path:
    path = tmp_path / "2025-03-04-weekly.vtt"
    path.write_text(vtt())
    return path


@pytest.fixture
def keyword(store: WeaviateStore, embedder: SentenceTransformerEmbedder) -> SearchService:
    """The search service with the keyword half alone deciding (alpha 0): the vector half
    would find "migration" for "migrating" by meaning, stems or not."""
    return SearchService(store, embedder, alpha=0.0)


async def test_one_form_of_a_word_finds_another(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, keyword: SearchService, kb: str,
    meeting: Path,
) -> None:  # fmt: skip
    report = await ingest(store, embedder, kb, [meeting])
    assert not report.failed
    for question, asked, said in (
        ("who was migrating our service", "migrating", "zephyrine migration"),
        ("how long do rollbacks take", "rollbacks", "one rollback took eleven minutes"),
    ):
        hits = await keyword.search(kb, question, k=3)
        assert hits and said in hits[0].segment.text, (question, [h.segment.text for h in hits])
        assert asked not in hits[0].segment.text.lower()

    # Nothing displayed carries a stem: hit texts, titles and headings at every level,
    # the summary and its topic titles.
    shown: list[str] = []
    for level in LEVELS:
        for hit in await store.fetch_ordered(kb, "2025-03-04-weekly", level=level):
            seg = hit.segment
            shown += [seg.text, hit.source.title, seg.heading or "", seg.lesson_title or ""]
    summary = await keyword.archive(kb).summary("2025-03-04-weekly")
    shown.append(summary.segment.text)
    hits = await keyword.search(kb, "migrating rollbacks zephyrine", k=10)
    shown += [h.segment.text for h in hits]
    assert "zephyrine migration" in "\n".join(shown)
    assert not [s for s in shown if STEM.search(s)]


async def test_a_word_said_as_asked_counts_once_like_any_other_form(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, keyword: SearchService, kb: str,
    meeting: Path,
) -> None:  # fmt: skip
    """A question's word matches a unit once, in whatever form it was said: asked as well
    as its stem, a word said exactly as asked counted twice ("review", said in two cues)
    and outranked the rarer word the question is about ("migrating")."""
    await ingest(store, embedder, kb, [meeting])
    for question, said in (
        ("review migrating", "zephyrine migration"),
        ("today migrating", "zephyrine migration"),
        ("the review of rollbacks", "one rollback took eleven minutes"),
    ):
        hits = await keyword.search(kb, question, k=3)
        assert hits and said in hits[0].segment.text, (question, [h.segment.text for h in hits])
    # Words without a stem still count: numbers and names with digits, as written.
    assert stemmed_query("Is IL-6 raised in 2024 by the migrations?") == "0il 6 0rais 2024 0migrat"


async def test_a_knowledge_base_indexed_before_stems_searches_as_it_did(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, keyword: SearchService, kb: str,
    meeting: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    with monkeypatch.context() as m:
        m.setattr(retrieval.write.levels, "stemmed", lambda text: "")  # what older ingests wrote
        await ingest(store, embedder, kb, [meeting])
    hits = await keyword.search(kb, "zephyrine migration", k=3)
    assert "zephyrine migration" in hits[0].segment.text
    # Without stored stems "migrating" matches only as it always did: by its exact word.
    hits = await keyword.search(kb, "migrating", k=3)
    assert hits == []


async def test_a_speakers_name_is_asked_as_a_stem_and_found(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, keyword: SearchService, kb: str,
    meeting: Path,
) -> None:  # fmt: skip
    """A question is asked as stems, so a unit's speakers are stored as stems too: "Ben
    Okoye" (in no cue's words) finds the windows where Ben speaks."""
    await ingest(store, embedder, kb, [meeting])
    hits = await keyword.search(kb, "Okoye", k=3)
    assert hits and all("Ben Okoye" in h.segment.speakers for h in hits)


async def test_a_knowledge_base_partly_indexed_before_stems_finds_its_older_sources(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, keyword: SearchService, kb: str,
    meeting: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """One recording ingested before stems and a longer one after: asked as stems, the
    older one's words would match nothing, so the knowledge base is asked as before."""
    with monkeypatch.context() as m:
        m.setattr(retrieval.write.levels, "stemmed", lambda text: "")  # what older ingests wrote
        await ingest(store, embedder, kb, [meeting])
    later = tmp_path / "2025-03-11-planning.vtt"
    cues = [
        f"00:{n // 2:02d}:{n % 2 * 30:02d}.000 --> 00:{n // 2:02d}:{n % 2 * 30 + 25:02d}.000\n"
        f"<v Cleo Park>Planning item {n}: the parking permits and the seating chart again.\n"
        for n in range(40)
    ]
    later.write_text("WEBVTT\n\n" + "\n".join(cues))
    await ingest(store, embedder, kb, [later])
    hits = await keyword.search(kb, "zephyrine", k=3)
    assert hits and "zephyrine migration" in hits[0].segment.text
