"""Mode choice: explicit requests, the setting, and the auto heuristic on a table of questions."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bot.answer.answer import Outcome, SearchRecord
from bot.answer.extractive import NO_MODEL
from bot.config import load_settings
from bot.errors import LLMError
from bot.models import Answer, EventSink, Mode, Question, ThreadKey
from bot.research.loop import NEEDS_API_KEY, Researcher
from bot.router import DEEP_FAILED, ResearchRouter, Route, looks_deep, route
from bot.sessions import Exchange
from retrieval.archive import Archive
from retrieval.models import SearchFilters
from tests.fakes import FakeLLM, fake_archive, message, use
from tests.fakes import text as text_block

TITLES = [
    "Auth kickoff: leaving Auth0?",
    "Auth deep dive: Cognito design",
    "Cognito migration review: load test, cut-over date, rollback",
    "Cut-over retro: the refresh-token incident",
    "On-call handbook",
]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # quick: one fact, one place
        ("What did John say about the migration Lambda?", None),
        ("When is the cut-over?", None),
        ("Who owns AUTH-427?", None),
        ("What is the Lambda's timeout?", None),
        ("Is Cognito cheaper than Auth0?", None),
        ("Summarize the Whyte report", None),  # "why" inside a word
        ("Which VS Code extension did Ada recommend?", None),  # not "versus"
        ("What happened on 2024-02-24?", None),  # one date
        ("What did the kickoff decide?", None),
        # deep: compare
        ("Compare Cognito and Keycloak", "compares"),
        ("Cognito vs Keycloak: which one won?", "compares"),
        ("Cognito vs. Clerk for SSO", "compares"),
        ("What are the trade-offs of lazy migration?", "compares"),
        ("What's the difference between option A and option B?", "compares"),
        # deep: why
        ("Why did we move off Auth0?", "asks why"),
        ("What led to the refresh-token incident?", "asks why"),
        ("What was the root cause of the outage?", "asks why"),
        # deep: change over time
        ("How did our auth plan evolve?", "asks how something changed over time"),
        ("How has the rollback plan changed over time?", "asks how something changed over time"),
        ("Give me a timeline of the cut-over", "asks how something changed over time"),
        (
            "How did the go/no-go criteria change between meetings?",
            "asks how something changed over time",
        ),
        # deep: spans recordings
        ("What did Dana say across all meetings about SAML?", "spans many recordings"),
        ("List every meeting where the Management API came up", "spans many recordings"),
        ("Summarise all of our recordings on Cognito", "spans many recordings"),
        # deep: several dates or sources
        ("What was decided on 2024-01-09 and on 2024-02-06?", "names 2 dates"),
        ("What did we decide on Jan 9 and on Feb 6?", "names 2 dates"),
        ("What changed from Jan 9 to Feb 6?", "asks how something changed over time"),
        ("What do the kickoff and the Cut-over retro say about owners?", None),  # names one
        ("What did Auth kickoff and Auth deep dive conclude about SSO?", "names 2 sources"),
    ],
)
def test_auto_heuristic(text: str, reason: str | None) -> None:
    assert looks_deep(text, TITLES) == reason


@pytest.mark.parametrize(
    ("text", "requested", "default", "has_llm", "expected"),
    [
        ("When is the cut-over?", "deep", "quick", True, Route("deep", "asked for deep research")),
        (
            "When is the cut-over?",
            "deep",
            "quick",
            False,
            Route("quick", "deep research needs an API key", NEEDS_API_KEY),
        ),
        ("Why did we move?", "quick", "quick", True, Route("quick", "quick is the default")),
        ("Why did we move?", "quick", "auto", True, Route("deep", "asks why")),
        ("Why did we move?", "auto", "quick", True, Route("deep", "asks why")),
        (
            "Why did we move?",
            "quick",
            "auto",
            False,
            Route("quick", "asks why, but there is no API key"),
        ),
        ("When is the cut-over?", "auto", "quick", True, Route("quick", "a direct question")),
        (
            "When is the cut-over?",
            "quick",
            "deep",
            True,
            Route("deep", "deep research is the default"),
        ),
        (
            "When is the cut-over?",
            "quick",
            "deep",
            False,
            Route("quick", "deep is the default but there is no API key"),
        ),
    ],
)
def test_route(text: str, requested: Mode, default: Mode, has_llm: bool, expected: Route) -> None:
    assert route(text, requested, default, has_llm=has_llm, titles=TITLES) == expected


def test_only_an_explicit_request_gets_the_no_key_note() -> None:
    assert route("Why?", "deep", has_llm=False).note == NEEDS_API_KEY
    assert route("Why?", "auto", has_llm=False).note is None
    assert route("Why?", "quick", "deep", has_llm=False).note is None


# --- the engine's research hook -------------------------------------------------------------


class FakeQuick:
    """The quick pipeline, recording its calls."""

    def __init__(self, note: str | None = None) -> None:
        self.calls: list[Question] = []
        self.note = note

    async def answer(
        self,
        question: Question,
        archive: Archive,
        history: Sequence[Exchange] = (),
        on_event: EventSink | None = None,
    ) -> Outcome:
        self.calls.append(question)
        return Outcome(Answer("A quick answer [1].", "answer", "quick", note=self.note))


def ask(text: str, mode: Mode = "quick") -> Question:
    return Question(text, ThreadKey("console", "local", "c", "t"), "u1", "kb", mode)


def history() -> list[Exchange]:
    return [Exchange(1, "Who owns auth?", None, "John Park [2].", "answer", "quick", 0.0)]


async def test_deep_question_is_researched_and_its_searches_logged() -> None:
    llm = FakeLLM(
        message(use("search", query="bill tripled", speaker="John Park", limit=3)),
        message(use("search", query="x", kb="other")),
        message(text_block("The bill tripled [1].")),
    )
    quick = FakeQuick()
    hook = ResearchRouter(Researcher(llm), quick)
    outcome = await hook.research(ask("Why did we leave?", "deep"), fake_archive(), history(), None)
    assert quick.calls == [] and outcome.answer.mode == "deep"
    assert [c.n for c in outcome.answer.citations] == [1]
    assert outcome.usage.input_tokens > 0
    assert isinstance(outcome.trace, dict) and len(outcome.trace["steps"]) == 2
    assert outcome.searches == [
        SearchRecord(
            "bill tripled",
            SearchFilters(speaker="John Park"),
            ("kickoff#0",),
            outcome.trace["steps"][0]["archive_ms"],
        )
    ]
    first = llm.history[0].messages
    assert first[:2] == [
        {"role": "user", "content": "Who owns auth?"},
        {"role": "assistant", "content": "John Park."},
    ]


@pytest.mark.parametrize(
    ("text", "mode", "default", "deep"),
    [
        ("Why did we leave Auth0?", "quick", "auto", True),
        ("Why did we leave Auth0?", "quick", "quick", False),
        ("When is the cut-over?", "auto", "quick", False),
        ("When is the cut-over?", "quick", "deep", True),
    ],
)
async def test_hook_routes_by_mode_and_setting(
    text: str, mode: Mode, default: Mode, deep: bool
) -> None:
    llm = FakeLLM(message(text_block("Researched.")))
    quick = FakeQuick()
    hook = ResearchRouter(Researcher(llm), quick, default_mode=default)
    outcome = await hook.research(ask(text, mode), fake_archive(), [], None)
    assert (outcome.answer.mode == "deep") is deep
    assert len(quick.calls) == (0 if deep else 1)


async def test_without_a_key_deep_research_answers_quickly_and_says_so() -> None:
    quick = FakeQuick(note=NO_MODEL)
    hook = ResearchRouter(None, quick)
    outcome = await hook.research(ask("Compare A and B", "deep"), fake_archive(), [], None)
    assert outcome.answer.mode == "quick"
    assert outcome.answer.note == f"{NEEDS_API_KEY} {NO_MODEL}"
    auto = await ResearchRouter(None, FakeQuick(), default_mode="auto").research(
        ask("Compare A and B"), fake_archive(), [], None
    )
    assert auto.answer.note is None


async def test_claude_failing_at_once_falls_back_to_a_quick_answer() -> None:
    llm = FakeLLM(LLMError("overloaded", status=529))
    quick = FakeQuick()
    outcome = await ResearchRouter(Researcher(llm), quick).research(
        ask("Why?", "deep"), fake_archive(), [], None
    )
    assert len(quick.calls) == 1 and outcome.answer.note == DEEP_FAILED


def test_from_settings() -> None:
    settings = load_settings(research_mode="auto", research_max_iterations=3)
    hook = ResearchRouter.from_settings(settings, None)
    assert hook.researcher is None and hook.default_mode == "auto"
    with_llm = ResearchRouter.from_settings(settings, FakeLLM())
    assert with_llm.researcher is not None and with_llm.researcher.max_iterations == 3
