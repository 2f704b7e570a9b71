"""A local emulator of Anthropic's Messages API for tests: the real ``anthropic`` SDK is
pointed at it with ``base_url=emulator.url``.

It validates each request the way the service does (headers, model, max_tokens, the
message list and its content blocks, system blocks, cache_control, tools, tool_choice,
tool_result ids) and answers 400/401 with an Anthropic-shaped error body on a violation.
Otherwise it plays the scripted replies in order: text, tool_use blocks, error statuses
(429, 500, 529, ...) with ``retry-after``, delays, and for ``"stream": true`` the real SSE
sequence (message_start, content_block_start, ping, content_block_delta with text_delta /
input_json_delta, content_block_stop, message_delta with usage and stop_reason,
message_stop), optionally broken by a mid-stream ``error`` event or by a ``fault``:
the connection reset after the first delta, a malformed or truncated event, an empty
stream, a stream that ends cleanly without ``message_stop``, or (without streaming) a
JSON body cut off half-way.

    emu = AnthropicEmulator()
    await emu.start()
    emu.enqueue(Reply(text="Hello [1]."))
    emu.enqueue(Reply.error(529), times=3)
    ...  # AsyncAnthropic(api_key=emu.api_key, base_url=emu.url)
    emu.requests[0].body["messages"]
    await emu.stop()
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections import deque
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from aiohttp import web

from tests.emulators.script import Reply, Responder, ToolUse

__all__ = ["API_KEY", "AnthropicEmulator", "Reply", "ToolUse"]

API_KEY = "sk-ant-emulator"
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
TOP_LEVEL = {
    "model",
    "max_tokens",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "stream",
    "metadata",
    "thinking",
    "service_tier",
    "cache_control",
    "container",
    "output_config",
    "inference_geo",
    "speed",
    "diagnostics",
    "mcp_servers",
}
BLOCK_TYPES = {
    "text",
    "image",
    "document",
    "tool_use",
    "tool_result",
    "thinking",
    "redacted_thinking",
    "search_result",
}
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


@dataclass
class RecordedRequest:
    """A request as the emulator saw it."""

    path: str
    headers: dict[str, str]
    body: Any
    status: int = 200
    error: str | None = None

    @property
    def stream(self) -> bool:
        """True when the client asked for a stream."""
        return isinstance(self.body, dict) and bool(self.body.get("stream"))


class Invalid(Exception):
    """A request the real service would reject."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


def _cache_control(value: Any, where: str) -> None:
    if value is None:
        return
    if not isinstance(value, dict) or value.get("type") != "ephemeral":
        raise Invalid(f"{where}.cache_control: type must be 'ephemeral'")
    if "ttl" in value and value["ttl"] not in ("5m", "1h"):
        raise Invalid(f"{where}.cache_control.ttl: must be '5m' or '1h'")


def _text_block(block: Any, where: str) -> None:
    if not isinstance(block, dict) or block.get("type") != "text":
        raise Invalid(f"{where}: expected a text block")
    if not isinstance(block.get("text"), str) or not block["text"]:
        raise Invalid(f"{where}: text content blocks must be non-empty")
    _cache_control(block.get("cache_control"), where)


def _block(block: Any, role: str, where: str, prior_tool_ids: set[str]) -> None:
    if not isinstance(block, dict) or "type" not in block:
        raise Invalid(f"{where}: each content block must be an object with a type")
    kind = block["type"]
    if kind not in BLOCK_TYPES:
        raise Invalid(f"{where}.type: unknown content block type {kind!r}")
    _cache_control(block.get("cache_control"), where)
    if kind == "text":
        _text_block(block, where)
    elif kind == "tool_use":
        if role != "assistant":
            raise Invalid(f"{where}: tool_use blocks are only allowed in assistant messages")
        if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
            raise Invalid(f"{where}: tool_use needs a string id and name")
        if not isinstance(block.get("input"), dict):
            raise Invalid(f"{where}.input: must be an object")
    elif kind == "tool_result":
        if role != "user":
            raise Invalid(f"{where}: tool_result blocks are only allowed in user messages")
        tid = block.get("tool_use_id")
        if tid not in prior_tool_ids:
            raise Invalid(
                f"{where}: unexpected `tool_use_id` found in `tool_result` blocks: {tid}. Each "
                "`tool_result` block must have a corresponding `tool_use` block in the "
                "previous message."
            )
        content = block.get("content")
        if isinstance(content, list):
            for j, inner in enumerate(content):
                if not isinstance(inner, dict) or inner.get("type") not in ("text", "image"):
                    raise Invalid(f"{where}.content.{j}: tool_result content is text or image")
                if inner["type"] == "text":
                    _text_block(inner, f"{where}.content.{j}")
        elif content is not None and not isinstance(content, str):
            raise Invalid(f"{where}.content: must be a string or a list of blocks")
    elif kind == "image" and not isinstance(block.get("source"), dict):
        raise Invalid(f"{where}.source: required")


