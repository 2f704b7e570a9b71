"""Cutting units into segments: windows, overlap, speaker turns, sentences, places."""

from __future__ import annotations

import pytest

from retrieval.models import Segment
from retrieval.write.chunking import ChunkConfig, Unit, chunk, ends_sentence, split_sentences


def span(segment: Segment) -> tuple[float, float]:
    """A media segment's (start, end); fails on a segment without times."""
    assert segment.start_s is not None and segment.end_s is not None
    return segment.start_s, segment.end_s


def cues(speaker: str, start: float, count: int, length: float = 5.0) -> list[Unit]:
    """``count`` back-to-back one-sentence cues by ``speaker`` from ``start``."""
    return [
        Unit(f"{speaker} point {n}.", start + n * length, start + (n + 1) * length, speaker)
        for n in range(count)
    ]


def test_media_windows_are_bounded_exact_and_overlapping() -> None:
    units = cues("Ann", 0, 30)  # 0..150 s
    segments = chunk(units, "talk")
    assert [s.position for s in segments] == list(range(len(segments)))
    assert len(segments) >= 3
    starts = {u.start_s for u in units}
    ends = {u.end_s for u in units}
    for seg in segments:
        assert seg.source_id == "talk"
        assert seg.start_s in starts and seg.end_s in ends  # cue times, not rounded
        start, end = span(seg)
        assert end - start <= 60
    assert segments[0].start_s == 0 and segments[-1].end_s == 150
    for before, after in zip(segments, segments[1:], strict=False):
        # The next window repeats the last cue(s), up to 10 s of them.
        assert span(before)[1] - 10 <= span(after)[0] < span(before)[1]
        assert before.text.split(". ")[-1].rstrip(".") in after.text
    said = " ".join(s.text for s in segments)
    assert all(u.text in said for u in units)


def test_window_ends_where_the_speaker_changes() -> None:
    units = cues("John", 0, 7) + cues("Priya", 35, 9)  # John 0-35 s, Priya 35-80 s
    first, second = chunk(units, "m")
    assert (first.start_s, first.end_s, first.speakers) == (0, 35, ("John",))
    assert second.end_s == 80
    assert second.speakers == ("John", "Priya")  # John's last cues repeated as overlap
    assert second.speaker == "John"
    assert "John: John point 5." in second.text and "\nPriya: Priya point 0." in second.text
    assert "John:" not in first.text  # one speaker: no inline label


def test_window_does_not_end_inside_a_sentence() -> None:
    # Every sentence is spread over two cues, so half the cue boundaries are mid-sentence.
    halves = [("We moved the auth", "service to the new cluster."), ("Then we", "fixed it.")]
    # A one-cue sentence first, so a plain 60 s window would end mid-sentence.
    units = [Unit("Hello.", 0, 5, "Ann")]
    for n in range(12):
        a, b = halves[n % 2]
        t = 5 + n * 10.0
        units += [Unit(a, t, t + 5, "Ann"), Unit(b, t + 5, t + 10, "Ann")]
    segments = chunk(units, "m")
    assert len(segments) > 1
    assert all(ends_sentence(s.text) for s in segments)


def test_overlong_cue_is_split_at_sentences_with_interpolated_times() -> None:
    text = " ".join(f"Sentence {n} explains one more detail of the rollout." for n in range(40))
    segments = chunk([Unit(text, 100.0, 220.0, "Ann")], "m")
    assert len(segments) >= 2
    assert segments[0].start_s == 100.0 and segments[-1].end_s == 220.0
    for seg in segments:
        start, end = span(seg)
        assert end - start <= 60 and len(seg.text) <= 1200
        assert seg.text.startswith("Sentence ") and seg.text.endswith("rollout.")
        assert seg.speakers == ("Ann",)
    # Times follow the share of characters: the middle sentence sits mid-cue.
    middle = next(s for s in segments if "Sentence 20 " in s.text)
    assert span(middle)[0] < 160 < span(middle)[1]


def test_unpunctuated_text_is_cut_between_words() -> None:
    words = " ".join(f"word{n}" for n in range(600))
    segments = chunk([Unit(words, page=1)], "doc", ChunkConfig(max_chars=500, overlap_chars=50))
    assert len(segments) > 1
    for seg in segments:
        assert len(seg.text) <= 500
        assert all(w.startswith("word") and w[4:].isdigit() for w in seg.text.split())


def test_text_windows_overlap_and_stay_on_their_page() -> None:
    page_one = " ".join(f"Page one sentence {n} about the paging policy." for n in range(60))
    units = [Unit(page_one, page=1), Unit("Page two is short.", page=2)]
    segments = chunk(units, "doc")
    ones = [s for s in segments if s.page == 1]
    assert len(ones) >= 3
    assert segments[-1].page == 2 and segments[-1].text == "Page two is short."
    for seg in ones:
        assert len(seg.text) <= 1200 and "Page two" not in seg.text
        assert seg.start_s is None and seg.end_s is None
    for before, after in zip(ones, ones[1:], strict=False):
        # The next window opens with the last sentences of this one, at most 150 chars.
        shared = [k for k in range(1, 151) if before.text[-k:] == after.text[:k]]
        assert shared and after.text[: shared[-1]].startswith("Page one sentence")


def test_sections_and_lessons_are_never_merged() -> None:
    units = [
        Unit("Page the on-call engineer.", heading="On-call > Paging"),
        Unit("Escalate after 15 minutes.", heading="On-call > Escalation"),
        Unit("Welcome to the course.", lesson=0, lesson_title="Welcome", speaker="Ada"),
        Unit("Servers expose tools.", lesson=1, lesson_title="Servers", speaker="Ada"),
    ]
    segments = chunk(units, "x")
    assert [(s.heading, s.lesson) for s in segments] == [
        ("On-call > Paging", None),
        ("On-call > Escalation", None),
        (None, 0),
        (None, 1),
    ]
    assert segments[3].lesson_title == "Servers" and segments[3].speakers == ("Ada",)


def test_untimed_turns_carry_speaker_labels() -> None:
    units = [Unit("Shall we ship?", speaker="John"), Unit("Yes, on Friday.", speaker="Priya")]
    (segment,) = chunk(units, "x")
    assert segment.text == "John: Shall we ship?\nPriya: Yes, on Friday."
    assert segment.speakers == ("John", "Priya")


def test_sentence_splitting_keeps_abbreviations_with_lowercase_after() -> None:
    assert split_sentences("Use a flag, e.g. the beta one. Then ship! Done?") == [
        "Use a flag, e.g. the beta one.",
        "Then ship!",
        "Done?",
    ]


def test_config_rejects_overlap_as_large_as_the_window() -> None:
    with pytest.raises(ValueError, match="overlap_seconds"):
        ChunkConfig(max_seconds=10, overlap_seconds=10)
    with pytest.raises(ValueError, match="overlap_chars"):
        ChunkConfig(max_chars=100, overlap_chars=200)
