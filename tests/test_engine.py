"""Engine.ask end to end: real Weaviate, real SQLite, and on both backends the real SDK
(anthropic, openai) against the emulator of its API. Failures come back as answers, never
as exceptions."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator, Sequence
from datetime import date
from pathlib import Path

import pytest
import pytest_asyncio

from bot.answer.answer import AnswerConfig, Outcome
from bot.answer.extractive import NO_MODEL, UNAVAILABLE
from bot.engine import SEARCH_DOWN, Engine
from bot.llm import claude_model, openai_model
from bot.models import Answer, Event, PartialAnswer, ProgressEvent, Question, ThreadKey
from bot.research.loop import NEEDS_API_KEY, NO_TOOLS
from bot.sessions import Exchange, SessionStore
from retrieval.archive import Archive
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.models import SearchFilters
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from tests.backends import Served, turns
from tests.emulators.anthropic import AnthropicEmulator, Reply
from tests.emulators.openai import OpenAIEmulator
from tests.fakes import FakeArchive
from tests.sample_archive import load_sample

T1 = ThreadKey("slack", "T1", "C1", "111.1")
T2 = ThreadKey("slack", "T1", "C1", "222.2")
TIMEOUT_S = 1.5
SLACK_S = 1.5
Emulator = AnthropicEmulator | OpenAIEmulator


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def sample_kb(store: WeaviateStore, embedder: SentenceTransformerEmbedder) -> str:
    name = "engine_sample"
    await load_sample(store, embedder, name)
    return name


@pytest.fixture
def emu(served: Served) -> Emulator:
    """The backend's emulator: the tests that take it run on Claude and on an
    OpenAI-compatible server."""
    return served.emu


@pytest_asyncio.fixture
async def sessions(tmp_path: Path) -> AsyncIterator[SessionStore]:
    async with SessionStore.open(tmp_path / "sessions.sqlite3") as s:
        yield s


def make_engine(
    search: SearchService,
    sessions: SessionStore,
    emu: Emulator | None,
    **kw: object,
) -> Engine:
    llm = None
    if isinstance(emu, AnthropicEmulator):
        llm = claude_model(
            api_key=emu.api_key,
            base_url=emu.url,
            model="claude-answer",
            fast_model="claude-fast",
            timeout_s=TIMEOUT_S,
            max_retries=2,
            backoff_s=0.05,
        )
    elif emu is not None:
        llm = openai_model(
            api_key=emu.api_key,
            base_url=emu.url,
            model="claude-answer",
            fast_model="claude-fast",
            timeout_s=TIMEOUT_S,
            max_retries=2,
            backoff_s=0.05,
        )
    config = AnswerConfig(llm_timeout_s=TIMEOUT_S, rewrite_timeout_s=TIMEOUT_S / 2)
    return Engine(archives=search.archive, sessions=sessions, llm=llm, config=config, **kw)  # type: ignore[arg-type]


def q(text: str, kb: str, thread: ThreadKey = T1, **kw: object) -> Question:
    return Question(text=text, thread=thread, user="U1", kb=kb, **kw)  # type: ignore[arg-type]


class Recorder:
    def __init__(self) -> None:
        self.events: list[Event] = []

    async def __call__(self, event: Event) -> None:
        self.events.append(event)


def hosted_ui_number(body: dict[str, object]) -> str:
    """The number the request's sources give the hosted UI passage."""
    sources = next(
        str(m["content"])
        for m in body["messages"]  # type: ignore[attr-defined]
        if "<sources>" in str(m["content"])
    )
    found = re.search(r"\[(\d+)\] [^\n]*\n[^[]*hosted UI", sources)
    assert found, "the hosted UI passage is a numbered source"
    return found.group(1)


