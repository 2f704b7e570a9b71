"""A local emulator of the OpenAI Chat Completions API (what Ollama, vLLM, llama.cpp's
server and LM Studio serve at ``/v1``) for tests: the real ``openai`` SDK is pointed at it
with ``base_url=emulator.url``.

It checks each request the way those servers do and answers 400/401/404 with an
OpenAI-shaped error body on a violation: the key (when it has one), the model, the top-level
fields, ``max_tokens``, ``stream_options`` only with ``stream``; the messages (roles, a
system prompt only first, content types, an assistant turn with text or tool calls, every
``tool`` message's ``tool_call_id`` answering a call of the assistant turn just before it,
and every call answered before the conversation goes on, arguments that are JSON); the
tools (function names, unique, ``parameters`` a valid JSON Schema of an object, checked
against the metaschema) and ``tool_choice``. ``supports_tools=False`` plays a model that
cannot call tools (Ollama's "does not support tools").

Replies are scripted with the same ``Reply``/``ToolUse`` as the Anthropic emulator
(``tests/emulators/script.py``). A stream is the real chunk sequence: a role chunk, text
deltas, tool-call deltas (id and name first, then the arguments in pieces), a chunk with
the ``finish_reason``, a usage chunk when ``stream_options.include_usage``, then
``data: [DONE]``. Faults: the connection reset after the first delta, a malformed or
truncated chunk, chunks sent as given before the finish (``Reply.chunks``: JSON the SDK
does not validate), an empty stream, a stream without a ``finish_reason`` ("no_stop"),
and an error event mid-stream (``stream_error``).

    emu = OpenAIEmulator()
    await emu.start()
    emu.enqueue(Reply(text="Hello [1]."))
    ...  # AsyncOpenAI(api_key=emu.api_key, base_url=emu.url)
    await emu.stop()
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections import deque
from typing import Any
from uuid import uuid4

from aiohttp import web
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from tests.emulators.anthropic import RecordedRequest
from tests.emulators.script import Reply, Responder, ToolUse

__all__ = ["API_KEY", "OpenAIEmulator", "Reply", "ToolUse"]

API_KEY = "sk-openai-emulator"
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "not_found_error",
    408: "timeout",
    429: "rate_limit_exceeded",
    500: "server_error",
    502: "server_error",
    503: "server_error",
    504: "server_error",
    529: "server_error",
}
TOP_LEVEL = {
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "n",
    "stop",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "seed",
    "user",
    "response_format",
    "frequency_penalty",
    "presence_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "metadata",
    "store",
    "service_tier",
    "reasoning_effort",
}
ROLES = {"system", "developer", "user", "assistant", "tool"}
FUNCTION_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


class Invalid(Exception):
    """A request the real server would reject."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _text_content(content: Any, where: str, *, parts_ok: bool = True) -> str:
    if isinstance(content, str):
        return content
    if parts_ok and isinstance(content, list) and content:
        for j, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text":
                raise Invalid(f"{where}.content.{j}: only text parts are supported")
            if not isinstance(part.get("text"), str):
                raise Invalid(f"{where}.content.{j}.text: must be a string")
        return "".join(p["text"] for p in content)
    raise Invalid(f"{where}.content: must be a string or a list of text parts")


def _tool_calls(calls: Any, where: str) -> list[str]:
    if not isinstance(calls, list) or not calls:
        raise Invalid(f"{where}.tool_calls: must be a non-empty list")
    ids = []
    for k, call in enumerate(calls):
        at = f"{where}.tool_calls.{k}"
        if not isinstance(call, dict) or call.get("type") != "function":
            raise Invalid(f"{at}.type: must be 'function'")
        if not isinstance(call.get("id"), str) or not call["id"]:
            raise Invalid(f"{at}.id: required")
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise Invalid(f"{at}.function.name: required")
        args = fn.get("arguments")
        if not isinstance(args, str):
            raise Invalid(f"{at}.function.arguments: must be a string")
        try:
            json.loads(args)
        except json.JSONDecodeError:
            raise Invalid(f"{at}.function.arguments: must be valid JSON") from None
        ids.append(call["id"])
    if len(set(ids)) != len(ids):
        raise Invalid(f"{where}.tool_calls: ids must be unique")
    return ids


