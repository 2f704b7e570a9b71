"""Rendering answers for Discord (pure functions) and the throttled progress message."""

from __future__ import annotations

import asyncio
import re
import time
from datetime import date

import pytest

from adapters.chat.live import LiveEdits
from adapters.chat.view import source_lines
from adapters.discord.commands import choices, slash_filters
from adapters.discord.render import (
    CONTENT_LIMIT,
    PLACEHOLDER,
    link_citations,
    progress_text,
    render_answer,
    safe_url,
    source_embeds,
    split_text,
    thread_name,
)
from adapters.discord.ui import FeedbackButton, feedback_view
from bot.models import Answer, Citation, PartialAnswer, ProgressEvent
from retrieval.errors import InvalidInput

LINK = re.compile(r"\[\[\d+\]\]\(<[^>]+>\)")


def cite(
    n: int, link: str | None = "https://youtu.be/abc?t=734", label: str = "Auth deep dive @ 12:14"
) -> Citation:
    return Citation(n, f"h{n}", "Auth deep dive", link, label, speaker="Alice")


def test_citations_become_masked_links_that_keep_their_number() -> None:
    text = "Cognito [1], then Okta [2][3] and [1, 3]; see [4]."
    cites = [cite(1), cite(2, link="https://x.test/a video (1).mp4#t=5"), cite(3, link=None)]
    out = link_citations(text, cites)
    assert out == (
        "Cognito [[1]](<https://youtu.be/abc?t=734>), then Okta "
        "[[2]](<https://x.test/a%20video%20%281%29.mp4#t=5>)[3] and "
        "[[1]](<https://youtu.be/abc?t=734>)[3]; see."
    )  # [4] is no source of this answer: dropped, as on every platform


def test_only_web_links_are_linked() -> None:
    assert safe_url("file:///home/me/auth.pdf#page=5") is None
    assert safe_url("https://a.test/x") == "https://a.test/x"
    assert link_citations("[1]", [cite(1, link="/local/path.pdf")]) == "[1]"


def test_splitting_prefers_paragraphs_then_lines_and_never_cuts_a_link() -> None:
    link = "[[7]](<https://youtu.be/abc?t=734&list=" + "x" * 60 + ">)"
    para = ("word " * 60).strip() + " " + link
    text = "\n\n".join([para] * 20)
    pieces = split_text(text)
    assert all(len(p) <= CONTENT_LIMIT for p in pieces)
    assert sum(len(LINK.findall(p)) for p in pieces) == 20
    assert all(p.endswith(link) for p in pieces)  # cut at paragraph ends
    assert "\n\n".join(pieces) == text

    one_line = " ".join(["token"] * 300 + [link] + ["token"] * 300)
    pieces = split_text(one_line, limit=500)
    assert all(len(p) <= 500 for p in pieces)
    assert sum(len(LINK.findall(p)) for p in pieces) == 1


def test_a_link_across_the_limit_moves_whole_to_the_next_piece() -> None:
    link = "[[1]](<https://example.test/" + "y" * 80 + ">)"
    text = "a" * 450 + link  # no spaces at all: the hard cut must step back to the link
    first, second = split_text(text, limit=500)
    assert first == "a" * 450 and second == link


def test_a_code_block_cut_in_two_is_closed_and_reopened() -> None:
    code = "```python\n" + "\n".join(f"x = {i}" for i in range(200)) + "\n```"
    pieces = split_text(code, limit=400)
    assert len(pieces) > 2
    for p in pieces:
        assert len(p) <= 400 and p.count("```") % 2 == 0
        assert p.startswith("```python\n")


def test_sources_embed_lists_each_citation_with_link_time_and_speaker() -> None:
    cites = (cite(2, label="Roadmap *Q3* @ 1:02:03"), cite(1))
    (embed,) = source_embeds(source_lines(Answer("", "answer", "quick", citations=cites)))
    assert embed.title == "Sources"
    assert embed.description == (
        "`[1]` [Auth deep dive @ 12:14](https://youtu.be/abc?t=734) · Alice\n"
        "`[2]` [Roadmap \\*Q3\\* @ 1:02:03](https://youtu.be/abc?t=734) · Alice"
    )


