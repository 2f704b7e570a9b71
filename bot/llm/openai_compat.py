"""Any OpenAI-compatible server (Ollama, vLLM, llama.cpp's server, LM Studio, OpenAI
itself) through the ``openai`` SDK's Chat Completions, one streamed attempt per ``execute``.

Every turn is streamed (``stream_options.include_usage`` for the tokens): text deltas go to
``on_text``, tool-call deltas are assembled by their index (id and name first, then the
arguments in pieces). A stream that ends without a ``finish_reason``, a chunk that is not
JSON, an error event mid-stream or a dropped connection is a ``BrokenReply`` or
``Transient`` and is tried again; 408/409/429/5xx are ``Transient`` with the server's
``retry-after``. A server that refuses tools (Ollama: "does not support tools"; vLLM
without ``--enable-auto-tool-choice``) is ``NoTools``: quick answers go on, deep research
says it cannot run. This is the only module that imports the SDK.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, cast
from urllib.parse import urlsplit

import openai

from bot.errors import LLMError
from bot.llm.base import (
    BrokenReply,
    Completion,
    Message,
    NoTools,
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


def messages_param(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Quorum's messages as Chat Completions takes them: the system prompt first, a model
    turn's tool calls on its assistant message, each result as a ``tool`` message."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for msg in messages:
        content = msg["content"]
        if isinstance(content, str):
            out.append({"role": msg["role"], "content": content})
            continue
        text = "".join(b.text for b in content if isinstance(b, Text))
        if msg["role"] == "assistant":
            calls = [
                {
                    "id": b.id,
                    "type": "function",
                    "function": {
                        "name": b.name,
                        # A malformed input was told back as a tool error; "{}" stands in.
                        "arguments": json.dumps(b.input if isinstance(b.input, dict) else {}),
                    },
                }
                for b in content
                if isinstance(b, ToolCall)
            ]
            turn: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                turn["tool_calls"] = calls
            out.append(turn)
            continue
        for b in content:
            if isinstance(b, ToolResult):
                body = b.content or "(empty)"
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": b.call_id,
                        "content": f"Error: {body}" if b.is_error else body,
                    }
                )
        if text:
            out.append({"role": "user", "content": text})
    return out


def tools_param(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """Quorum's tools as function definitions."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.schema},
        }
        for t in tools
    ]


def where(url: str) -> str:
    """A base URL fit for a message: scheme, host and path, never a password or query."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}".rstrip("/")


def _tools_refused(exc: openai.APIStatusError) -> bool:
    text = f"{exc.message} {exc.body}".lower()
    return exc.status_code in (400, 422, 501) and "tool" in text


@contextlib.contextmanager
def _translated(label: str, with_tools: bool, reading: bool = False) -> Iterator[None]:
    """The SDK's errors in the seam's terms; anything else raised while reading a reply
    (a cut or malformed stream) is a ``BrokenReply``."""
    try:
        yield
    except (Transient, LLMError):
        raise
    except openai.APITimeoutError as exc:
        raise TimeoutError from exc
    except openai.APIStatusError as exc:
        status = exc.status_code
        if status in (408, 409, 429) or status >= 500:
            raise Transient(
                f"HTTP {status}", status=status, wait_s=retry_after_s(exc.response.headers)
            ) from exc
        if with_tools and _tools_refused(exc):
            raise NoTools(f"{label} cannot call tools (HTTP {status}).") from exc
        raise LLMError(
            f"{label} rejected the request (HTTP {status}).", status=status, retryable=False
        ) from exc
    except openai.APIConnectionError as exc:
        if reading:  # the connection dropped with the reply half read
            raise BrokenReply("a broken reply (the connection dropped mid-stream)") from exc
        raise Transient("a connection error") from exc
    except openai.APIError as exc:  # an error event in the middle of a stream
        raise Transient("an error mid-stream") from exc
    except Exception as exc:
        raise BrokenReply(f"a broken reply ({type(exc).__name__})") from exc


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)

    def done(self, index: int) -> ToolCall:
        raw = "".join(self.arguments)
        try:
            value: Any = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            value = raw  # told back to the model as a tool error by the caller
        return ToolCall(self.id or f"call_{index}", self.name, value)


class OpenAIBackend:
    """Chat Completions on an OpenAI-compatible server, one streamed attempt per call."""

    name = "openai"

    def __init__(self, *, base_url: str, api_key: str | None = None, timeout_s: float = 60.0):
        self.label = f"The model server at {where(base_url)}"
        self.client = openai.AsyncOpenAI(
            # Local servers take any key; the SDK insists on one.
            api_key=api_key or "not-needed",
            base_url=base_url,
            timeout=timeout_s,
            max_retries=0,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self.client.close()

    async def execute(
        self, request: Request, on_text: TextSink | None, timeout_s: float
    ) -> Completion:
        """One streamed attempt; text to ``on_text`` as it comes, tool calls assembled."""
        tools: Any = tools_param(request.tools) if request.tools else openai.omit
        parts: list[str] = []
        calls: dict[int, _Call] = {}
        finish: str | None = None
        model = request.model
        usage = Usage()
        with _translated(self.label, bool(request.tools)):
            stream = await self.client.chat.completions.create(
                model=request.model,
                messages=cast(Any, messages_param(request.system, request.messages)),
                max_tokens=request.max_tokens,
                stream=True,
                stream_options={"include_usage": True},
                tools=tools,
                timeout=timeout_s,
            )
        async with stream:
            chunks = stream.__aiter__()
            while True:
                with _translated(self.label, bool(request.tools), reading=True):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    break
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    finish = choice.finish_reason or finish
                    delta = choice.delta
                    for piece in delta.tool_calls or ():
                        call = calls.setdefault(piece.index, _Call())
                        call.id = piece.id or call.id
                        if piece.function is not None:
                            call.name = piece.function.name or call.name
                            call.arguments.append(piece.function.arguments or "")
                    if delta.content:
                        parts.append(delta.content)
                        if on_text is not None:  # its own errors are not the server's
                            await on_text("".join(parts))
        if finish is None:
            raise BrokenReply("an incomplete reply (the stream ended without a finish_reason)")
        tool_calls = tuple(calls[i].done(i) for i in sorted(calls))
        return Completion("".join(parts), model, finish, usage, 1, tool_calls)


def _usage(u: Any) -> Usage:
    details = getattr(u, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    prompt = u.prompt_tokens or 0
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=u.completion_tokens or 0,
        cache_read_input_tokens=cached,
    )
