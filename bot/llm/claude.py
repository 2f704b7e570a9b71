"""Claude through the Anthropic SDK (``AsyncAnthropic``), one attempt per ``execute``.

The SDK's own retries are off (``max_retries=0``): ``Model`` retries under one deadline.
429, 5xx, 529 (overloaded) and an error event mid-stream are ``Transient`` (with the
server's ``retry-after``); a reply that breaks while it is read (a reset connection,
malformed or truncated events or JSON, an empty stream, a stream that ends without
``message_stop``) is a ``BrokenReply``. The static system prompt is sent as a block marked
``cache_control: ephemeral``, and so is the newest tool result, so repeated questions and
research turns reuse the cached prefix. This is the only module that imports the SDK.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, cast

import anthropic
from anthropic.types import (
    ContentBlockParam,
    MessageParam,
    TextBlockParam,
    ToolParam,
)
from anthropic.types import Message as ClaudeMessage

from bot.errors import LLMError
from bot.llm.base import (
    BrokenReply,
    Completion,
    Message,
    Request,
    Text,
    TextSink,
    Tool,
    ToolCall,
    ToolResult,
    Transient,
    Usage,
    retry_after_s,
)

RETRYABLE_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


@contextlib.contextmanager
def _reading() -> Iterator[None]:
    """Turn anything raised while reading a reply, other than the SDK's own API errors,
    into ``BrokenReply``: the SDK lets transport and parsing errors of a body escape."""
    try:
        yield
    except (anthropic.APIError, BrokenReply):
        raise
    except Exception as exc:
        raise BrokenReply(f"a broken reply ({type(exc).__name__})") from exc


def _retryable(exc: anthropic.APIStatusError) -> bool:
    status = exc.status_code
    if status in (408, 409, 429) or status >= 500:
        return True
    # An error event in the middle of a stream arrives on a 200 response.
    return status < 400 and (exc.type or "") in RETRYABLE_TYPES


def _describe(exc: anthropic.APIStatusError) -> str:
    kind = exc.type or "error"
    if exc.status_code < 400:
        return f"{kind} (mid-stream)"
    return f"{kind} (HTTP {exc.status_code})"


@contextlib.contextmanager
def _translated() -> Iterator[None]:
    """The SDK's errors in the seam's terms."""
    try:
        yield
    except anthropic.APITimeoutError as exc:
        raise TimeoutError from exc
    except anthropic.APIStatusError as exc:
        if not _retryable(exc):
            raise LLMError(
                f"Claude rejected the request: {_describe(exc)}.",
                status=exc.status_code,
                retryable=False,
            ) from exc
        raise Transient(
            _describe(exc), status=exc.status_code, wait_s=retry_after_s(exc.response.headers)
        ) from exc
    except anthropic.APIConnectionError as exc:
        raise Transient("a connection error") from exc


def _block(block: Text | ToolCall | ToolResult) -> ContentBlockParam:
    if isinstance(block, Text):
        return {"type": "text", "text": block.text}
    if isinstance(block, ToolCall):
        # The API accepts only an object here; a malformed input was told back to the
        # model as a tool error, so an empty one is sent in its place.
        tool_input = block.input if isinstance(block.input, dict) else {}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": tool_input}
    result: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": block.call_id,
        "content": block.content or "(empty)",
    }
    if block.is_error:
        result["is_error"] = True
    return cast(ContentBlockParam, result)


def messages_param(messages: Sequence[Message]) -> list[MessageParam]:
    """Quorum's messages as the Messages API takes them, the newest tool result marked
    for prompt caching (at most four breakpoints per request; the system prompt has one)."""
    out: list[MessageParam] = []
    newest: dict[str, Any] | None = None
    for msg in messages:
        content = msg["content"]
        if isinstance(content, str):
            out.append(cast(MessageParam, {"role": msg["role"], "content": content}))
            continue
        blocks = [_block(b) for b in content]
        for b in blocks:
            if b["type"] == "tool_result":
                newest = cast(dict[str, Any], b)
        out.append(cast(MessageParam, {"role": msg["role"], "content": blocks}))
    if newest is not None:
        newest["cache_control"] = {"type": "ephemeral"}
    return out


def tools_param(tools: Sequence[Tool]) -> list[ToolParam]:
    """Quorum's tools as Claude's tool definitions."""
    return [{"name": t.name, "description": t.description, "input_schema": t.schema} for t in tools]


def system_blocks(system: str) -> list[TextBlockParam]:
    """The static system prompt as one cacheable block."""
    return [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]


def completion(message: ClaudeMessage) -> Completion:
    """A Claude reply in Quorum's terms."""
    u = message.usage
    usage = Usage(
        input_tokens=u.input_tokens or 0,
        output_tokens=u.output_tokens or 0,
        cache_read_input_tokens=u.cache_read_input_tokens or 0,
        cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
    )
    text = "".join(b.text for b in message.content if b.type == "text")
    calls = tuple(
        ToolCall(b.id, b.name, dict(b.input) if isinstance(b.input, dict) else b.input)
        for b in message.content
        if b.type == "tool_use"
    )
    return Completion(text, message.model, message.stop_reason, usage, 1, calls)


class ClaudeBackend:
    """Claude's Messages API, one attempt per call."""

    name = "claude"
    label = "Claude"

    def __init__(self, *, api_key: str, base_url: str | None = None, timeout_s: float = 60.0):
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self.client.close()

    async def execute(
        self, request: Request, on_text: TextSink | None, timeout_s: float
    ) -> Completion:
        """One attempt: ``messages.create``, or ``messages.stream`` when streaming."""
        with _translated():
            if request.stream:
                return completion(await self._stream(request, on_text, timeout_s))
            with _reading():
                if request.tools:
                    message = await self.client.messages.create(
                        model=request.model,
                        max_tokens=request.max_tokens,
                        system=system_blocks(request.system),
                        messages=messages_param(request.messages),
                        tools=tools_param(request.tools),
                        timeout=timeout_s,
                    )
                else:
                    message = await self.client.messages.create(
                        model=request.model,
                        max_tokens=request.max_tokens,
                        system=system_blocks(request.system),
                        messages=messages_param(request.messages),
                        timeout=timeout_s,
                    )
            return completion(message)

    async def _stream(
        self, request: Request, on_text: TextSink | None, timeout_s: float
    ) -> ClaudeMessage:
        parts: list[str] = []
        finished = False
        async with self.client.messages.stream(
            model=request.model,
            max_tokens=request.max_tokens,
            system=system_blocks(request.system),
            messages=messages_param(request.messages),
            timeout=timeout_s,
        ) as stream:
            events = stream.__aiter__()
            while True:
                # Only the reading is translated: on_text's own errors are not Claude's.
                with _reading():
                    event = await anext(events, None)
                if event is None:
                    break
                finished = finished or event.type == "message_stop"
                if event.type == "text" and event.text:
                    parts.append(event.text)
                    if on_text is not None:
                        await on_text("".join(parts))
            if not finished:
                raise BrokenReply("an incomplete reply (the stream ended before message_stop)")
            with _reading():
                return await stream.get_final_message()