async def test_an_unsupported_claim_goes_back_to_claude_once(
    search: SearchService,
    sessions: SessionStore,
    emu: Emulator,
    sample_kb: str,
    embedder: SentenceTransformerEmbedder,
) -> None:
    number = ""

    def invents(body: dict[str, object]) -> Reply:
        nonlocal number
        number = hosted_ui_number(body)
        return Reply(
            text=f"The hosted login page can't be fully restyled [{number}]. Cognito also "
            f"gives every penguin at the zoo a free submarine [{number}]."
        )

    def revises(body: dict[str, object]) -> Reply:
        asked = str(body["messages"][-1]["content"])  # type: ignore[index]
        assert "not supported by the source they cite" in asked
        assert f"penguin at the zoo a free submarine [{number}]" in asked
        assert "restyled" not in asked  # only the unsupported claim is named
        return Reply(text=f"The hosted login page can't be fully restyled [{number}].")

    emu.enqueue(invents, revises)
    engine = make_engine(search, sessions, emu, embedder=embedder)
    answer = await engine.ask(q("What are the limits of the hosted UI?", sample_kb))
    assert answer.text == f"The hosted login page can't be fully restyled [{number}]."
    assert [c.source_n for c in answer.citations] == [int(number)]
    assert answer.note is None and emu.pending == 0


async def test_a_claim_still_unsupported_after_revision_loses_its_marker(
    search: SearchService,
    sessions: SessionStore,
    emu: Emulator,
    sample_kb: str,
    embedder: SentenceTransformerEmbedder,
) -> None:
    def invents(body: dict[str, object]) -> Reply:
        n = hosted_ui_number(body)  # the revision request carries the sources too
        return Reply(text=f"Every penguin at the zoo gets a free submarine [{n}].")

    emu.enqueue(invents, times=2)
    engine = make_engine(search, sessions, emu, embedder=embedder)
    answer = await engine.ask(q("What are the limits of the hosted UI?", sample_kb))
    assert answer.text == "Every penguin at the zoo gets a free submarine."
    assert not answer.citations
    assert answer.note and "could not be traced" in answer.note
    assert len(emu.requests) == 2  # the answer, one revision: never a loop


async def test_answer_streams_cites_and_is_stored(
    search: SearchService, sessions: SessionStore, emu: Emulator, sample_kb: str
) -> None:
    def reply(body: dict[str, object]) -> Reply:
        n = hosted_ui_number(body)
        return Reply(text=f"The hosted login page can't be fully restyled [{n}].")

    emu.enqueue(reply)
    engine = make_engine(search, sessions, emu)
    rec = Recorder()
    answer = await engine.ask(q("What are the limits of the hosted UI?", sample_kb), rec)
    assert answer.kind == "answer" and answer.mode == "quick"
    # aligned to the sentence it relies on, inside John's remark (734-790 s)
    (cited,) = answer.citations
    assert cited.link and cited.link.startswith("https://www.loom.com/share/feedbeef?t=")
    assert 734 <= (cited.start_s or 0) <= 750 and cited.speaker == "John Park"
    assert answer.exchange_id is not None
    assert answer.timings["total"] >= answer.timings["search"] > 0
    progress = [e.text for e in rec.events if isinstance(e, ProgressEvent)]
    assert progress[0].startswith("Searching") and progress[-1].startswith("Writing")
    partial = [e.text for e in rec.events if isinstance(e, PartialAnswer)]
    assert partial[-1] == answer.text
    stored = await sessions.exchange(answer.exchange_id)
    assert stored is not None and stored["answer"] == answer.text
    assert stored["citations"][0]["link"] == cited.link  # stored as shown
    assert stored["input_tokens"] > 0 and stored["output_tokens"] > 0
    (logged,) = await sessions.recent_queries()
    assert logged["exchange_id"] == answer.exchange_id and logged["hits"] > 0
    assert await engine.is_active_thread(T1)
    assert not await engine.is_active_thread(T2)


async def test_follow_up_rewrite_uses_the_thread_history(
    search: SearchService, sessions: SessionStore, emu: Emulator, sample_kb: str
) -> None:
    engine = make_engine(search, sessions, emu)
    emu.enqueue("John Park wants to leave Auth0 [1].")
    await engine.ask(q("What did John say about Auth0?", sample_kb))
    emu.enqueue("problems John Park raised about Auth0", "Cost and an outage [1].")
    answer = await engine.ask(q("what problems did he mention?", sample_kb))
    rewrite, final = emu.requests[1], emu.requests[2]
    assert rewrite.body["model"] == "claude-fast"
    assert "What did John say about Auth0?" in turns(rewrite.body)[0]["text"]
    assert answer.standalone_query == "problems John Park raised about Auth0"
    assert turns(final.body)[0]["text"] == "What did John say about Auth0?"
    assert turns(final.body)[1]["role"] == "assistant"
    # Another thread has its own (empty) history: no rewrite call.
    emu.enqueue("Separate [1].")
    await engine.ask(q("what problems did he mention?", sample_kb, thread=T2))
    # (a request after the answer would be the revision of an unsupported claim)
    assert emu.requests[3].stream and emu.requests[3].body["model"] != "claude-fast"


