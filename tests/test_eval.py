"""``examples/eval.jsonl`` through the real engine: where search and citations land on the
sample archive, extractive and with Claude (the Messages API emulator, scripted to answer
with one sentence said inside the gold window, so it measures the alignment, not Claude);
and ``quorum eval``'s handling of bad files."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from typer.testing import CliRunner

from bot.answer.answer import AnswerConfig
from bot.cite.sentences import EXACT_S, sentences_of
from bot.engine import Engine
from bot.evaluate import Case, Summary, load_cases, run_eval
from bot.llm import Model, claude_model
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.ingest import discover, read_source
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.chunking import split_sentences
from retrieval.write.indexer import ingest
from tests.conftest import EXAMPLES
from tests.emulators.anthropic import AnthropicEmulator, Reply

EVAL = EXAMPLES / "eval.jsonl"
KB = "eval_examples"
runner = CliRunner()

pytestmark = pytest.mark.skipif(not EVAL.is_file(), reason="examples/eval.jsonl is not there")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def examples_kb(store: WeaviateStore, embedder: SentenceTransformerEmbedder) -> str:
    folders = [EXAMPLES / d for d in ("recordings", "docs", "courses", "handbook")]
    report = await ingest(store, embedder, KB, folders)
    assert not report.failed
    return KB


@pytest_asyncio.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore.open(tmp_path / "sessions.sqlite3") as s:
        yield s


def engine(search: SearchService, sessions: SessionStore, llm: Model | None) -> Engine:
    return Engine(
        archives=search.archive,
        sessions=sessions,
        llm=llm,
        config=AnswerConfig(llm_timeout_s=20),
        embedder=search.embedder,
    )


# The floors below were measured on the file's first 35 answerable questions and its
# unanswerable ones; the questions added after them (a kind each: cause, fix, person,
# time, number, decision, reason, list) are measured by bench/extractive.py.
FLOORED = 35


def floored(case: Case) -> bool:
    """A question the regression floors were measured on."""
    return case.line <= FLOORED or not case.gold.answerable


async def evaluate(search: SearchService, sessions: SessionStore, llm: Model | None) -> Summary:
    cases = [c for c in load_cases(EVAL) if floored(c)]
    return await run_eval(cases, search.archive(KB), engine(search, sessions, llm).ask, KB)


async def test_extractive_answers_cite_the_gold_moment(
    examples_kb: str, search: SearchService, sessions: SessionStore
) -> None:
    summary = await evaluate(search, sessions, None)
    answerable = [r for r in summary.results if r.case.gold.answerable]
    assert len(answerable) >= 25
    # Regression floors (at the time of writing: moment@5 0.857, first citation inside
    # 0.686, 24 of 35): where search puts the gold, and where the quoted moment lands.
    assert summary.moment_at(5) >= 0.75
    assert summary.first_citation >= 0.65, summary.json()["first_citation_accuracy"]
    found, total = summary.unanswerable
    assert total == 2 and found == total  # "nothing found", not noise passed off
    # every answerable question got a cited answer, each citation with a support score
    for r in answerable:
        assert r.kind == "extractive" and r.citations >= 1, r.case.id


_SECTION = re.compile(r"^\[(\d+)\] ", re.M)
_LINE = re.compile(r"^\((\d+:\d\d(?::\d\d)?)\) (?:[^:\n]{1,40}: )?(.*)$", re.M)


def _seconds(clock: str) -> float:
    parts = [int(p) for p in clock.split(":")]
    return float(sum(p * 60**i for i, p in enumerate(reversed(parts))))


@functools.cache
def cue_openers() -> dict[str, list[tuple[float, str]]]:
    """Per recording title (casefolded), each sentence that opens a cue of its transcript
    file, with the cue's second (exact: read from the file, not estimated)."""
    out: dict[str, list[tuple[float, str]]] = {}
    for path in discover([EXAMPLES / "recordings"]):
        doc = read_source(path)
        for seg in doc.segments:
            for sentence in sentences_of(seg):
                start, cue = sentence.start_s, sentence.cue_s
                if start is not None and cue is not None and start - cue < EXACT_S:
                    out.setdefault(doc.source.title.casefold(), []).append((start, sentence.text))
    return out


