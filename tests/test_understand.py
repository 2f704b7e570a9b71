"""Reading speakers, recordings and dates out of a question (``bot.answer.understand``,
``bot.answer.dates``), and which sources a typed name selects (``retrieval.search.names``): one test
per rule, and a set of questions that name a speaker's name as a topic, which must
understand nothing."""

from __future__ import annotations

from datetime import date

import pytest

from bot.answer.dates import named_dates
from bot.answer.understand import choice_note, named_source, named_speaker, understand
from retrieval.models import SearchFilters, Source
from retrieval.search.names import choose_sources

PEOPLE = ["John Park", "Priya Raman", "Marcus Lee", "Mark Chen", "Will Smith", "Grace Hopper"]
ROLES = ["Marketing", "Project Manager", "Industrial Designer", "User Interface"]
TODAY = date(2024, 3, 5)  # a Tuesday
KICKOFF = Source(
    "2024-01-09-auth-kickoff",
    "Auth kickoff: leaving Auth0?",
    "video",
    recorded_at=date(2024, 1, 9),
    speakers=("John Park", "Priya Raman"),
)
RETRO = Source(
    "2024-02-27-cutover-retro",
    "Cut-over retro",
    "audio",
    recorded_at=date(2024, 2, 27),
    speakers=("Priya Raman", "Marcus Lee"),
)
REVIEW = Source("review", "Cognito migration review", "audio", recorded_at=date(2024, 2, 6))
SOURCES = [KICKOFF, RETRO, REVIEW]


@pytest.mark.parametrize(
    ("question", "speaker"),
    [
        ("What did John say about migrating from Auth0 to Cognito?", "John Park"),  # first name
        ("What did John Park say about Cognito?", "John Park"),  # full name
        ("what did john say about cognito", "John Park"),  # any case
        ("What were John's reasons for leaving?", "John Park"),  # possessive
        ("What did Park suggest for the migration?", "John Park"),  # last name
        ("What did Marcus originally propose?", "Marcus Lee"),  # an adverb before the verb
        ("According to Priya, what broke during cut-over?", "Priya Raman"),
        ("What did Marcus say when Priya asked about tokens?", "Marcus Lee"),  # the first
        ("What did the marketing expert think about the remote?", "Marketing"),  # a role
        ("What did Marketing say about the price?", "Marketing"),
        ("What was the project manager's view on cost?", "Project Manager"),
        ("What did the UI designer propose?", "User Interface"),  # initials + a noun
        ("What did the industrial designer present?", "Industrial Designer"),
    ],
)
def test_speaker_whose_words_are_asked_for(question: str, speaker: str) -> None:
    assert named_speaker(question, PEOPLE + ROLES) == speaker


# A speaker's name as a topic, an everyday word, or several people: nothing is read.
FALSE_POSITIVES = [
    "What was said about marketing?",
    "Who picked the marketing strategy?",
    "Is the grace period for tokens configurable?",
    "Did anyone mark the ticket as done?",
    "What will we say to customers about the outage?",
    "Where do we park the SAML question?",
    "How does the project plan handle rollback?",
    "Which user interface changes were agreed?",
    "What did Marcus and Priya say about tokens?",  # two people
    "Why did we leave Auth0?",
    "Summarize the discussion about the remote control design",
]


@pytest.mark.parametrize("question", FALSE_POSITIVES)
def test_names_as_topics_are_not_speakers(question: str) -> None:
    assert named_speaker(question, PEOPLE + ROLES) is None


def test_a_first_name_two_people_share_is_ambiguous() -> None:
    assert named_speaker("What did John say?", ["John Park", "John Smith"]) is None
    assert named_speaker("What did John Smith say?", ["John Park", "John Smith"]) == "John Smith"


def test_two_spellings_of_one_person_are_one_person() -> None:
    names = ["Hon. Bill Morneau", "Hon. Bill Morneau (Minister of Finance)"]
    assert named_speaker("What did Bill Morneau say about the wage subsidy?", names) == names[0]


def test_a_letter_names_a_speaker_inside_its_recording() -> None:
    meeting = Source("bed002", "Bed002", "audio", speakers=("PhD C", "Professor B", "Grad E"))
    others = ["PhD C", "Professor C", "Grad E"]  # across the archive, "C" is two people
    q = "What did C think about setting up the recording equipment in Bed002?"
    got = understand(q, [meeting], others)
    assert (got.source, got.speaker) == (meeting, "PhD C")
    assert named_speaker("What did C think?", others) is None
    assert named_speaker("What did a user think?", ["PhD A"]) is None  # "a" is not "A"


@pytest.mark.parametrize(
    ("question", "source"),
    [
        ("What did John say at the kickoff?", KICKOFF),  # short name after "at the"
        ("What went wrong according to the cut-over retro?", RETRO),
        ("What was decided in the Cognito migration review?", REVIEW),  # whole title
        ("What was decided in Auth kickoff about cost?", KICKOFF),  # capitalised, no article
        ("Why did we leave Auth0?", None),
        ("What problems did we hit in Cognito?", None),  # a topic, not the review's name
    ],
)
def test_recording_named_in_the_question(question: str, source: Source | None) -> None:
    assert named_source(question, SOURCES) == source


