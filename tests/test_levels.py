"""Several resolutions per source (turns, windows, topics, a summary) and the router that
picks them: built from the real readers and searched in the real Weaviate."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
import pytest_asyncio
from typer.testing import CliRunner

from adapters.cli.main import app
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.ingest import read_source
from retrieval.models import SearchFilters
from retrieval.search.route import OVERVIEW, REMARK, UNSURE, WINDOWS, route
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import ingest
from retrieval.write.levels import boundaries
from tests.conftest import EXAMPLES

RECORDINGS = EXAMPLES / "recordings"
KICKOFF = RECORDINGS / "2024-01-09-auth-kickoff.vtt"
RETRO = RECORDINGS / "2024-02-27-cutover-retro.txt"
runner = CliRunner()


def test_turns_are_one_speaker_each_and_keep_every_cue_second() -> None:
    doc = read_source(KICKOFF)
    found = [t for t in doc.levels if t.level == "turn"]
    assert len(found) > len(doc.segments)  # finer than windows
    said = " ".join(" ".join(w.text.split()) for w in doc.segments)
    for t in found:
        assert len(t.speakers) == 1 and t.start_s is not None and t.end_s is not None
        assert t.end_s - t.start_s <= 45 + 1e-6  # split when long
        assert t.marks and t.marks[0].at == 0 and t.marks[0].start_s == t.start_s
        assert " ".join(t.text.split())[:40] in said
    # Consecutive turns of the same speaker only where a long turn was split.
    for a, b in zip(found, found[1:], strict=False):
        if a.speakers == b.speakers:
            assert a.end_s is not None and b.start_s is not None and b.start_s >= a.end_s - 1e-6


def test_tiling_cuts_where_the_subject_changes() -> None:
    a, b = [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]
    vectors = [a] * 5 + [b] * 4
    assert boundaries(vectors) == [5]
    assert boundaries([a] * 5) == []  # one subject, one topic
    assert boundaries([a] * 3) == []  # too short to cut


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Summarize the discussion about the remote control design.", OVERVIEW),
        ("What was the cut-over retro about?", OVERVIEW),
        ("What did John say about the Lambda timeout?", REMARK),
        ("Who was given the Cognito spike?", REMARK),
        ("How do users keep their passwords?", WINDOWS),
        ("Who summarized the discussion on pricing?", UNSURE),
    ],
)
def test_router_picks_the_level_from_the_question(question: str, expected: object) -> None:
    assert route(question) == expected


@pytest_asyncio.fixture(scope="module")
async def recordings(store: WeaviateStore, embedder: SentenceTransformerEmbedder) -> str:
    """The sample recordings, ingested once for this module's searches."""
    kb = f"levels{uuid.uuid4().hex[:8]}"
    report = await ingest(store, embedder, kb, [RECORDINGS])
    assert not report.failed
    return kb


async def test_each_level_is_searchable_with_filters_and_seconds(
    search: SearchService, recordings: str
) -> None:
    kb = recordings
    kickoff = "2024-01-09-auth-kickoff"
    assert kickoff in {i.source.id for i in await search.sources(kb)}
    for level in ("turn", "window", "topic", "summary"):
        only = SearchFilters(source_ids=(kickoff,), levels=(level,))
        hits = await search.search(kb, "Cognito pricing and SSO connections", only, 5)
        assert hits, level
        for h in hits:
            assert h.segment.level == level and h.source.id == kickoff
            assert h.segment.start_s is not None and h.segment.end_s is not None
            assert h.link and "t=" in h.link
        if level == "turn":
            assert all(len(h.segment.speakers) == 1 for h in hits)
    # A speaker filter holds at every level.
    marcus = SearchFilters(speaker="Marcus", levels=("turn",))
    turns_found = await search.search(kb, "on-call rollback", marcus, 5)
    assert turns_found and all(h.segment.speakers == ("Marcus Lee",) for h in turns_found)


async def test_overview_questions_find_the_summary_and_its_lines_link_to_moments(
    search: SearchService, recordings: str
) -> None:
    kb = recordings
    hits = await search.search(kb, "What was the cut-over retro about?", None, 8)
    assert {h.segment.level for h in hits} & {"topic", "summary"}
    summaries = await search.search(
        kb, "cut-over retro refresh-token incident", SearchFilters(levels=("summary",)), 1
    )
    summary = summaries[0]
    assert summary.source.title.startswith("Cut-over retro")
    assert summary.segment.text.startswith("Summary of Cut-over retro")
    lines = [line for line in summary.segment.text.split("\n") if line.startswith("Topic: ")]
    assert len(lines) >= 3
    doc = read_source(RETRO)
    for mark in summary.segment.marks[1:]:
        # Every line links to the second its sentence is said, inside the recording.
        line = summary.segment.text[mark.at :].split("\n")[0]
        said = next(
            t for t in doc.levels if " ".join(line.split())[:30] in " ".join(t.text.split())
        )
        assert said.start_s is not None and said.end_s is not None
        assert said.start_s - 0.5 <= mark.start_s <= said.end_s


async def test_title_and_speakers_are_searchable_but_not_shown(
    search: SearchService, recordings: str
) -> None:
    kb = recordings
    hits = await search.search(kb, "retro rollback", SearchFilters(levels=("window",)), 3)
    retro = [h for h in hits if h.source.title.startswith("Cut-over retro")]
    assert retro, [h.source.title for h in hits]
    # The window matched on the recording's title, and its text stays as said.
    assert any("retro" not in h.segment.text.lower() for h in retro)
    assert all(not h.segment.text.startswith("Cut-over retro") for h in retro)


def test_summary_is_kept_until_the_source_changes(
    weaviate_env: Endpoint, kb: str, tmp_path: Path
) -> None:
    folder = tmp_path / "rec"
    folder.mkdir()
    shutil.copy(RETRO, folder / RETRO.name)
    shutil.copy(RETRO.with_suffix(".meta.json"), folder / RETRO.with_suffix(".meta.json").name)
    first = runner.invoke(app, ["ingest", str(folder), "--kb", kb])
    assert first.exit_code == 0, first.output
    again = runner.invoke(app, ["ingest", str(folder), "--kb", kb])
    assert "skipped" in again.output and again.exit_code == 0  # the summary is not redone
    path = folder / RETRO.name
    path.write_text(
        path.read_text() + "\n[00:11:00] Priya Raman: We decided to keep the runbook.\n"
    )
    changed = runner.invoke(app, ["ingest", str(folder), "--kb", kb])
    assert changed.exit_code == 0
    after = runner.invoke(app, ["summary", "Cut-over retro", "--kb", kb, "--json"])
    assert after.exit_code == 0, after.output
    shown = json.loads(after.output)
    assert shown["level"] == "summary" and shown["text"].count("\nTopic: ") >= 3
    assert "Decision: Priya Raman: We decided to keep the runbook." in shown["text"]
    table = runner.invoke(app, ["summary", "cutover-retro", "--kb", kb])
    assert "Decision" in table.output and "#t=660" in table.output  # the line's moment
    missing = runner.invoke(app, ["summary", "no such meeting", "--kb", kb])
    assert missing.exit_code == 1 and "No source matches" in missing.output
    bad = runner.invoke(app, ["search", "x", "--kb", kb, "--level", "chapter"])
    assert bad.exit_code == 1 and "Unknown level 'chapter'" in bad.output
