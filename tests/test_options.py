"""Search options written inside a chat question."""

from __future__ import annotations

from datetime import date

import pytest

from adapters.chat.options import describe, parse_options
from retrieval.errors import InvalidInput
from retrieval.models import SearchFilters


def test_all_options_are_taken_out_of_the_question() -> None:
    text, filters = parse_options(
        'who chose Cognito? speaker:John after:2024-01-01 before:2024-06-30 source:"Auth deep dive"'
    )
    assert text == "who chose Cognito?"
    assert filters == SearchFilters(
        speaker="John",
        after=date(2024, 1, 1),
        before=date(2024, 6, 30),
        source="Auth deep dive",
    )


@pytest.mark.parametrize(
    ("raw", "speaker", "source"),
    [
        ("x speaker:'Mary Ann'", "Mary Ann", None),
        ("x source:\u201cAuth deep dive\u201d", None, "Auth deep dive"),  # curly quotes
        ("x Speaker:John SOURCE:retro", "John", "retro"),
        ("speaker:John in the middle", "John", None),
    ],
)
def test_quotes_case_and_position(raw: str, speaker: str | None, source: str | None) -> None:
    _, filters = parse_options(raw)
    assert (filters.speaker, filters.source) == (speaker, source)


def test_words_that_are_not_options_stay() -> None:
    raw = "see https://example.com/a:b and note: before: we had Auth0"
    assert parse_options(raw) == (raw, SearchFilters())


def test_kind_and_lesson() -> None:
    _, filters = parse_options("x kind:Video lesson:3")
    assert (filters.kind, filters.lesson) == ("video", 3)
    _, welcome = parse_options("x lesson:0")  # course files start at Lesson 0
    assert welcome.lesson == 0


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("x after:2024-13-01", "after:2024-13-01 is not a date; use YYYY-MM-DD"),
        ("x before:yesterday", "before:yesterday is not a date"),
        ("x after:2024-06-01 before:2024-01-01", "is later than before:2024-01-01"),
        ('x speaker:""', "speaker: needs a value"),
        ("x speaker:a speaker:b", "speaker: is given twice"),
        ("x kind:podcast", "kind:podcast is not one of video, audio, document, course"),
        ("x lesson:two", "lesson:two is not a lesson number"),
    ],
)
def test_bad_options_say_what_is_wrong(raw: str, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        parse_options(raw)


def test_describe_round_trips() -> None:
    filters = SearchFilters(speaker="Mary Ann", source="retro", after=date(2024, 1, 1), lesson=2)
    text = describe(filters)
    assert text == 'speaker:"Mary Ann" source:retro after:2024-01-01 lesson:2'
    assert parse_options(f"q {text}") == ("q", filters)
