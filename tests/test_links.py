"""Deep links: each platform's way of opening a recording at a second, PDFs at a page."""

from __future__ import annotations

import pytest

from retrieval.links.links import format_timestamp, media_link, page_link, segment_link
from retrieval.models import Segment, Source


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://www.youtube.com/watch?v=abc", "https://www.youtube.com/watch?v=abc&t=734s"),
        ("https://youtu.be/abc", "https://youtu.be/abc?t=734s"),
        ("https://www.youtube.com/watch?v=abc&t=5s", "https://www.youtube.com/watch?v=abc&t=734s"),
        ("https://vimeo.com/912204613", "https://vimeo.com/912204613#t=734s"),
        ("https://www.loom.com/share/f00", "https://www.loom.com/share/f00?t=734"),
        ("https://media.example/a.mp4", "https://media.example/a.mp4#t=734"),
        ("https://media.example/a.mp4#old", "https://media.example/a.mp4#t=734"),
    ],
)
def test_media_links_open_at_the_second(url: str, expected: str) -> None:
    assert media_link(url, 734.9) == expected


def test_pdf_and_segment_links() -> None:
    assert page_link("https://d.example/plan.pdf", 5) == "https://d.example/plan.pdf#page=5"
    video = Source(id="v", title="V", kind="video", url="https://vimeo.com/1")
    assert segment_link(video, Segment("v", 0, "t", start_s=61.0)) == "https://vimeo.com/1#t=61s"
    doc = Source(id="d", title="D", kind="document", url="https://d.example/plan.pdf")
    assert segment_link(doc, Segment("d", 0, "t", page=3)) == "https://d.example/plan.pdf#page=3"
    course = Source(id="c", title="C", kind="course", url="https://learn.example/c")
    lesson = Segment("c", 0, "t", lesson=2, lesson_url="https://learn.example/c/2")
    assert segment_link(course, lesson) == "https://learn.example/c/2"
    assert segment_link(Source(id="x", title="X", kind="video"), Segment("x", 0, "t")) is None


def test_timestamps() -> None:
    assert format_timestamp(734) == "12:14"
    assert format_timestamp(3725) == "1:02:05"
    assert format_timestamp(5.9) == "0:05"
