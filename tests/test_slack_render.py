"""Markdown -> Slack mrkdwn, citations as links, and Block Kit within Slack's limits (the
emulator's validator is the judge of the limits)."""

from __future__ import annotations

import pytest

from adapters.slack.render import (
    ACTION_DOWN,
    ACTION_UP,
    MAX_BLOCKS,
    SECTION_LIMIT,
    answer_messages,
    asked_message,
    feedback_recorded,
    partial_message,
    progress_message,
    split_mrkdwn,
    to_mrkdwn,
)
from bot.models import Answer, Citation, NumberedSource
from retrieval.models import Hit, Segment, Source
from tests.emulators.slack import validate_blocks

DIVE = Citation(1, "h1", "Auth deep dive", "https://youtu.be/abc?t=734", "Auth deep dive @ 12:14")
PLAN = Citation(
    2, "h2", "Auth migration plan", "https://x.test/plan.pdf#page=5", "Auth migration plan, p. 5"
)
NOTES = Citation(3, "h3", "Team notes", None, "Team notes > Setup")
CITES = {c.n: c for c in (DIVE, PLAN, NOTES)}


@pytest.mark.parametrize(
    ("markdown", "mrkdwn"),
    [
        ("**bold** and __also__", "*bold* and *also*"),
        ("*italic* and _italic_", "_italic_ and _italic_"),
        ("~~gone~~", "~gone~"),
        ("# Decision\n## Why", "*Decision*\n*Why*"),
        ("### **Bold** heading", "*Bold heading*"),
        ("- one\n* two\n  - nested", "• one\n• two\n    ◦ nested"),
        ("1. first\n2) second", "1. first\n2. second"),
        ("- [x] done\n- [ ] todo", "• ☑ done\n• ☐ todo"),
        ("> quoted **words**", ">quoted *words*"),
        ("see [the docs](https://d.test/a?b=1&c=2)", "see <https://d.test/a?b=1&amp;c=2|the docs>"),
        ("auto <https://d.test/x>", "auto <https://d.test/x>"),
        ("`a < b && **c**`", "`a &lt; b &amp;&amp; **c**`"),
        ("```python\nif a < b:\n    **x**\n```", "```\nif a &lt; b:\n    **x**\n```"),
        ("| a | b |\n|---|---|\n| 1 | 2 |", "```\n| a | b |\n|---|---|\n| 1 | 2 |\n```"),
        ("a\n\n---\n\nb", "a\n\n──────────\n\nb"),
        ("2 * 3 * 4 = 24", "2 * 3 * 4 = 24"),
        ("snake_case_name stays", "snake_case_name stays"),
    ],
)
def test_markdown_to_mrkdwn(markdown: str, mrkdwn: str) -> None:
    assert to_mrkdwn(markdown) == mrkdwn


def test_user_and_model_text_is_escaped() -> None:
    out = to_mrkdwn("<!channel> Tom & Jerry <script> <@U123>")
    assert out == "&lt;!channel&gt; Tom &amp; Jerry &lt;script&gt; &lt;@U123&gt;"


def test_citations_link_to_the_second_and_the_page() -> None:
    out = to_mrkdwn("Cognito won [1]. The plan agrees [2, 3]. Invented [9].", CITES)
    assert out == (
        "Cognito won [<https://youtu.be/abc?t=734|1>]. The plan agrees "
        "[<https://x.test/plan.pdf#page=5|2>, 3]. Invented."
    )


def test_partial_answers_keep_unresolved_numbers() -> None:
    assert to_mrkdwn("so far [1]", None) == "so far [1]"


def test_split_respects_the_limit_links_and_code() -> None:
    link = "<https://youtu.be/abc?t=734|1>"
    para = ("word " * 50 + link + " ") * 20
    code = "```\n" + "line of code\n" * 400 + "```"
    chunks = split_mrkdwn(f"{para}\n\n{code}\n\n{'x' * 7000}")
    assert all(0 < len(c) <= SECTION_LIMIT for c in chunks)
    joined = "".join(chunks)
    assert joined.count(link) == 20  # never cut inside a link
    code_chunks = [c for c in chunks if c.startswith("```")]
    assert len(code_chunks) >= 2 and all(c.endswith("```") for c in code_chunks)
    assert joined.count("line of code") == 400
    assert joined.count("x") >= 7000


