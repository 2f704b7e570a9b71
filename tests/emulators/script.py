"""How a test scripts a model emulator, whichever API it speaks (``anthropic.py``,
``openai.py``): replies with text and tool calls, error statuses with ``retry-after``,
delays, a mid-stream error event, and faults that break a reply while it is read."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

_ids = itertools.count(1)


@dataclass
class ToolUse:
    """A tool call the model "decides" to make."""

    name: str
    input: dict[str, Any]
    id: str = field(default_factory=lambda: f"toolu_emu{next(_ids):06d}{uuid4().hex[:8]}")


@dataclass
class Reply:
    """One scripted reply. ``status`` other than 200 sends an error body instead."""

    text: str | None = None
    tool_uses: list[ToolUse] = field(default_factory=list)
    status: int = 200
    error_type: str | None = None
    error_message: str | None = None
    retry_after: float | None = None
    delay_s: float = 0.0  # before the response (or the stream) starts
    chunk_delay_s: float = 0.0  # between streamed deltas
    stream_error: str | None = None  # an SSE error event of this type after the first delta
    stop_reason: str | None = None
    model: str | None = None
    # "reset", "malformed", "truncated", "empty", "no_stop" (streams); without streaming,
    # "reset" drops the connection and "truncated" cuts the JSON body in half.
    fault: str | None = None
    raw_input: Any = None  # a tool_use input sent as given (e.g. not an object)
    # Streamed chunks sent as given after the text, before the finish (the OpenAI
    # emulator): what a server sends that the SDK does not validate.
    chunks: list[Any] = field(default_factory=list)

    @classmethod
    def error(cls, status: int, *, retry_after: float | None = None, delay_s: float = 0.0) -> Reply:
        """An HTTP error reply with the service's error type for ``status``."""
        return cls(status=status, retry_after=retry_after, delay_s=delay_s)

    @classmethod
    def tools(cls, *uses: ToolUse, text: str | None = None) -> Reply:
        """A reply that calls tools (stop_reason "tool_use")."""
        return cls(text=text, tool_uses=list(uses))


Responder = Reply | Callable[[dict[str, Any]], Reply]
