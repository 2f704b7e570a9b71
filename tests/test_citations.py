"""Citation markers: parsing, invented numbers, links at the second or the page, labels."""

from __future__ import annotations

import logging
from datetime import date

import pytest

from bot.cite.citations import cited_numbers, label_for, number_sources, parse_numbers, resolve
from retrieval.links.links import segment_link
from retrieval.models import Hit, Segment, Source

LOOM = Source(
    "deep-dive", "Auth deep dive", "video", "https://www.loom.com/share/abc", date(2024, 1, 23)
)
YT = Source(
    "kickoff", "Auth kickoff", "video", "https://www.youtube.com/watch?v=p4Xk", date(2024, 1, 9)
)
PDF = Source("plan", "Auth migration plan", "document", "https://docs.example/plan.pdf")
COURSE = Source("mcp", "Intro to MCP", "course", "https://learn.example/mcp")
AUDIO = Source("retro", "Cut-over retro", "audio", "https://media.example/retro.m4a")


def hit(source: Source, position: int = 0, **seg: object) -> Hit:
    segment = Segment(source.id, position, "text", **seg)  # type: ignore[arg-type]
    return Hit(
        f"id-{source.id}-{segment.position}", segment, source, 1.0, segment_link(source, segment)
    )


SOURCES = number_sources(
    [
        hit(PDF, page=5),
        hit(LOOM, start_s=734.6, end_s=790, speakers=("John Park",)),
        hit(LOOM, position=9, start_s=1500, end_s=1560),
        hit(YT, start_s=65, end_s=120),
        hit(COURSE, lesson=2, lesson_url="https://learn.example/mcp/2"),
        hit(AUDIO, start_s=3725, end_s=3790),
    ]
)


@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("One [1].", [1]),
        ("Two [1, 2].", [1, 2]),
        ("Adjacent [1][3] and [2]", [1, 3, 2]),
        ("Range [2-4]", [2, 3, 4]),
        ("Spaces [ 2 ,3 ]", [2, 3]),
        ("Not a link [1](http://x) nor a year [2024]", []),
    ],
)
def test_parse_markers(text: str, numbers: list[int]) -> None:
    assert cited_numbers(text) == numbers


def test_parse_numbers() -> None:
    assert parse_numbers("2, 5") == [2, 5]
    assert parse_numbers("3\u20135") == [3, 4, 5]
    assert parse_numbers("1,1") == [1]


def test_reply_marker_becomes_the_link_at_the_second() -> None:
    out = resolve("The hosted UI can't be restyled [2], per the plan [1].", SOURCES)
    first, second = out.citations
    assert first.n == 2 and first.link == "https://www.loom.com/share/abc?t=734"
    assert first.label == "Auth deep dive @ 12:14" and first.start_s == 734.6
    assert first.speaker == "John Park"
    assert second.n == 1 and second.link == "https://docs.example/plan.pdf#page=5"
    assert second.label == "Auth migration plan, p. 5" and second.page == 5


def test_links_and_labels_per_kind() -> None:
    by_n = {c.n: c for c in resolve("[1][2][3][4][5][6]", SOURCES).citations}
    assert by_n[4].link == "https://www.youtube.com/watch?v=p4Xk&t=65s"
    assert by_n[4].label == "Auth kickoff @ 1:05"
    assert (
        by_n[5].label == "Intro to MCP, Lesson 2" and by_n[5].link == "https://learn.example/mcp/2"
    )
    assert by_n[6].label == "Cut-over retro @ 1:02:05"
    assert by_n[6].link == "https://media.example/retro.m4a#t=3725"


def test_two_moments_of_one_recording_are_two_citations() -> None:
    out = resolve("Early [2] and later [3].", SOURCES)
    assert [c.n for c in out.citations] == [2, 3]
    assert [c.link for c in out.citations] == [
        "https://www.loom.com/share/abc?t=734",
        "https://www.loom.com/share/abc?t=1500",
    ]


def test_invented_numbers_are_dropped_and_logged_without_text(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, "quorum.citations"):
        out = resolve("Secret plan [9]. Known [1, 9][12] and [2].", SOURCES)
    assert out.text == "Secret plan. Known [1] and [2]."
    assert out.invented == (9, 12)
    assert [c.n for c in out.citations] == [1, 2]
    assert "9" in caplog.text and "Secret" not in caplog.text and "Known" not in caplog.text


def test_repeats_cite_once_in_order_of_first_use() -> None:
    out = resolve("A [3]. B [1]. C [3].", SOURCES)
    assert [c.n for c in out.citations] == [3, 1]
    assert out.text == "A [3]. B [1]. C [3]."


def test_label_falls_back_to_heading_and_title() -> None:
    doc = Source("notes", "Team notes", "document")
    assert label_for(hit(doc, heading="Setup > Tokens")) == "Team notes, Tokens"
    assert label_for(hit(doc)) == "Team notes"
