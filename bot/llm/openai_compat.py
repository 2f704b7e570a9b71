"""Any OpenAI-compatible server (Ollama, vLLM, llama.cpp's server, LM Studio, OpenAI
itself) through the ``openai`` SDK's Chat Completions, one streamed attempt per ``execute``.

Every turn is streamed (``stream_options.include_usage`` for the tokens): text deltas go to
``on_text``, tool-call deltas are assembled by their index (id and name first, then the
arguments in pieces). The SDK does not validate chunks, so each is read as untrusted
input: a missing ``choices``, a null ``delta`` or malformed usage carries nothing wrong for
the answer and is read past; content, tool calls or a finish that is not what the API
says cannot be read. That, a stream that ends without a ``finish_reason``, a chunk that is
not JSON, an error event mid-stream or a dropped connection is a ``BrokenReply`` or
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
    given: dict[str, Any] | None = None  # arguments a server sent as an object, not text

    def done(self, index: int) -> ToolCall:
        raw = "".join(self.arguments)
        if self.given is not None and not raw.strip():
            return ToolCall(self.id or f"call_{index}", self.name, self.given)
        try:
            value: Any = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            value = raw  # told back to the model as a tool error by the caller
        return ToolCall(self.id or f"call_{index}", self.name, value)


def _field(obj: Any, name: str) -> Any:
    """A chunk's field, or None: the SDK builds chunks without validating them, so a
    field may be missing, null or of another type than its model says."""
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _text(value: Any, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BrokenReply(f"a malformed chunk ({what} is not text)")
    return value


@dataclass
class _Reply:
    """A streamed reply as its chunks are read, each checked as a server's input: a chunk
    the SDK let through unvalidated that cannot be read is a ``BrokenReply`` (retried,
    then the caller's fallback), never an exception of the reading code's own."""

    model: str
    parts: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish: str | None = None
    usage: Usage = field(default_factory=Usage)

    def take(self, chunk: Any) -> bool:
        """Read one chunk; True when it added text."""
        if isinstance(chunk, list | str | int | float) or chunk is None:
            raise BrokenReply("a malformed chunk (not an object)")
        model = _field(chunk, "model")
        self.model = model if isinstance(model, str) and model else self.model
        usage = _field(chunk, "usage")
        if usage is not None:
            self.usage = _usage(usage)
        choices = _field(chunk, "choices")
        if choices is None:  # a server's keep-alive or usage chunk may have none
            return False
        if not isinstance(choices, list):
            raise BrokenReply("a malformed chunk (its choices are not a list)")
        added = False
        for choice in choices:
            if isinstance(choice, list | str | int | float) or choice is None:
                raise BrokenReply("a malformed chunk (a choice is not an object)")
            finish = _field(choice, "finish_reason")
            self.finish = _text(finish, "finish_reason") or self.finish
            delta = _field(choice, "delta")
            if delta is None:  # nothing said in this chunk: "delta": null
                continue
            self._tool_calls(_field(delta, "tool_calls"))
            content = _text(_field(delta, "content"), "the content")
            if content:
                self.parts.append(content)
                added = True
        return added

    def _tool_calls(self, pieces: Any) -> None:
        if pieces is None:
            return
        if not isinstance(pieces, list):
            raise BrokenReply("a malformed chunk (tool_calls is not a list)")
        for piece in pieces:
            index = _field(piece, "index")
            if isinstance(index, bool) or not isinstance(index, int):
                raise BrokenReply("a malformed chunk (a tool call without an index)")
            call = self.calls.setdefault(index, _Call())
            call.id = _text(_field(piece, "id"), "a tool call's id") or call.id
            function = _field(piece, "function")
            if function is None:
                continue
            call.name = _text(_field(function, "name"), "a tool's name") or call.name
            arguments = _field(function, "arguments")
            if isinstance(arguments, dict):  # some servers send the object itself
                call.given = arguments
            else:
                call.arguments.append(_text(arguments, "a tool call's arguments"))

    def completion(self) -> Completion:
        """The whole reply; a ``BrokenReply`` when it never said it was finished."""
        if self.finish is None:
            raise BrokenReply("an incomplete reply (the stream ended without a finish_reason)")
        tool_calls = tuple(self.calls[i].done(i) for i in sorted(self.calls))
        return Completion("".join(self.parts), self.model, self.finish, self.usage, 1, tool_calls)


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
        reply = _Reply(request.model)
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
        broken: BrokenReply | None = None
        async with stream:
            chunks = stream.__aiter__()
            while True:
                with _translated(self.label, bool(request.tools), reading=True):
                    chunk = await anext(chunks, None)
                if chunk is None:
                    break
                if broken is not None:
                    # The rest is read and dropped: leaving the SDK's generators suspended
                    # mid-stream gets them finalised later, beside the closed connection
                    # ("Exception ignored ... already executing" on the terminal).
                    continue
                try:
                    added = reply.take(chunk)
                except BrokenReply as exc:
                    broken = exc
                    continue
                except Exception as exc:  # a shape take() did not foresee: the server's too
                    broken = BrokenReply(f"a broken reply ({type(exc).__name__})")
                    continue
                if added and on_text is not None:  # its own errors are not the server's
                    await on_text("".join(reply.parts))
        if broken is not None:
            raise broken
        return reply.completion()


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _usage(u: Any) -> Usage:
    """Tokens as the server counted them; a count it sent malformed counts as none (what
    was spent is only reported, and an answer is not lost for it)."""
    cached = _count(_field(_field(u, "prompt_tokens_details"), "cached_tokens"))
    prompt = _count(_field(u, "prompt_tokens"))
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=_count(_field(u, "completion_tokens")),
        cache_read_input_tokens=cached,
    )