def test_many_sources_stay_within_embed_limits() -> None:
    cites = [cite(n, label=f"Meeting {n} " + "z" * 250 + " @ 1:00") for n in range(1, 120)]
    parts = render_answer(Answer("See [1].", "answer", "quick", citations=tuple(cites)))
    assert len(parts) >= 2
    for part in parts:
        assert len(part.content) <= 2000 and len(part.embeds) <= 10
        assert sum(len(e) for e in part.embeds) <= 6000
        assert all(len(e.description or "") <= 4096 for e in part.embeds)
    lines = [ln for p in parts for e in p.embeds for ln in (e.description or "").splitlines()]
    assert len(lines) == 119


def test_render_kinds() -> None:
    err = render_answer(Answer("Claude is unreachable; try again soon.", "error", "quick"))
    assert [p.content for p in err] == ["⚠️ Claude is unreachable; try again soon."]
    assert err[0].embeds == ()
    found = render_answer(Answer("Nothing about that.", "nothing_found", "quick"), "why")
    assert found[0].content == "Nothing about that.\n\n-# why" and found[0].embeds == ()
    extractive = render_answer(
        Answer("> quoted [1]", "extractive", "quick", citations=(cite(1),), note="No API key.")
    )
    assert extractive[0].content.endswith("-# No API key.") and len(extractive[0].embeds) == 1


def test_feedback_buttons_only_for_rateable_answers() -> None:
    view = feedback_view(Answer("a", "answer", "quick", exchange_id=42))
    assert view is not None and view.timeout is None and view.is_persistent()
    ids = [getattr(item, "custom_id", None) for item in view.children]
    assert ids == ["quorum:fb:up:42", "quorum:fb:down:42"]
    assert feedback_view(Answer("a", "answer", "quick")) is None
    assert feedback_view(Answer("a", "error", "quick", exchange_id=1)) is None
    assert FeedbackButton.__discord_ui_compiled_template__.fullmatch("quorum:fb:down:7")


def test_progress_and_thread_names() -> None:
    assert progress_text(ProgressEvent("searching 'Auth0 Cognito'")) == (
        "-# searching 'Auth0 Cognito'…"
    )
    assert progress_text(ProgressEvent("Writing the answer...")) == "-# Writing the answer…"
    long = progress_text(PartialAnswer("w " * 3000))
    assert len(long) <= 2000 and long.endswith("-# writing…")
    assert progress_text(PartialAnswer("  ")) == PLACEHOLDER
    assert thread_name("  what did we\n decide?") == "what did we"
    assert len(thread_name("q" * 300)) == 100
    assert thread_name("") == "Quorum"


def test_choices_filter_and_cap() -> None:
    names = ["Bob", "Alice", "alan", "Sal"] + [f"Al {i:02}" for i in range(40)] + ["Alice"]
    got = [c.value for c in choices(names, "AL")]
    assert len(got) == 25 and got[:3] == ["Al 00", "Al 01", "Al 02"] and "Bob" not in got
    assert [c.value for c in choices(names, "")][:2] == ["Al 00", "Al 01"]
    assert choices(["x" * 101], "x") == []


def test_slash_filters() -> None:
    f = slash_filters(speaker="Alice", after="2024-01-01", before="2024-02-01")
    assert f.speaker == "Alice" and f.after == date(2024, 1, 1) and f.before == date(2024, 2, 1)
    assert slash_filters().is_empty()
    with pytest.raises(InvalidInput, match="swap them"):
        slash_filters(after="2024-03-01", before="2024-02-01")


async def test_live_message_throttles_and_never_overwrites_the_final() -> None:
    edits: list[tuple[float, str]] = []

    async def edit(text: str) -> None:
        await asyncio.sleep(0.02)
        edits.append((time.monotonic(), text))

    live = LiveEdits(edit, progress_text, 0.2)
    t0 = time.monotonic()
    for i in range(30):
        await live.on_event(PartialAnswer(f"part {i}"))
        await asyncio.sleep(0.02)
    await live.close()
    closed = time.monotonic()
    assert 2 <= len(edits) <= 5  # ~0.6 s of events at one edit per 0.2 s
    assert all(b[0] - a[0] >= 0.18 for a, b in zip(edits, edits[1:], strict=False))
    assert edits[0][0] - t0 >= 0.18  # the placeholder itself counts as the first edit
    assert all(at <= closed for at, _ in edits)
    await live.on_event(PartialAnswer("late"))
    await asyncio.sleep(0.3)
    assert edits[-1][1] != "late\n-# writing…"
