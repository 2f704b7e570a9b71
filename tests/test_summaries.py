"""Summaries per recording: extractive without a model, the fast model with one (on both
backends, through the real SDKs and their emulators), each line at its moment; and deep research's
search tool per level."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from bot.research.schema import TOOLS, parse_args
from bot.summaries import ModelSummarizer
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.ingest import read_source
from retrieval.models import Segment
from retrieval.search.multilevel import build
from retrieval.write.summary import read_lines
from tests.backends import FAST, Reply, Served, last_text
from tests.conftest import EXAMPLES

RETRO = EXAMPLES / "recordings" / "2024-02-27-cutover-retro.txt"


async def _summary(
    embedder: SentenceTransformerEmbedder, summarizer: ModelSummarizer | None
) -> Segment:
    doc = read_source(RETRO)
    vectors = await embedder.embed_documents([s.text for s in doc.segments])
    built = await build(doc, vectors, embedder, summarizer)
    assert len(built.vectors) == len(built.doc.levels)
    return next(u for u in built.doc.levels if u.level == "summary")


class Counting:
    """The real embedder, remembering what each document encode was given."""

    def __init__(self, inner: SentenceTransformerEmbedder) -> None:
        self.inner = inner
        self.calls: list[list[str]] = []
        self.dim = inner.dim

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return await self.inner.embed_documents(texts)

    async def embed_query(self, text: str) -> list[float]:
        return await self.inner.embed_query(text)


async def _topic_lines(path: Path, embedder: Counting) -> list[str]:
    doc = read_source(path)
    vectors = await embedder.embed_documents([s.text for s in doc.segments])
    built = await build(doc, vectors, embedder)
    summary = next(u for u in built.doc.levels if u.level == "summary")
    return [line.text for line in read_lines(summary) if line.section == "topic"]


# The handbook's summary as titled when every candidate sentence was encoded (before
# single-sentence pools and repeats were skipped): what users read must not move.
ON_CALL_TOPICS = [
    "For whoever holds the Northwind pager: paging, escalation, and the runbook",
    "- **SEV2**: a major feature is degraded for many customers, or an enterprise",
    "Acknowledge a page within 5 minutes.",
    "**Primary on-call** owns the first response and is the incident commander",
    "Since the cut-over on 2024-02-24, logins go through two Cognito user pools:",
    "It shows login success and refresh success by provider and by pool, the",
    "Refresh tokens are bound to the app client that issued them, so this nearly",
    "Users who have not logged in since the cut-over are migrated on their first",
    "If an SSO customer reports that their Okta or My Apps tile stopped working,",
    "A rollback takes about 14 minutes and logs users out, so when the cause is",
    "After that USER_PASSWORD_AUTH is disabled, the clients switch to SRP, Auth0",
    "Hold a blameless retro within two working days, built from the incident",
]


async def test_topic_titles_are_unchanged_and_each_sentence_is_encoded_once(
    embedder: SentenceTransformerEmbedder,
) -> None:
    counting = Counting(embedder)
    lines = await _topic_lines(EXAMPLES / "handbook" / "on-call.md", counting)
    got = [line[: len(want)] for line, want in zip(lines, ON_CALL_TOPICS, strict=True)]
    # ONNX Runtime's kernels differ by CPU (AVX-512 or not, Intel or AMD) in the last bits of
    # a vector, which can move one near-equal choice of window: one title may differ, more
    # means the titling itself moved.
    moved = [(g, w) for g, w in zip(got, ON_CALL_TOPICS, strict=True) if g != w]
    assert len(moved) <= 1, moved
    titles = [t for call in counting.calls[1:] for t in call]
    assert titles and len(titles) == len(set(titles))


async def test_a_section_of_one_sentence_is_its_own_title_without_an_encode(
    embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    page = tmp_path / "deploys.md"
    page.write_text(
        "# Deploys\n\n## When\n\nDeploys to production happen on Tuesday mornings.\n\n"
        "## Who\n\nThe platform team approves every change to the load balancer.\n\n"
        "## Rollback\n\nRoll back when the error rate stays above two percent.\n",
        encoding="utf-8",
    )
    counting = Counting(embedder)
    lines = await _topic_lines(page, counting)
    assert lines == [
        "Deploys to production happen on Tuesday mornings.",
        "The platform team approves every change to the load balancer.",
        "Roll back when the error rate stays above two percent.",
    ]
    assert len(counting.calls) == 1  # the windows; no title had a choice to make


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
        summary = await _summary(embedder, ModelSummarizer(llm))
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
        first = await _summary(embedder, ModelSummarizer(llm))
        second = await _summary(embedder, ModelSummarizer(llm))
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