def test_a_recording_id_in_the_question() -> None:
    meetings = [Source(i, i.upper(), "audio") for i in ("es2004a", "es2004b", "bed003")]
    assert named_source("What did the group decide in ES2004a?", meetings) == meetings[0]
    assert named_source("Summarize bed003 please", meetings) == meetings[2]
    assert named_source("What was decided in ES2004?", meetings) is None


@pytest.mark.parametrize(
    ("question", "after", "before", "label"),
    [
        ("What did we decide last week?", date(2024, 2, 26), date(2024, 3, 3), "last week"),
        ("What happened this week?", date(2024, 3, 4), TODAY, "this week"),
        ("What came up yesterday?", date(2024, 3, 4), date(2024, 3, 4), "yesterday"),
        ("What was said last month?", date(2024, 2, 1), date(2024, 2, 29), "last month"),
        ("What was agreed in January 2024?", date(2024, 1, 1), date(2024, 1, 31), "Jan 2024"),
        ("What was agreed in November?", date(2023, 11, 1), date(2023, 11, 30), "Nov 2023"),
        ("What did we plan in 2023?", date(2023, 1, 1), date(2023, 12, 31), "2023"),
        ("What happened on January 9?", date(2024, 1, 9), date(2024, 1, 9), "Jan 9, 2024"),
        ("Notes from 2024-02-27?", date(2024, 2, 27), date(2024, 2, 27), "2024-02-27"),
        ("What changed in the past two weeks?", date(2024, 2, 20), TODAY, "the past 2 weeks"),
        (
            "What happened on January 9 in January 2024?",
            date(2024, 1, 9),
            date(2024, 1, 9),
            "Jan 9, 2024",
        ),  # a day inside the month it also names is the day
    ],
)
def test_dates_relative_to_the_question(
    question: str, after: date, before: date, label: str
) -> None:
    got = named_dates(question, TODAY)
    assert got is not None and (got.after, got.before, got.label) == (after, before, label)


@pytest.mark.parametrize(
    "question",
    [
        "What may we change about the login page?",  # the verb, not the month
        "What happened last week and in 2022?",  # two ranges: ambiguous
        "Why did we leave Auth0 in the first place?",
        "What is the 2024 roadmap?",
    ],
)
def test_no_date_read(question: str) -> None:
    assert named_dates(question, TODAY) is None


def test_understood_together_and_described() -> None:
    got = understand("What did John say at the kickoff in January 2024?", SOURCES, PEOPLE, TODAY)
    assert (got.source, got.speaker) == (KICKOFF, "John Park")
    assert got.describe() == (
        "Searched John Park's remarks in *Auth kickoff: leaving Auth0?*, Jan 2024 first."
    )
    narrowed = got.narrow(SearchFilters())
    assert narrowed.speaker == "John Park" and narrowed.source_ids == (KICKOFF.id,)
    assert (narrowed.after, narrowed.before) == (date(2024, 1, 1), date(2024, 1, 31))


def test_a_date_no_recording_falls_in_is_dropped() -> None:
    assert understand("What did we say in 2022?", SOURCES, PEOPLE, TODAY).dates is None
    assert understand("What did we say in 2022?", SOURCES, PEOPLE, None).is_empty()


@pytest.mark.parametrize(
    ("name", "ids", "exact"),
    [
        ("Bed003", ("bed003",), True),  # never Bed008 as well
        ("ES2004a", ("es2004a",), True),  # never ES2004b-d
        ("es2004a", ("es2004a",), True),
        ("Lecture 3", ("lecture-3",), True),  # its id; never Lecture 8
        ("3 graphs", ("lecture-3",), False),  # whole words of one title
        ("lecture 3: graphs", ("lecture-3",), True),  # the whole title, any case
        ("Lecture", ("lecture-3", "lecture-8"), False),  # whole words: both lectures
        ("ES2004", ("es2004a", "es2004b"), False),  # fuzzy when nothing else matches
        ("lectur 8", ("lecture-8",), False),
        ("no such talk", (), False),
    ],
)
def test_exact_source_names_win(name: str, ids: tuple[str, ...], exact: bool) -> None:
    sources = [
        Source("bed003", "Bed003", "audio"),
        Source("bed008", "Bed008", "audio"),
        Source("es2004a", "ES2004a", "audio"),
        Source("es2004b", "ES2004b", "audio"),
        Source("lecture-3", "Lecture 3: Graphs", "video"),
        Source("lecture-8", "Lecture 8: Trees", "video"),
    ]
    choice = choose_sources(name, sources)
    assert (choice.ids, choice.exact) == (ids, exact)
    note = choice_note(name, choice, sources)
    if exact or not ids:
        assert note is None
    else:
        assert note is not None and all(s.title in note for s in sources if s.id in ids)