def _messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise Invalid("messages: at least one message is required")
    open_calls: list[str] = []  # the last assistant turn's calls not yet answered
    seen_turn = False
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, dict):
            raise Invalid(f"{where}: must be an object")
        role = msg.get("role")
        if role not in ROLES:
            raise Invalid(f"{where}.role: must be one of {', '.join(sorted(ROLES))}")
        if role != "tool" and open_calls:
            raise Invalid(
                "An assistant message with 'tool_calls' must be followed by tool messages "
                f"responding to each 'tool_call_id'. Missing: {', '.join(open_calls)} "
                f"(before {where})"
            )
        if role in ("system", "developer"):
            if seen_turn:
                raise Invalid(f"{where}: a system message is only allowed at the start")
            _text_content(msg.get("content"), where)
            continue
        if not seen_turn and role != "user":
            raise Invalid(f"{where}: the conversation must start with a user message")
        seen_turn = True
        if role == "user":
            if not _text_content(msg.get("content"), where):
                raise Invalid(f"{where}.content: must not be empty")
        elif role == "assistant":
            content = msg.get("content")
            calls = msg.get("tool_calls")
            if content is not None:
                _text_content(content, where)
            if calls is None and not content:
                raise Invalid(f"{where}: an assistant message needs content or tool_calls")
            if calls is not None:
                open_calls = _tool_calls(calls, where)
        else:  # tool
            tid = msg.get("tool_call_id")
            if tid not in open_calls:
                raise Invalid(
                    f"{where}.tool_call_id: {tid!r} does not answer a tool call of the "
                    "preceding assistant message"
                )
            open_calls.remove(tid)
            _text_content(msg.get("content"), where)
    if open_calls:
        raise Invalid(f"messages: tool calls without a tool message: {', '.join(open_calls)}")


def _tools(tools: Any, tool_choice: Any) -> None:
    names: set[str] = set()
    if tools is not None:
        if not isinstance(tools, list) or not tools:
            raise Invalid("tools: must be a non-empty list")
        for i, tool in enumerate(tools):
            where = f"tools.{i}"
            if not isinstance(tool, dict) or tool.get("type") != "function":
                raise Invalid(f"{where}.type: must be 'function'")
            fn = tool.get("function")
            if not isinstance(fn, dict):
                raise Invalid(f"{where}.function: required")
            name = fn.get("name")
            if not isinstance(name, str) or not FUNCTION_NAME.match(name):
                raise Invalid(f"{where}.function.name: must match ^[a-zA-Z0-9_-]{{1,64}}$")
            if name in names:
                raise Invalid(f"tools: function names must be unique ({name})")
            names.add(name)
            if "description" in fn and not isinstance(fn["description"], str):
                raise Invalid(f"{where}.function.description: must be a string")
            schema = fn.get("parameters")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                raise Invalid(f"{where}.function.parameters: must be a JSON Schema object")
            try:
                Draft202012Validator.check_schema(schema)
            except SchemaError as exc:
                raise Invalid(
                    f"{where}.function.parameters: invalid schema: {exc.message}"
                ) from None
    if tool_choice is None:
        return
    if isinstance(tool_choice, str):
        if tool_choice not in ("none", "auto", "required"):
            raise Invalid("tool_choice: must be none, auto, required or a function")
        if tool_choice == "required" and not names:
            raise Invalid("tool_choice: 'required' needs tools")
        return
    if (
        not isinstance(tool_choice, dict)
        or tool_choice.get("function", {}).get("name") not in names
    ):
        raise Invalid("tool_choice.function.name: must name one of the tools")


