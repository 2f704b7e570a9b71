"""Extractive quotes link to the moment the quoted sentence is said, not to the start of
the (up to three-minute) passage it came from."""

from __future__ import annotations

from bot.extractive import extractive
from bot.models import NumberedSource
from bot.passages import Sentence, sentences_of, timed
from retrieval.models import Hit, Segment, Source

SOURCE = Source(id="k", title="Kickoff", kind="video", url="https://vimeo.com/1")


def test_sentences_get_times_spread_over_their_window() -> None:
    seg = Segment("k", 0, "First point here. " * 5 + "The invoice tripled.", 600.0, 660.0)
    stamped = timed(seg, sentences_of(seg))
    assert stamped[0].start_s == 600.0
    last = stamped[-1]
    assert last.text == "The invoice tripled." and 645 < (last.start_s or 0) < 660
    assert [s.start_s for s in stamped] == sorted(s.start_s for s in stamped)  # type: ignore[type-var]


def test_quote_links_to_its_own_moment() -> None:
    seg = Segment("k", 0, "Hello all. " * 20 + "The Auth0 invoice tripled last month.", 0.0, 60.0)
    hit = Hit("id", seg, SOURCE, 1.0, "https://vimeo.com/1#t=0s")
    from bot.passages import Passage

    passage = Passage(SOURCE, (hit,), frozenset({"id"}), 1.0, tuple(timed(seg, sentences_of(seg))))
    text = extractive(
        "why did the auth0 invoice triple", [(NumberedSource(1, hit, "Kickoff @ 0:00"), passage)]
    )
    # the sentence starts at ~48 s of the 60 s window; the link leads in by 2 s
    assert "[Kickoff @ 0:46](https://vimeo.com/1#t=46s)" in text
    assert 'The Auth0 invoice tripled last month." [1]' in text


def test_sentence_without_time_keeps_the_passage_label() -> None:
    s = Sentence(None, "Page text.")
    assert s.start_s is None
