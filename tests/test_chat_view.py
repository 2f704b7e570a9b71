"""What every platform shows of an answer comes from one place (``adapters.chat.view``):
the core's citation grammar links ``[2-4]``, ``[2; 5]`` and ``[ 3 ]`` on Slack, Discord
and the terminal alike, and one rule picks the listed sources and the feedback buttons."""

from __future__ import annotations

import re

import pytest

from adapters.chat.view import source_lines, wants_feedback
from adapters.cli.terminal import linked_markdown
from adapters.discord.render import render_answer as discord_answer
from adapters.discord.ui import feedback_view
from adapters.slack.render import answer_messages
from bot.models import Answer, Citation, NumberedSource
from retrieval.models import Hit, Segment, Source

TEXT = "Cut-over moved [2-4]. The budget held [2; 5]. Rollback was rehearsed [ 3 ]."


def cites() -> tuple[Citation, ...]:
    return tuple(
        Citation(n, f"h{n}", "Retro", f"https://media.test/retro.mp4#t={n * 10}", f"Retro @ {n}:00")
        for n in range(1, 6)
    )


def slack_links(answer: Answer) -> list[tuple[str, str]]:
    text = "".join(
        b["text"]["text"] for b in answer_messages(answer)[0].blocks if b["type"] == "section"
    )
    return re.findall(r"<https://media\.test/retro\.mp4#t=(\d+)\|(\d+)>", text)


def discord_links(answer: Answer) -> list[tuple[str, str]]:
    return re.findall(
        r"\[\[(\d+)\]\]\(<https://media\.test/retro\.mp4#t=(\d+)>\)",
        discord_answer(answer)[0].content,
    )


def terminal_links(answer: Answer) -> list[tuple[str, str]]:
    return re.findall(
        r"\[\\\[(\d+)\\\]\]\(https://media\.test/retro\.mp4#t=(\d+)\)",
        linked_markdown(answer.text, answer.citations),
    )


def test_every_marker_form_links_every_number_on_every_platform() -> None:
    answer = Answer(TEXT, "answer", "quick", citations=cites())
    wanted = ["2", "3", "4", "2", "5", "3"]
    assert [n for _, n in slack_links(answer)] == wanted
    assert [n for n, _ in discord_links(answer)] == wanted
    assert [n for n, _ in terminal_links(answer)] == wanted
    for n, second in discord_links(answer) + terminal_links(answer):
        assert int(second) == int(n) * 10  # each number opens its own moment


def test_a_number_that_is_not_a_source_is_dropped_everywhere() -> None:
    answer = Answer("Held [9].", "answer", "quick", citations=cites())
    assert "[9]" not in answer_messages(answer)[0].blocks[0]["text"]["text"]
    assert "9" not in discord_answer(answer)[0].content
    assert "9" not in linked_markdown(answer.text, answer.citations)


def test_speaker_is_named_once_whatever_its_case() -> None:
    named = Citation(1, "h1", "Retro", None, "Retro @ 1:00 — priya raman", speaker="Priya Raman")
    other = Citation(2, "h2", "Retro", None, "Retro @ 2:00", speaker="Marcus")
    lines = source_lines(Answer("", "answer", "quick", citations=(other, named)))
    assert [(s.n, s.speaker) for s in lines] == [(1, None), (2, "Marcus")]


@pytest.mark.parametrize(
    ("kind", "rated"),
    [
        ("answer", True),
        ("extractive", True),
        ("nothing_found", True),
        ("help", False),
        ("error", False),
    ],
)
def test_feedback_buttons_follow_one_rule_on_both_platforms(kind: str, rated: bool) -> None:
    answer = Answer("x", kind, "quick", exchange_id=7)  # type: ignore[arg-type]
    slack_has = any(
        b.get("block_id") == "quorum_feedback" for m in answer_messages(answer) for b in m.blocks
    )
    assert wants_feedback(answer) is rated
    assert slack_has is rated
    assert (feedback_view(answer) is not None) is rated


def test_a_citation_that_links_out_keeps_its_transcript_one_click_away() -> None:
    view = "https://quorum.test/v/tok.sig"
    hosted = Source("retro", "Retro", "video", "https://youtu.be/abc", view=view)
    local = Source("notes", "Notes", "document", None, view="https://quorum.test/v/t2.s2")
    seg = Segment("retro", 0, "We fix forward.", start_s=60.0, end_s=70.0)
    doc = Segment("notes", 3, "Roll back only in the window.", page=2)
    answer = Answer(
        "We fixed forward [1], within the window [2].",
        "answer",
        "quick",
        citations=(
            Citation(1, "h1", "Retro", "https://youtu.be/abc?t=62s", "Retro @ 1:02", 62.0),
            Citation(2, "h2", "Notes", "https://quorum.test/v/t2.s2#page=2", "Notes, p. 2"),
        ),
        sources=(
            NumberedSource(1, Hit("h1", seg, hosted, 1.0), "Retro @ 1:00"),
            NumberedSource(2, Hit("h2", doc, local, 1.0), "Notes, p. 2"),
        ),
    )
    first, second = source_lines(answer)
    assert first.transcript == f"{view}#t=62"  # the page, at the cited second
    assert second.transcript is None  # its link already is the page
    slack = str(answer_messages(answer)[0].blocks)
    assert f"<{view}#t=62|transcript>" in slack
    assert f"[transcript]({view}#t=62)" in "".join(
        e.description or "" for e in discord_answer(answer)[0].embeds
    )