def validate(headers: dict[str, str], body: Any, api_key: str | None) -> None:
    """Raise Invalid when a real server would refuse this request."""
    bearer = headers.get("authorization", "")
    if api_key is not None:
        if not bearer.lower().startswith("bearer "):
            raise Invalid("You didn't provide an API key.", 401)
        if bearer[7:] != api_key:
            raise Invalid("Incorrect API key provided.", 401)
    if not isinstance(body, dict):
        raise Invalid("We could not parse the JSON body of your request.")
    extra = sorted(set(body) - TOP_LEVEL)
    if extra:
        raise Invalid(f"Unrecognized request argument supplied: {extra[0]}")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Invalid("model: you must provide a model parameter")
    for key in ("max_tokens", "max_completion_tokens"):
        value = body.get(key)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise Invalid(f"{key}: must be an integer of at least 1")
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise Invalid("stream: must be a boolean")
    options = body.get("stream_options")
    if options is not None:
        if not stream:
            raise Invalid(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled."
            )
        if not isinstance(options, dict) or set(options) - {"include_usage"}:
            raise Invalid("stream_options: only include_usage is supported")
    temperature = body.get("temperature")
    if temperature is not None and not (
        isinstance(temperature, int | float) and 0 <= temperature <= 2
    ):
        raise Invalid("temperature: must be between 0 and 2")
    _messages(body.get("messages"))
    _tools(body.get("tools"), body.get("tool_choice"))


def _chunks(text: str, words: int = 3) -> list[str]:
    pieces = re.findall(r"\S+\s*|\s+", text)
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)] or [text]


def _arguments(use: ToolUse, raw: Any) -> str:
    if raw is None:
        return json.dumps(use.input)
    return raw if isinstance(raw, str) else json.dumps(raw)


