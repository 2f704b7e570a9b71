"""What goes back and forth with Claude during research: its turn replayed into the
conversation, a tool call's input as traced, and a tool's result as Claude reads it."""

from __future__ import annotations

import json
import logging
from typing import Any

from anthropic.types import ContentBlockParam, Message, ToolResultBlockParam

from bot.research.tools import Call

log = logging.getLogger("quorum.research")


def assistant_content(message: Message) -> list[ContentBlockParam]:
    """Claude's turn as it goes back into the conversation: its text and tool calls."""
    out: list[ContentBlockParam] = []
    for block in message.content:
        if block.type == "text" and block.text:
            out.append({"type": "text", "text": block.text})
        elif block.type == "tool_use":
            out.append(
                {
                    "type": "tool_use",
                    "id": block.id,
                    "name": block.name,
                    # The API accepts only an object here; a malformed input is told back
                    # to Claude as a tool error, so an empty one is sent in its place.
                    "input": block.input if isinstance(block.input, dict) else {},
                }
            )
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


def result_block(call: Call, turn: int) -> ToolResultBlockParam:
    """A call's result (or its error) as the tool_result Claude reads; logged without text."""
    block: ToolResultBlockParam = {
        "type": "tool_result",
        "tool_use_id": call.id,
        "content": call.text or "(empty)",
    }
    if call.is_error:
        block["is_error"] = True
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