async def test_history_survives_a_restart(
    search: SearchService, tmp_path: Path, emu: Emulator, sample_kb: str
) -> None:
    path = tmp_path / "restart.sqlite3"
    async with SessionStore.open(path) as sessions:
        emu.enqueue("He wants to leave Auth0 [1].")
        await make_engine(search, sessions, emu).ask(q("What did John say about Auth0?", sample_kb))
    async with SessionStore.open(path) as sessions:
        emu.enqueue("John Park Auth0 problems", "Cost [1].")
        answer = await make_engine(search, sessions, emu).ask(q("and the problems?", sample_kb))
    assert "What did John say about Auth0?" in turns(emu.requests[1].body)[0]["text"]
    assert answer.standalone_query == "John Park Auth0 problems"


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param([Reply.error(529)] * 3, id="529"),
        pytest.param([Reply.error(500)] * 3, id="500"),
        pytest.param([Reply(text="late", delay_s=10)], id="timeout"),
        pytest.param([Reply.error(529, retry_after=60)], id="retry-after-too-long"),
    ],
)
async def test_claude_failure_gives_extractive_within_the_timeout(
    search: SearchService,
    sessions: SessionStore,
    emu: Emulator,
    sample_kb: str,
    failure: list[Reply],
) -> None:
    emu.enqueue(*failure)
    engine = make_engine(search, sessions, emu)
    t0 = time.perf_counter()
    answer = await engine.ask(q("Why did we move off Auth0?", sample_kb))
    elapsed = time.perf_counter() - t0
    assert elapsed < TIMEOUT_S + SLACK_S
    assert answer.kind == "extractive"
    assert answer.text.startswith(UNAVAILABLE)
    assert '"' in answer.text and answer.citations
    assert all(c.link and ("t=" in c.link or "#page=" in c.link) for c in answer.citations)


async def test_claude_down_with_history_still_answers_within_the_timeout(
    search: SearchService, sessions: SessionStore, emu: Emulator, sample_kb: str
) -> None:
    engine = make_engine(search, sessions, emu)
    emu.enqueue("He wants to leave Auth0 [1].")
    await engine.ask(q("What did John say about Auth0?", sample_kb))
    emu.default = Reply(text="late", delay_s=10)  # rewrite and answer both hang
    t0 = time.perf_counter()
    answer = await engine.ask(q("what problems did he mention?", sample_kb))
    assert time.perf_counter() - t0 < TIMEOUT_S + SLACK_S
    assert answer.kind == "extractive"
    assert "John" in (answer.standalone_query or "")  # the heuristic rewrite


async def test_no_key_is_extractive(
    search: SearchService, sessions: SessionStore, sample_kb: str
) -> None:
    answer = await make_engine(search, sessions, None).ask(
        q("Why did we move off Auth0?", sample_kb)
    )
    assert answer.kind == "extractive" and answer.text.startswith(NO_MODEL)
    assert "There are three reasons to leave Auth0." in answer.text


