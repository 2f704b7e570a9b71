"""Summaries per recording: extractive without a model, the fast model with one (on both
backends, through the real SDKs and their emulators), each line at its moment; and deep research's
search tool per level."""

from __future__ import annotations

import json

from bot.research.schema import TOOLS, parse_args
from bot.summaries import ClaudeSummarizer
from retrieval.embed import SentenceTransformerEmbedder
from retrieval.ingest import read_source
from retrieval.models import Segment
from retrieval.multilevel import build
from retrieval.summary import read_lines
from tests.backends import FAST, Reply, Served, last_text
from tests.conftest import EXAMPLES

RETRO = EXAMPLES / "recordings" / "2024-02-27-cutover-retro.txt"


async def _summary(
    embedder: SentenceTransformerEmbedder, summarizer: ClaudeSummarizer | None
) -> Segment:
    doc = read_source(RETRO)
    vectors = await embedder.embed_documents([s.text for s in doc.segments])
    built = await build(doc, vectors, embedder, summarizer)
    assert len(built.vectors) == len(built.doc.levels)
    return next(u for u in built.doc.levels if u.level == "summary")


async def test_without_a_key_the_summary_is_extractive_and_timed(
    embedder: SentenceTransformerEmbedder,
) -> None:
    summary = await _summary(embedder, None)
    lines = read_lines(summary)
    topics = [line for line in lines if line.section == "topic"]
    assert len(topics) >= 3
    starts = [line.start_s or 0.0 for line in topics]
    assert starts == sorted(starts)  # in time order
    text = RETRO.read_text()
    for line in lines:  # every line is a sentence said in the recording, at its second
        assert line.text[:40] in " ".join(text.split())
        assert line.start_s is not None and 0 <= line.start_s <= 613


async def test_the_model_writes_the_lines_and_each_keeps_its_moment(
    embedder: SentenceTransformerEmbedder, served: Served
) -> None:
    emu = served.emu
    reply = {
        "topics": [
            {"text": "The refresh-token failures after the cut-over.", "at": 97},
            {"text": "Clock skew on two nodes.", "at": 175},
        ],
        "decisions": [{"text": "Rollback rules go in the runbook.", "at": 271}],
        "actions": [
            {"text": "Marcus adds a clock-offset alert.", "at": 515},
            {"text": "An invented moment past the end.", "at": 99999},
        ],
    }
    emu.enqueue(Reply(text="Here it is:\n" + json.dumps(reply)))
    llm = served.model()
    try:
        summary = await _summary(embedder, ClaudeSummarizer(llm))
    finally:
        await llm.aclose()
    request = emu.requests[0].body
    assert request["model"] == FAST
    assert "[97]" in last_text(request)  # the transcript carries its seconds
    lines = read_lines(summary)
    assert [(line.section, line.start_s) for line in lines] == [
        ("topic", 97.0),
        ("topic", 175.0),
        ("decision", 271.0),
        ("action", 515.0),
    ]
    assert "Action item: Marcus adds a clock-offset alert." in summary.text
    assert "invented" not in summary.text


async def test_a_broken_reply_keeps_the_extractive_summary(
    embedder: SentenceTransformerEmbedder, served: Served
) -> None:
    served.emu.enqueue(Reply(text="Sorry, I cannot help with that."))
    served.emu.enqueue(Reply.error(500))
    llm = served.model()
    try:
        first = await _summary(embedder, ClaudeSummarizer(llm))
        second = await _summary(embedder, ClaudeSummarizer(llm))
    finally:
        await llm.aclose()
    extractive = await _summary(embedder, None)
    assert first.text == extractive.text == second.text


def test_deep_research_has_a_search_tool_per_level() -> None:
    names = {t.name for t in TOOLS}
    assert {"search", "search_turns", "search_topics", "search_summaries"} <= names
    args = parse_args("search_topics", {"query": "rollback"})
    assert args.level == "topic"  # type: ignore[attr-defined]
    assert parse_args("search", {"query": "rollback"}).level is None  # type: ignore[attr-defined]
