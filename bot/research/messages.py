"""What goes back and forth with the model during research: its turn replayed into the
conversation, a tool call's input as traced, and a tool's result as the model reads it."""

from __future__ import annotations

import json
import logging
from typing import Any

from bot.llm import Completion, Content, Text, ToolResult
from bot.research.tools import Call

log = logging.getLogger("quorum.research")


def assistant_content(message: Completion) -> list[Content]:
    """The model's turn as it goes back into the conversation: its text and tool calls."""
    out: list[Content] = [Text(message.text)] if message.text else []
    out.extend(message.tool_calls)
    return out


def as_input(raw: object) -> Any:
    """A tool call's input as sent (a copy when it is an object)."""
    return dict(raw) if isinstance(raw, dict) else raw


def trace_args(raw: Any) -> dict[str, Any]:
    """A call's input for the trace, long values cut (it is stored, never logged)."""
    text = json.dumps(raw, ensure_ascii=False, default=str)
    if len(text) <= 2000:
        return dict(raw) if isinstance(raw, dict) else {"_input": raw}
    return {"_truncated": text[:2000]}


def result_block(call: Call, turn: int) -> ToolResult:
    """A call's result (or its error) as the model reads it; logged without text."""
    block = ToolResult(call.id, call.text or "(empty)", call.is_error)
    log.info(
        "research tool=%s turn=%d error=%s passages=%d ms=%.1f archive_ms=%.1f",
        call.name,
        turn,
        call.is_error,
        len(call.passages),
        call.ms,
        call.archive_ms,
    )
    return block