def test_answer_blocks_sources_and_feedback() -> None:
    answer = Answer(
        "Cognito [1], see the plan [2] and notes [3].",
        kind="answer",
        mode="quick",
        citations=(DIVE, PLAN, NOTES),
        exchange_id=42,
        note="Answered from 3 sources.",
    )
    [message] = answer_messages(answer)
    validate_blocks(message.blocks)
    kinds = [b["type"] for b in message.blocks]
    assert kinds == ["section", "divider", "context", "context", "actions"]
    sources = [e["text"] for e in message.blocks[2]["elements"]]
    assert sources == [
        "1. <https://youtu.be/abc?t=734|Auth deep dive @ 12:14>",
        "2. <https://x.test/plan.pdf#page=5|Auth migration plan, p. 5>",
        "3. Team notes &gt; Setup",
    ]
    buttons = message.blocks[-1]["elements"]
    assert [(b["action_id"], b["value"]) for b in buttons] == [
        (ACTION_UP, "42"),
        (ACTION_DOWN, "42"),
    ]
    assert message.text.startswith("Cognito [")


def test_speaker_is_shown_once() -> None:
    c = Citation(1, "h", "Retro", "https://y.test/r#t=5", "Retro @ 0:05", speaker="Priya")
    [message] = answer_messages(Answer("x [1]", "answer", "quick", citations=(c,)))
    assert "1. <https://y.test/r#t=5|Retro @ 0:05> — Priya" in str(message.blocks)


def test_many_citations_fill_several_context_blocks() -> None:
    cites = tuple(
        Citation(n, f"h{n}", "T", f"https://y.test/{n}#t={n}", f"T @ 0:{n:02d}")
        for n in range(1, 24)
    )
    text = " ".join(f"fact [{n}]." for n in range(1, 24))
    [message] = answer_messages(Answer(text, "answer", "quick", citations=cites, exchange_id=1))
    validate_blocks(message.blocks)
    contexts = [b for b in message.blocks if b["type"] == "context"]
    assert [len(b["elements"]) for b in contexts] == [10, 10, 3]


def test_huge_answers_become_several_valid_messages() -> None:
    text = "\n\n".join(f"Paragraph {i}. " + "lorem ipsum " * 30 for i in range(2000))
    messages = answer_messages(Answer(text, "answer", "quick", exchange_id=7))
    assert len(messages) > 2
    for m in messages:
        validate_blocks(m.blocks)
        assert len(m.blocks) <= MAX_BLOCKS and m.text
    assert [any(b["type"] == "actions" for b in m.blocks) for m in messages][-1]
    assert sum(str(m.blocks).count("Paragraph ") for m in messages) == 2000


def test_error_answers_have_no_buttons() -> None:
    [m] = answer_messages(Answer("Search is down.", "error", "quick", exchange_id=3))
    assert m.blocks == [
        {"type": "section", "text": {"type": "mrkdwn", "text": ":warning: Search is down."}}
    ]


def test_extractive_answers_list_their_sources_even_uncited() -> None:
    hit = Hit(
        "h1",
        Segment("s", 0, "text", start_s=734.0),
        Source("s", "Auth deep dive", "video"),
        1.0,
        "https://youtu.be/abc?t=734",
    )
    answer = Answer(
        "> quoted",
        "extractive",
        "quick",
        sources=(NumberedSource(1, hit, "Auth deep dive @ 12:14"),),
    )
    [m] = answer_messages(answer)
    assert "1. <https://youtu.be/abc?t=734|Auth deep dive @ 12:14>" in str(m.blocks)


def test_feedback_recorded_replaces_the_buttons() -> None:
    [m] = answer_messages(Answer("x [1]", "answer", "quick", citations=(DIVE,), exchange_id=1))
    after = feedback_recorded(m.blocks, -1)
    validate_blocks(after)
    assert not [b for b in after if b["type"] == "actions"]
    assert after[-1]["elements"][0]["text"] == "Thanks — feedback recorded 👎"


def test_progress_partial_and_asked() -> None:
    assert progress_message("searching 'Auth0 Cognito'").text == "_searching 'Auth0 Cognito'…_"
    partial = partial_message("word " * 2000)
    validate_blocks(partial.blocks)
    assert partial.blocks[0]["text"]["text"].endswith("…")
    asked = asked_message("U1", "is a < b?", deep=False)
    assert asked.blocks[0]["text"]["text"] == "*<@U1> asked:* is a &lt; b?"