def _messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise Invalid("messages: at least one message is required")
    prev_role: str | None = None
    prev_tool_ids: set[str] = set()
    for i, msg in enumerate(messages):
        where = f"messages.{i}"
        if not isinstance(msg, dict):
            raise Invalid(f"{where}: must be an object")
        role = msg.get("role")
        if role not in ("user", "assistant"):
            raise Invalid(f"{where}.role: must be 'user' or 'assistant'")
        if i == 0 and role != "user":
            raise Invalid("messages: the first message must use the user role")
        if role == prev_role:
            raise Invalid(f"messages: roles must alternate between user and assistant ({where})")
        content = msg.get("content")
        tool_ids: set[str] = set()
        answered: set[str] = set()
        if isinstance(content, str):
            if not content and not (role == "assistant" and i == len(messages) - 1):
                raise Invalid(f"{where}: content must be non-empty")
        elif isinstance(content, list):
            if not content:
                raise Invalid(f"{where}.content: at least one content block is required")
            for j, block in enumerate(content):
                _block(block, role, f"{where}.content.{j}", prev_tool_ids)
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    tool_ids.add(block["id"])
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    answered.add(block["tool_use_id"])
        else:
            raise Invalid(f"{where}.content: must be a string or a list of content blocks")
        if role == "user" and prev_tool_ids - answered:
            missing = ", ".join(sorted(prev_tool_ids - answered))
            raise Invalid(
                f"{where}: `tool_use` ids were found without `tool_result` blocks immediately "
                f"after: {missing}"
            )
        prev_role, prev_tool_ids = role, tool_ids


def _tools(tools: Any, tool_choice: Any) -> None:
    names: set[str] = set()
    if tools is not None:
        if not isinstance(tools, list):
            raise Invalid("tools: must be a list")
        for i, tool in enumerate(tools):
            where = f"tools.{i}"
            if not isinstance(tool, dict):
                raise Invalid(f"{where}: must be an object")
            if tool.get("type") not in (None, "custom"):
                continue  # a server tool: not emulated, not checked
            name = tool.get("name")
            if not isinstance(name, str) or not TOOL_NAME.match(name):
                raise Invalid(f"{where}.name: must match ^[a-zA-Z0-9_-]{{1,64}}$")
            if name in names:
                raise Invalid(f"tools: tool names must be unique ({name})")
            names.add(name)
            if not isinstance(tool.get("description"), str) or not tool["description"]:
                raise Invalid(f"{where}.description: a non-empty description is required")
            schema = tool.get("input_schema")
            if not isinstance(schema, dict) or schema.get("type") != "object":
                raise Invalid(f"{where}.input_schema: must be a JSON Schema with type 'object'")
            props = schema.get("properties", {})
            if not isinstance(props, dict) or not all(isinstance(p, dict) for p in props.values()):
                raise Invalid(f"{where}.input_schema.properties: must map names to schemas")
            required = schema.get("required", [])
            if not isinstance(required, list) or not set(required) <= set(props):
                raise Invalid(f"{where}.input_schema.required: must list defined properties")
            _cache_control(tool.get("cache_control"), where)
    if tool_choice is not None:
        if not isinstance(tool_choice, dict) or tool_choice.get("type") not in (
            "auto",
            "any",
            "tool",
            "none",
        ):
            raise Invalid("tool_choice.type: must be auto, any, tool or none")
        if tool_choice["type"] == "tool" and tool_choice.get("name") not in names:
            raise Invalid("tool_choice.name: must name one of the tools")