async def test_weaviate_down_is_one_polite_sentence(
    sessions: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    engine = Engine(archives=lambda kb: FakeArchive(down=True), sessions=sessions, llm=None)
    with caplog.at_level(logging.INFO):
        answer = await engine.ask(q("Why did we move off Auth0? SECRET-42", "kb"))
    assert answer.kind == "error" and answer.text == SEARCH_DOWN
    assert "Traceback" in caplog.text or any(r.exc_info for r in caplog.records)
    assert "SECRET-42" not in caplog.text


async def test_user_errors_are_answers(
    search: SearchService, sessions: SessionStore, sample_kb: str
) -> None:
    engine = make_engine(search, sessions, None)
    reversed_dates = SearchFilters(after=date(2024, 3, 1), before=date(2024, 1, 1))
    answer = await engine.ask(q("Why Auth0?", sample_kb, filters=reversed_dates))
    assert answer.kind == "error" and "reversed" in answer.text
    answer = await engine.ask(q("Why Auth0?", "bad kb name!"))
    assert answer.kind == "error" and "Knowledge base names" in answer.text
    answer = await engine.ask(q("", sample_kb))
    assert answer.kind == "error" and answer.exchange_id is None
    answer = await engine.ask(q("hi", sample_kb, thread=T2))
    assert answer.kind == "help" and await engine.is_active_thread(T2)


async def test_deep_mode_on_a_model_without_tools_answers_quickly_and_says_why(
    search: SearchService, sessions: SessionStore, sample_kb: str
) -> None:
    def reply(body: dict[str, object]) -> Reply:
        return Reply(
            text=f"The hosted login page can't be fully restyled [{hosted_ui_number(body)}]."
        )

    async with OpenAIEmulator(api_key=None, supports_tools=False, default=reply) as emu:
        engine = make_engine(search, sessions, emu)
        asked = q("What are the limits of the hosted UI?", sample_kb, mode="deep")
        first = await engine.ask(asked)
        second = await engine.ask(
            q("What are the limits of the hosted UI?", sample_kb, thread=T2, mode="deep")
        )
    for answer in (first, second):
        assert answer.kind == "answer" and answer.mode == "quick" and answer.citations
        assert answer.note is not None and answer.note.startswith(NO_TOOLS)
    with_tools = [r for r in emu.requests if "tools" in r.body]
    assert len(with_tools) == 1 and with_tools[0].status == 400  # asked once, then known


async def test_deep_mode_without_a_key_answers_quickly_and_says_why(
    search: SearchService, sessions: SessionStore, sample_kb: str
) -> None:
    engine = make_engine(search, sessions, None)  # the engine routes through the router
    answer = await engine.ask(q("Why did we move off Auth0?", sample_kb, mode="deep"))
    assert answer.mode == "quick" and answer.note == NEEDS_API_KEY
    assert answer.kind == "extractive"

    class Research:
        def __init__(self) -> None:
            self.asked: list[str] = []

        async def research(
            self,
            question: Question,
            archive: Archive,
            history: Sequence[Exchange],
            on_event: object,
        ) -> Outcome:
            self.asked.append(question.text)
            return Outcome(Answer("Deep answer.", "answer", "deep"), trace=[{"tool": "search"}])

    hook = Research()
    engine = make_engine(search, sessions, None, research=hook)
    answer = await engine.ask(q("Trace the decision", sample_kb, mode="deep"))
    assert answer.mode == "deep" and hook.asked == ["Trace the decision"]
    assert answer.exchange_id is not None
    stored = await sessions.exchange(answer.exchange_id)
    assert stored is not None and stored["research_trace"] == [{"tool": "search"}]


async def test_a_failing_event_sink_does_not_break_the_answer(
    search: SearchService, sessions: SessionStore, sample_kb: str
) -> None:
    async def broken(event: Event) -> None:
        raise RuntimeError("the adapter fell over")

    answer = await make_engine(search, sessions, None).ask(
        q("Why did we move off Auth0?", sample_kb), broken
    )
    assert answer.kind == "extractive"


async def test_core_housekeeping(
    search: SearchService, sessions: SessionStore, sample_kb: str
) -> None:
    engine = make_engine(search, sessions, None)
    assert await engine.claim_event("slack", "Ev1")
    assert not await engine.claim_event("slack", "Ev1")
    answer = await engine.ask(q("Why did we move off Auth0?", sample_kb))
    assert answer.exchange_id is not None
    await engine.record_feedback(answer.exchange_id, "U2", 1)
    await engine.record_feedback(answer.exchange_id, "U2", -1)
    assert await sessions.feedback(answer.exchange_id) == {"U2": -1}
    assert len(await sessions.history(T1)) == 1
    await engine.reset(T1)
    assert await sessions.history(T1) == []
    assert "John Park" in await engine.speakers(sample_kb)
    assert "Auth kickoff" in await engine.source_titles(sample_kb)
    assert len(await engine.sources(sample_kb)) == 3
    down = Engine(archives=lambda kb: FakeArchive(down=True), sessions=sessions, llm=None)
    assert await down.speakers("x") == [] and await down.source_titles("x") == []
