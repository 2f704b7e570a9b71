"""A deep research run scripted on a model emulator (either API), for the end-to-end tests:
a search of the kickoff, a read of the deep dive around 12:14, then an answer citing one
passage of each step. Every turn answers after ``TURN_DELAY_S``, longer than the adapters'
one-second throttle, so each step's progress reaches the placeholder."""

from __future__ import annotations

import re
from typing import Any

from tests.backends import turns
from tests.emulators.anthropic import AnthropicEmulator
from tests.emulators.openai import OpenAIEmulator
from tests.emulators.script import Reply, ToolUse

QUESTION = "Why did we leave Auth0, and what was wrong with the hosted UI?"
TURN_DELAY_S = 1.2
SEARCH = {"query": "Auth0 cost outage", "source_ids": ["kickoff"]}
READ = {"source_id": "deep-dive", "start_s": "12:00", "end_s": "13:00"}
# What progress_text says for each call (bot.research.tools), in order.
STEPS = (
    "searching 'Auth0 cost outage' ('Auth kickoff')",
    "reading 'Auth deep dive' 12:00\u201313:00",
)
# The cost sentence inside the 0:55 window (1:06; the fixture's windows carry no cue marks,
# so it is estimated by its place in the window's text)
COST_LINK = "https://www.youtube.com/watch?v=abc123&t=66s"
HOSTED_UI_LINK = "https://www.loom.com/share/feedbeef?t=734"  # Auth deep dive @ 12:14


def _results(turn: dict[str, Any]) -> str:
    assert turn["role"] == "user" and turn["results"]
    return "\n".join(r.content for r in turn["results"])


def passage_with(result: str, needle: str) -> tuple[int, str]:
    """The ``[n]`` and header line of the passage in a tool result that contains ``needle``."""
    for block in re.split(r"\n(?=\[\d+\] )", result):
        m = re.match(r"\[(\d+)\] ([^\n]*)", block)
        if m and needle in block:
            return int(m[1]), m[2]
    raise AssertionError(f"{needle!r} is in no passage of:\n{result}")


def script_research(emulator: AnthropicEmulator | OpenAIEmulator) -> dict[str, int]:
    """Enqueue the three turns; the returned dict fills with the numbers the answer cites
    (``"cost"`` from the search, ``"hosted_ui"`` from the transcript)."""
    cited: dict[str, int] = {}

    def answer(body: dict[str, Any]) -> Reply:
        _, *steps = [t for t in turns(body) if t["role"] == "user"]
        searched, read = (_results(m) for m in steps)
        cost, cost_head = passage_with(searched, "nine thousand eight hundred")
        ui, ui_head = passage_with(read, "hosted UI is the weak spot")
        assert cost_head.startswith("Auth kickoff @ 0:55"), cost_head
        assert ui_head.startswith("Auth deep dive @ 12:14"), ui_head
        cited.update(cost=cost, hosted_ui=ui)
        return Reply(
            text=f"We left Auth0 over cost: the renewal quote jumped to $9,800 a month [{cost}]. "
            f"The **hosted UI** was the weak spot: it can't be fully restyled [{ui}].",
            delay_s=TURN_DELAY_S,
        )

    emulator.enqueue(
        Reply(tool_uses=[ToolUse("search", dict(SEARCH))], delay_s=TURN_DELAY_S),
        Reply(tool_uses=[ToolUse("get_transcript", dict(READ))], delay_s=TURN_DELAY_S),
        answer,
    )
    return cited
