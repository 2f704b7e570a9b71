"""The archive the core and research read (``KbArchive`` over ``SearchService``), on the
in-memory store: search with a typed source name, a speaker and dates; a hit's
neighbours; a transcript's time range; the speakers and sources listed. None of it
depends on the store, so it runs without a server (the same reads on Weaviate:
``tests/test_retrieval.py``, ``tests/test_answer.py``)."""

from __future__ import annotations

import uuid
from datetime import date

import pytest

from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import InvalidInput
from retrieval.models import SearchFilters
from retrieval.search.search import KbArchive, SearchService
from retrieval.store.memory import MemoryStore
from tests.sample_archive import HOSTED_UI_S, load_sample


@pytest.fixture
async def archive(embedder: SentenceTransformerEmbedder) -> KbArchive:
    """The sample archive (two meetings and a plan) in a fresh in-memory store."""
    store = MemoryStore()
    await load_sample(store, embedder, "team")
    return SearchService(store, embedder).archive("team")


async def test_search_finds_the_moment_and_links_it(archive: KbArchive) -> None:
    hits = await archive.search("why is the hosted login page a weak spot", k=3)

    assert hits[0].segment.start_s == HOSTED_UI_S
    assert hits[0].link == "https://www.loom.com/share/feedbeef?t=734"
    assert hits[0].similarity is not None and hits[0].similarity > 0.3


async def test_filters_narrow_by_source_name_speaker_and_date(archive: KbArchive) -> None:
    named = await archive.search("auth0", SearchFilters(source="Auth kickoff"))
    by_marcus = await archive.search("outages", SearchFilters(speaker="marcus"))
    in_february = await archive.search("rollback", SearchFilters(after=date(2024, 2, 1)))

    assert {h.source.id for h in named} == {"kickoff"}
    assert [h.segment.position for h in by_marcus] == [3]
    assert {h.source.id for h in in_february} == {"plan"}


async def test_neighbours_and_transcripts_read_in_order(archive: KbArchive) -> None:
    [hit] = await archive.search("coffee machine", k=1)
    around = await archive.neighbours(hit.id, before=1, after=1)
    late = await archive.transcript("deep-dive", start_s=700.0, end_s=760.0)

    assert [h.segment.position for h in around] == [0, 1, 2]
    assert [h.segment.start_s for h in late] == [672, HOSTED_UI_S]
    with pytest.raises(InvalidInput):
        await archive.neighbours(str(uuid.uuid4()))  # an id no unit has


async def test_sources_and_speakers_are_listed(archive: KbArchive) -> None:
    assert [i.source.id for i in await archive.sources()] == ["plan", "deep-dive", "kickoff"]
    assert (await archive.speakers())[:2] == ["John Park", "Priya Raman"]
    with pytest.raises(InvalidInput, match="no summary"):
        await archive.summary("plan")