def validate(headers: dict[str, str], body: Any, api_key: str) -> None:
    """Raise Invalid when the real service would refuse this request."""
    # The SDK sends the key as ``x-api-key`` (1.x) or ``Authorization: Bearer`` (2.x).
    bearer = headers.get("authorization", "")
    key = headers.get("x-api-key") or (bearer[7:] if bearer.lower().startswith("bearer ") else "")
    if not key:
        raise Invalid("x-api-key header is required", 401)
    if key != api_key:
        raise Invalid("invalid x-api-key", 401)
    if not headers.get("anthropic-version"):
        raise Invalid("anthropic-version: header is required")
    if not isinstance(body, dict):
        raise Invalid("The request body is not valid JSON.")
    extra = sorted(set(body) - TOP_LEVEL)
    if extra:
        raise Invalid(f"{extra[0]}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise Invalid("model: Field required")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise Invalid("max_tokens: must be an integer greater than 0")
    _messages(body.get("messages"))
    system = body.get("system")
    if isinstance(system, list):
        for i, block in enumerate(system):
            _text_block(block, f"system.{i}")
    elif system is not None and not isinstance(system, str):
        raise Invalid("system: must be a string or a list of text blocks")
    _tools(body.get("tools"), body.get("tool_choice"))
    temperature = body.get("temperature")
    if temperature is not None and not (
        isinstance(temperature, int | float) and 0 <= temperature <= 1
    ):
        raise Invalid("temperature: must be between 0 and 1")
    stops = body.get("stop_sequences")
    if stops is not None and not (
        isinstance(stops, list) and all(isinstance(s, str) for s in stops)
    ):
        raise Invalid("stop_sequences: must be a list of strings")


def _chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False)) if value is not None else 0