class OpenAIEmulator:
    """Chat Completions on 127.0.0.1, scripted with ``enqueue``."""

    def __init__(
        self,
        api_key: str | None = API_KEY,
        default: Responder | None = None,
        *,
        supports_tools: bool = True,
        models: set[str] | None = None,
    ) -> None:
        self.api_key = api_key  # None: any key or none (Ollama, a local vLLM)
        self.default = default
        self.supports_tools = supports_tools
        self.models = models  # None: every model name is served
        self.requests: list[RecordedRequest] = []
        self._queue: deque[Responder] = deque()
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def url(self) -> str:
        """Base URL for ``AsyncOpenAI(base_url=...)``."""
        return f"http://127.0.0.1:{self._port}/v1"

    def enqueue(self, *replies: Responder | str, times: int = 1) -> None:
        """Script the next replies (a Reply, a text, or ``fn(body) -> Reply``)."""
        for reply in replies:
            for _ in range(times):
                self._queue.append(Reply(text=reply) if isinstance(reply, str) else reply)

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        return len(self._queue)

    def reset(self) -> None:
        """Forget scripted replies and recorded requests."""
        self._queue.clear()
        self.requests.clear()

    async def start(self) -> None:
        """Listen on a free local port."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._completions)
        app.router.add_get("/v1/models", self._list_models)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> OpenAIEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _list_models(self, request: web.Request) -> web.Response:
        names = sorted(self.models or {"emulated"})
        data = [{"id": n, "object": "model", "created": 0, "owned_by": "emulator"} for n in names]
        return web.json_response({"object": "list", "data": data})

    def _error(
        self, rec: RecordedRequest, status: int, message: str, kind: str | None = None
    ) -> web.Response:
        rec.status, rec.error = status, message
        body = {
            "error": {
                "message": message,
                "type": kind or ERROR_TYPES.get(status, "server_error"),
                "param": None,
                "code": None,
            }
        }
        return web.json_response(body, status=status)

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            body: Any = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        rec = RecordedRequest(path=request.path, headers=headers, body=body)
        self.requests.append(rec)
        try:
            validate(headers, body, self.api_key)
        except Invalid as exc:
            return self._error(rec, exc.status, str(exc))
        if self.models is not None and body["model"] not in self.models:
            return self._error(rec, 404, f"model '{body['model']}' not found")
        if body.get("tools") and not self.supports_tools:
            return self._error(
                rec, 400, f"registry.ollama.ai/library/{body['model']} does not support tools"
            )
        responder = self._queue.popleft() if self._queue else self.default
        if responder is None:
            return self._error(rec, 500, "emulator: no reply was enqueued")
        reply = responder(body) if callable(responder) else responder
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.status != 200:
            rec.status = reply.status
            text = reply.error_message or f"emulated HTTP {reply.status}"
            resp = self._error(rec, reply.status, text, reply.error_type)
            if reply.retry_after is not None:
                resp.headers["retry-after"] = f"{reply.retry_after:g}"
            return resp
        if not body.get("stream"):
            return await self._whole(request, body, reply)
        return await self._stream(request, body, reply)

    def _usage(self, body: dict[str, Any], out_chars: int) -> dict[str, Any]:
        prompt = max(
            1, len(json.dumps(body.get("messages"))) // 4 + len(json.dumps(body.get("tools"))) // 4
        )
        completion = max(1, out_chars // 4)
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": 0},
        }

    def _finish(self, reply: Reply) -> str:
        return reply.stop_reason or ("tool_calls" if reply.tool_uses else "stop")

    async def _whole(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.Response:
        calls = [
            {
                "id": u.id,
                "type": "function",
                "function": {"name": u.name, "arguments": _arguments(u, reply.raw_input)},
            }
            for u in reply.tool_uses
        ]
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if calls:
            message["tool_calls"] = calls
        out = {
            "id": f"chatcmpl-emu{uuid4().hex[:16]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model or body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": self._finish(reply),
                    "logprobs": None,
                }
            ],
            "usage": self._usage(body, len(reply.text or "") + len(json.dumps(calls))),
        }
        if reply.fault == "reset":
            assert request.transport is not None
            request.transport.abort()
            return web.Response()
        if reply.fault == "truncated":
            raw = json.dumps(out)
            return web.Response(text=raw[: len(raw) // 2], content_type="application/json")
        return web.json_response(out)

    async def _stream(
        self, request: web.Request, body: dict[str, Any], reply: Reply
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"content-type": "text/event-stream", "cache-control": "no-cache"}
        )
        await resp.prepare(request)
        if reply.fault == "empty":
            await resp.write_eof()
            return resp
        cid = f"chatcmpl-emu{uuid4().hex[:16]}"
        model = reply.model or body["model"]
        created = int(time.time())

        async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
            chunk = {
                "id": cid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": choices,
                **extra,
            }
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())

        def delta(d: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
            return [{"index": 0, "delta": d, "finish_reason": finish, "logprobs": None}]

        await send(delta({"role": "assistant", "content": ""}))
        deltas: list[dict[str, Any]] = (
            [{"content": c} for c in _chunks(reply.text)] if reply.text else []
        )
        for i, use in enumerate(reply.tool_uses):
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": i,
                            "id": use.id,
                            "type": "function",
                            "function": {"name": use.name, "arguments": ""},
                        }
                    ]
                }
            )
            raw = _arguments(use, reply.raw_input)
            deltas.extend(
                {"tool_calls": [{"index": i, "function": {"arguments": raw[k : k + 12]}}]}
                for k in range(0, len(raw), 12)
            )
        out_chars = 0
        for n, d in enumerate(deltas):
            if reply.chunk_delay_s:
                await asyncio.sleep(reply.chunk_delay_s)
            await send(delta(d))
            out_chars += len(json.dumps(d))
            if n == 0 and reply.fault in ("reset", "malformed", "truncated"):
                await self._break(request, resp, reply.fault)
                return resp
            if n == 0 and reply.stream_error:
                error = {
                    "error": {
                        "message": "The server had an error while processing your request.",
                        "type": reply.stream_error,
                    }
                }
                await resp.write(f"data: {json.dumps(error)}\n\n".encode())
                await resp.write_eof()
                return resp
        for raw in reply.chunks:
            await resp.write(f"data: {json.dumps(raw)}\n\n".encode())
        if reply.fault != "no_stop":
            await send(delta({}, self._finish(reply)))
        if (body.get("stream_options") or {}).get("include_usage"):
            await send([], usage=self._usage(body, out_chars))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    @staticmethod
    async def _break(request: web.Request, resp: web.StreamResponse, fault: str) -> None:
        """End a stream badly, after its first delta."""
        if fault == "malformed":
            await resp.write(b"data: {not json at all\n\n")
            await resp.write_eof()
        elif fault == "truncated":
            await resp.write(b'data: {"id": "chatcmpl-emu", "choices": [{"delta": {"cont')
            await resp.write_eof()
        else:  # "reset": the connection drops with the body unfinished
            assert request.transport is not None
            request.transport.abort()