def gold_sentence(case: Case, body: dict[str, Any]) -> str:
    """What a perfect Claude says: one sentence spoken inside the gold window (or on the
    gold page or lesson), cited with the number of the source that shows it. A source
    line is stamped where its turn starts; a turn that starts before the window and
    goes on into it is quoted by a sentence that opens a cue inside the window."""
    prompt = next(str(m["content"]) for m in body["messages"] if "<sources>" in str(m["content"]))
    gold = case.gold
    sections = list(_SECTION.finditer(prompt))
    for i, head in enumerate(sections):
        end = sections[i + 1].start() if i + 1 < len(sections) else len(prompt)
        block = prompt[head.start() : end]
        header = prompt[: head.start()].rsplit("\n## ", 1)[-1].split("\n", 1)[0]
        title = header.removeprefix("## ").rsplit(" (", 1)[0].strip()
        if gold.source is None or title.casefold() != gold.source.casefold():
            continue
        n = head.group(1)
        if gold.windows:
            for line in _LINE.finditer(block):
                at = _seconds(line.group(1))
                if any(lo - 1 <= at <= hi for lo, hi in gold.windows):
                    sentence = max(split_sentences(line.group(2)), key=len)
                    return f"{sentence} [{n}]"
            said = [
                text
                for at, text in cue_openers().get(gold.source.casefold(), [])
                if any(lo - 1 <= at <= hi for lo, hi in gold.windows) and text in block
            ]
            if said:
                return f"{max(said, key=len)} [{n}]"
        elif gold.page is not None and re.match(rf"\[{n}\] p\. {gold.page}\b", block):
            return f"{max(split_sentences(block.split(chr(10), 1)[1]), key=len)} [{n}]"
        elif gold.lesson is not None and re.match(rf"\[{n}\] Lesson {gold.lesson}\b", block):
            return f"{max(split_sentences(block.split(chr(10), 1)[1]), key=len)} [{n}]"
        elif gold.heading is not None and gold.heading.casefold() in block.casefold():
            return f"{max(split_sentences(block.split(chr(10), 1)[1]), key=len)} [{n}]"
    return "The sources do not show that moment [1]."  # a retrieval miss: scored as such


async def test_claude_citations_align_to_the_gold_moment(
    examples_kb: str, search: SearchService, sessions: SessionStore
) -> None:
    cases = {c.question: c for c in load_cases(EVAL)}

    def claude(body: dict[str, Any]) -> Reply:
        asked = json.dumps(body["messages"])  # a revision request repeats the question
        case = next(c for q, c in cases.items() if json.dumps(q)[1:-1] in asked)
        return Reply(text=gold_sentence(case, body))

    async with AnthropicEmulator(default=claude) as emu:
        llm = claude_model(
            api_key=emu.api_key,
            base_url=emu.url,
            model="claude-answer",
            fast_model="claude-fast",
            timeout_s=20,
            max_retries=0,
            backoff_s=0.05,
        )
        try:
            summary = await evaluate(search, sessions, llm)
        finally:
            await llm.aclose()
    answered = [r for r in summary.results if r.case.gold.answerable and r.citations]
    # 35 of 35 at the time of writing (the issue asks 95 %). A miss is a question whose
    # gold moment search did not bring (scripted Claude then cites nothing real, and that
    # citation is dropped), or the alignment's (at most one, below).
    assert summary.first_citation >= 0.95, summary.json()["first_citation_accuracy"]
    assert summary.all_citations >= 0.9
    # a citation whose source holds the gold moment opens on it (the alignment's share)
    aligned = [r for r in answered if r.first is not None and r.first.quote]
    assert aligned
    misses = [
        (r.case.id, r.first.label if r.first else None)
        for r in answered
        if r.first is not None and r.offset_s is not None and not r.first_inside
    ]
    assert len(misses) <= 1, misses


def test_eval_names_every_bad_line(tmp_path: Path) -> None:
    from adapters.cli.main import app

    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"question": "ok?", "source": "A", "window": [1, 5]}\n'
        "not json\n"
        '{"question": "", "source": "A", "page": 2}\n'
        '{"question": "two places?", "source": "A", "page": 2, "lesson": 1}\n'
        '{"question": "backwards?", "source": "A", "window": [9, 3]}\n',
        encoding="utf-8",
    )
    result = runner.invoke(app, ["eval", str(bad), "--kb", "x"])
    assert result.exit_code != 0
    out = " ".join(result.output.split())
    assert "4 bad line(s)" in out
    for line in ("line 2", "line 3", "line 4", "line 5"):
        assert line in out
    assert "Traceback" not in result.output
    missing = runner.invoke(app, ["eval", str(tmp_path / "nope.jsonl"), "--kb", "x"])
    assert missing.exit_code != 0 and "No eval file" in missing.output