def _error_body(kind: str, message: str, request_id: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": request_id}


def _chunks(text: str, words: int = 3) -> list[str]:
    pieces = re.findall(r"\S+\s*|\s+", text)
    return ["".join(pieces[i : i + words]) for i in range(0, len(pieces), words)] or [text]


class AnthropicEmulator:
    """The Messages API on 127.0.0.1, scripted with ``enqueue``."""

    def __init__(self, api_key: str = API_KEY, default: Responder | None = None) -> None:
        self.api_key = api_key
        self.default = default  # used when the queue is empty; None answers 500
        self.requests: list[RecordedRequest] = []
        self.hung_up = 0  # streams the client closed before their end
        self._queue: deque[Responder] = deque()
        self._cached: set[str] = set()
        self._runner: web.AppRunner | None = None
        self._port = 0

    @property
    def url(self) -> str:
        """Base URL for ``AsyncAnthropic(base_url=...)``."""
        return f"http://127.0.0.1:{self._port}"

    def enqueue(self, *replies: Responder | str, times: int = 1) -> None:
        """Script the next replies (a Reply, a text, or ``fn(body) -> Reply``), each
        ``times`` times in a row."""
        for reply in replies:
            for _ in range(times):
                self._queue.append(Reply(text=reply) if isinstance(reply, str) else reply)

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        return len(self._queue)

    def reset(self) -> None:
        """Forget scripted replies, recorded requests and the prompt cache."""
        self._queue.clear()
        self.requests.clear()
        self._cached.clear()

    async def start(self) -> None:
        """Listen on a free local port."""
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/count_tokens", self._count_tokens)
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

    async def __aenter__(self) -> AnthropicEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def _read(self, request: web.Request) -> RecordedRequest:
        headers = {k.lower(): v for k, v in request.headers.items()}
        try:
            body: Any = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        rec = RecordedRequest(path=request.path, headers=headers, body=body)
        self.requests.append(rec)
        return rec

    def _reject(self, rec: RecordedRequest, exc: Invalid) -> web.Response:
        rec.status, rec.error = exc.status, str(exc)
        rid = f"req_emu{uuid4().hex[:16]}"
        kind = ERROR_TYPES.get(exc.status, "invalid_request_error")
        return web.json_response(
            _error_body(kind, str(exc), rid), status=exc.status, headers={"request-id": rid}
        )

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        cached_chars, hit = 0, False
        system = body.get("system")
        if isinstance(system, list) and any(b.get("cache_control") for b in system):
            prefix = json.dumps([body.get("tools"), system], sort_keys=True)
            cached_chars = len(prefix)
            digest = hashlib.sha256(prefix.encode()).hexdigest()
            hit = digest in self._cached
            self._cached.add(digest)
        total = _chars(body.get("messages")) + _chars(system) + _chars(body.get("tools"))
        cached = cached_chars // 4
        return {
            "input_tokens": max(1, (total - cached_chars) // 4),
            "cache_creation_input_tokens": 0 if not cached or hit else cached,
            "cache_read_input_tokens": cached if cached and hit else 0,
        }

    async def _count_tokens(self, request: web.Request) -> web.Response:
        rec = await self._read(request)
        body = rec.body if isinstance(rec.body, dict) else {}
        return web.json_response({"input_tokens": max(1, _chars(body.get("messages")) // 4)})

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        rec = await self._read(request)
        try:
            validate(rec.headers, rec.body, self.api_key)
        except Invalid as exc:
            return self._reject(rec, exc)
        body: dict[str, Any] = rec.body
        responder = self._queue.popleft() if self._queue else self.default
        if responder is None:
            return self._reject(rec, Invalid("emulator: no reply was enqueued", 500))
        reply = responder(body) if callable(responder) else responder
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        rid = f"req_emu{uuid4().hex[:16]}"
        if reply.status != 200:
            rec.status = reply.status
            headers = {"request-id": rid}
            if reply.retry_after is not None:
                headers["retry-after"] = f"{reply.retry_after:g}"
            kind = reply.error_type or ERROR_TYPES.get(reply.status, "api_error")
            text = reply.error_message or kind.replace("_", " ").capitalize()
            return web.json_response(
                _error_body(kind, text, rid), status=reply.status, headers=headers
            )
        blocks: list[dict[str, Any]] = []
        if reply.text is not None:
            blocks.append({"type": "text", "text": reply.text})
        blocks.extend(
            {"type": "tool_use", "id": u.id, "name": u.name, "input": u.input}
            for u in reply.tool_uses
        )
        if reply.raw_input is not None:
            for block in blocks:
                if block["type"] == "tool_use":
                    block["input"] = reply.raw_input
        stop = reply.stop_reason or ("tool_use" if reply.tool_uses else "end_turn")
        usage = {**self._usage(body), "output_tokens": max(1, _chars(blocks) // 4)}
        message: dict[str, Any] = {
            "id": f"msg_emu{uuid4().hex[:20]}",
            "type": "message",
            "role": "assistant",
            "model": reply.model or body["model"],
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            if reply.fault == "reset":  # the connection drops before any response
                assert request.transport is not None
                request.transport.abort()
                return web.Response()
            if reply.fault == "truncated":
                raw = json.dumps(message)
                return web.Response(
                    text=raw[: len(raw) // 2],
                    content_type="application/json",
                    headers={"request-id": rid},
                )
            return web.json_response(message, headers={"request-id": rid})
        try:
            return await self._stream(request, reply, message, rid)
        except ConnectionError:  # the client hung up mid-stream (it stopped listening)
            self.hung_up += 1
            return web.Response()

    async def _stream(
        self, request: web.Request, reply: Reply, message: dict[str, Any], rid: str
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "content-type": "text/event-stream",
                "cache-control": "no-cache",
                "request-id": rid,
            }
        )
        await resp.prepare(request)
        if reply.fault == "empty":
            await resp.write_eof()
            return resp

        async def send(event: str, data: dict[str, Any]) -> None:
            await resp.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

        usage = message["usage"]
        start = {
            **message,
            "content": [],
            "stop_reason": None,
            "usage": {**usage, "output_tokens": 1},
        }
        await send("message_start", {"type": "message_start", "message": start})
        sent_delta = False
        for index, block in enumerate(message["content"]):
            empty = (
                {"type": "text", "text": ""} if block["type"] == "text" else {**block, "input": {}}
            )
            await send(
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": empty},
            )
            if index == 0:
                await send("ping", {"type": "ping"})
            if block["type"] == "text":
                deltas = [{"type": "text_delta", "text": c} for c in _chunks(block["text"])]
            else:
                raw = json.dumps(block["input"])
                deltas = [
                    {"type": "input_json_delta", "partial_json": raw[i : i + 12]}
                    for i in range(0, len(raw), 12)
                ]
            for delta in deltas:
                if reply.chunk_delay_s:
                    await asyncio.sleep(reply.chunk_delay_s)
                await send(
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
                if reply.fault in ("reset", "malformed", "truncated") and not sent_delta:
                    await self._break(request, resp, reply.fault)
                    return resp
                if reply.stream_error and not sent_delta:
                    await send(
                        "error",
                        _error_body(reply.stream_error, "Overloaded", rid),
                    )
                    await resp.write_eof()
                    return resp
                sent_delta = True
            await send("content_block_stop", {"type": "content_block_stop", "index": index})
        await send(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                "usage": {"output_tokens": usage["output_tokens"]},
            },
        )
        if reply.fault != "no_stop":
            await send("message_stop", {"type": "message_stop"})
        await resp.write_eof()
        return resp

    @staticmethod
    async def _break(request: web.Request, resp: web.StreamResponse, fault: str) -> None:
        """End a stream badly, after its first delta."""
        if fault == "malformed":
            await resp.write(b"event: content_block_delta\ndata: {not json at all\n\n")
            await resp.write_eof()
        elif fault == "truncated":
            await resp.write(b'event: content_block_delta\ndata: {"type": "content_block_del')
            await resp.write_eof()
        else:  # "reset": the connection drops with the body unfinished
            assert request.transport is not None
            request.transport.abort()
