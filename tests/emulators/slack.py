"""A local emulator of Slack for tests and benchmarks: the Web API the real
``AsyncWebClient`` talks to, the Socket Mode WebSocket, ``response_url`` webhooks, and
Slack's side of the Events API (signed event, slash-command and block-action requests).

Web API calls are checked the way Slack checks them and refused with Slack's error codes:
the bearer token (``not_authed`` / ``invalid_auth``), ``channel`` (``channel_not_found``),
``text`` or ``blocks`` (``no_text``), ``thread_ts`` naming an existing message
(``thread_not_found``), ``chat.update`` of a message the bot posted (``message_not_found``
/ ``cant_update_message``), Block Kit limits (``invalid_blocks``: at most 50 blocks, 3000
characters of section text, 10 context elements, unique action and block ids) and
``msg_too_long``. The AI-app methods too: ``assistant.threads.setStatus`` and
``setSuggestedPrompts`` (the ``assistant:write`` scope, an assistant thread, 1-4 prompts
with title and message) and the stream lifecycle (``chat.startStream`` in an existing
thread, with recipient team and user outside DMs, refused with ``refuse_streams``;
``appendStream``/``stopStream`` only while streaming, one stop per stream; no
``chat.update`` of a message still streaming). ``rate_limited[method] = n`` answers
the next n calls with a 429 and ``Retry-After: 1``, as Slack does when an app posts too
fast. Every call is recorded.

    async with SlackEmulator() as slack:
        AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)
        slack.target = "http://127.0.0.1:3000/slack/events"
        msg = slack.user_posts("C0GENERAL", f"<@{BOT_USER}> when did we cut over?")
        await slack.deliver_event(slack.event(msg, "app_mention"), retry_num=1)
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import aiohttp
from aiohttp import web

TEAM = "T0QUORUM"
BOT_USER = "U0QUORUM"
BOT_ID = "B0QUORUM"
APP_ID = "A0QUORUM"
ALICE = "U0ALICE"
BOT_TOKEN = "xoxb-emulator-bot-token"
APP_TOKEN = "xapp-emulator-app-token"
SIGNING_SECRET = "emulator-signing-secret"
BOT_SCOPES = (
    "app_mentions:read",
    "assistant:write",
    "channels:history",
    "chat:write",
    "commands",
    "files:read",
    "groups:history",
    "im:history",
    "im:write",
    "mpim:history",
)
CHANNELS = {"C0GENERAL": "channel", "C0RANDOM": "channel", "G0PRIVATE": "group", "D0ALICE": "im"}

MAX_BLOCKS = 50
SECTION_TEXT = 3000
FIELD_TEXT = 2000
CONTEXT_ELEMENTS = 10
CONTEXT_TEXT = 3000
ACTION_ELEMENTS = 25
BUTTON_TEXT = 75
MAX_TEXT = 40000
BLOCK_TYPES = {"section", "context", "actions", "divider", "header", "image", "rich_text"}


_ASSISTANT: dict[str, Any] = {}  # AI-app methods, filled in below the emulator


class SlackError(Exception):
    """A Web API refusal: ``{"ok": false, "error": code}``."""

    def __init__(self, code: str, detail: str = "") -> None:
        super().__init__(code)
        self.code = code
        self.detail = detail


@dataclass
class Message:
    """A message in a channel, with every version an update gave it."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]]
    user: str | None = None
    bot_id: str | None = None
    thread_ts: str | None = None
    versions: list[dict[str, Any]] = field(default_factory=list)
    streaming: bool | None = None  # None: posted whole; True while streaming; False: stopped
    appended: list[str] = field(default_factory=list)  # each markdown_text a stream got

    def payload(self) -> dict[str, Any]:
        """The message as Slack shows it in an interaction payload."""
        out: dict[str, Any] = {"type": "message", "ts": self.ts, "text": self.text}
        if self.blocks:
            out["blocks"] = self.blocks
        if self.user:
            out["user"] = self.user
        if self.bot_id:
            out["bot_id"] = self.bot_id
        if self.thread_ts:
            out["thread_ts"] = self.thread_ts
        return out

    def all_text(self) -> str:
        """The text plus every text inside the blocks (for assertions)."""
        return self.text + "\n" + "\n".join(texts_in(self.blocks))


@dataclass
class Call:
    """One Web API call as received, and how it was answered."""

    method: str
    args: dict[str, Any]
    error: str | None
    at: float
    result: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the call succeeded."""
        return self.error is None


@dataclass
class Delivery:
    """Slack's view of delivering one request to the app: status, body, seconds."""

    status: int
    body: str
    seconds: float


def texts_in(value: Any) -> list[str]:
    if isinstance(value, dict):
        out = [value["text"]] if isinstance(value.get("text"), str) else []
        return out + [t for v in value.values() for t in texts_in(v)]
    if isinstance(value, list):
        return [t for v in value for t in texts_in(v)]
    return []


def _text_obj(obj: Any, limit: int, where: str, kinds: tuple[str, ...]) -> None:
    if not isinstance(obj, dict) or obj.get("type") not in kinds:
        raise SlackError("invalid_blocks", f"{where}: a text object of type {kinds}")
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        raise SlackError("invalid_blocks", f"{where}: text must be a non-empty string")
    if len(text) > limit:
        raise SlackError("invalid_blocks", f"{where}: {len(text)} characters > {limit}")


def validate_blocks(blocks: Any) -> None:
    """Raise SlackError("invalid_blocks") where Slack would refuse the blocks."""
    if not isinstance(blocks, list):
        raise SlackError("invalid_blocks", "blocks must be a list")
    if len(blocks) > MAX_BLOCKS:
        raise SlackError("invalid_blocks", f"{len(blocks)} blocks > {MAX_BLOCKS}")
    block_ids: set[str] = set()
    action_ids: set[str] = set()
    for i, block in enumerate(blocks):
        where = f"blocks[{i}]"
        if not isinstance(block, dict) or block.get("type") not in BLOCK_TYPES:
            raise SlackError("invalid_blocks", f"{where}: unknown block type")
        if (bid := block.get("block_id")) is not None:
            if bid in block_ids or not isinstance(bid, str) or len(bid) > 255:
                raise SlackError("invalid_blocks", f"{where}: block_id repeated or too long")
            block_ids.add(bid)
        kind = block["type"]
        if kind == "section":
            if "text" not in block and "fields" not in block:
                raise SlackError("invalid_blocks", f"{where}: section needs text or fields")
            if "text" in block:
                _text_obj(block["text"], SECTION_TEXT, where, ("mrkdwn", "plain_text"))
            for f in block.get("fields", []):
                _text_obj(f, FIELD_TEXT, where, ("mrkdwn", "plain_text"))
        elif kind == "header":
            _text_obj(block.get("text"), 150, where, ("plain_text",))
        elif kind == "context":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= CONTEXT_ELEMENTS:
                raise SlackError("invalid_blocks", f"{where}: context takes 1-10 elements")
            for e in elements:
                if isinstance(e, dict) and e.get("type") == "image":
                    continue
                _text_obj(e, CONTEXT_TEXT, where, ("mrkdwn", "plain_text"))
        elif kind == "actions":
            elements = block.get("elements")
            if not isinstance(elements, list) or not 1 <= len(elements) <= ACTION_ELEMENTS:
                raise SlackError("invalid_blocks", f"{where}: actions takes 1-25 elements")
            for e in elements:
                aid = e.get("action_id") if isinstance(e, dict) else None
                if not isinstance(aid, str) or aid in action_ids or len(aid) > 255:
                    raise SlackError("invalid_blocks", f"{where}: action_id missing or repeated")
                action_ids.add(aid)
                if e.get("type") == "button":
                    _text_obj(e.get("text"), BUTTON_TEXT, where, ("plain_text",))
                    if len(str(e.get("value", ""))) > 2000:
                        raise SlackError("invalid_blocks", f"{where}: button value too long")


def sign(body: str, timestamp: int, secret: str = SIGNING_SECRET) -> str:
    """Slack's v0 request signature: HMAC-SHA256 of ``v0:{timestamp}:{body}``."""
    base = f"v0:{timestamp}:{body}".encode()
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class SlackEmulator:
    """Slack on 127.0.0.1: the Web API at ``api_url``, a Socket Mode WebSocket, and
    helpers that deliver signed requests to the app at ``target``."""

    def __init__(
        self,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        signing_secret: str = SIGNING_SECRET,
        channels: dict[str, str] | None = None,
    ) -> None:
        self.bot_token, self.app_token, self.signing_secret = bot_token, app_token, signing_secret
        self.channels = dict(channels or CHANNELS)
        self.messages: dict[str, dict[str, Message]] = {c: {} for c in self.channels}
        self.calls: list[Call] = []
        self.ephemerals: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []  # posts to response_url
        self.socket_acks: list[dict[str, Any]] = []
        self.target: str | None = None  # the app's /slack/events URL
        self.scopes = list(BOT_SCOPES)  # granted to the bot token (x-oauth-scopes)
        self.rate_limited: dict[str, int] = {}  # method -> how many more calls get a 429
        self.refuse_streams: str | None = None  # chat.startStream's error (e.g. not_allowed)
        self.deleted: list[Message] = []  # messages removed by chat.delete
        self.failing: dict[str, str] = {}  # method -> the error every call of it gets
        self.assistant_threads: set[tuple[str, str]] = set()  # (channel, thread_ts)
        self.statuses: dict[tuple[str, str], list[str]] = {}  # setStatus per thread
        self.prompts: dict[tuple[str, str], list[dict[str, str]]] = {}  # the latest per thread
        self.files: dict[str, bytes] = {}  # file id -> its bytes
        self.downloads: list[tuple[str, bool]] = []  # (file id, authorized) per request
        self.sent: dict[str, int] = {}  # file id -> bytes written to the downloader
        self._clock = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._sockets: list[web.WebSocketResponse] = []
        self._port = 0

    # ------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        """Base URL of the emulator."""
        return f"http://127.0.0.1:{self._port}"

    @property
    def api_url(self) -> str:
        """Web API base URL for ``AsyncWebClient(base_url=...)`` / QUORUM_SLACK_API_URL."""
        return f"{self.url}/api/"

    async def start(self) -> None:
        """Listen on a free local port."""
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_post("/respond/{id}", self._respond)
        app.router.add_get("/socket", self._socket)
        app.router.add_get("/files-pri/{id}/{name}", self._download)
        app.router.add_get("/signin", self._signin)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = self._runner.addresses[0][1]
        self._session = aiohttp.ClientSession()

    async def stop(self) -> None:
        """Close sockets and stop listening."""
        for ws in list(self._sockets):
            await ws.close()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> SlackEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ Web API

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._clock):06d}"

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        call = Call(method, {k: v for k, v in args.items() if k != "token"}, None, time.time())
        self.calls.append(call)
        if self.rate_limited.get(method, 0) > 0:
            self.rate_limited[method] -= 1
            call.error = "ratelimited"
            return web.json_response(
                {"ok": False, "error": "ratelimited"}, status=429, headers={"Retry-After": "1"}
            )
        try:
            call.result = self._dispatch(method, request.headers.get("Authorization"), args)
        except SlackError as exc:
            call.error = exc.code
            body: dict[str, Any] = {"ok": False, "error": exc.code}
            if exc.detail:
                body["response_metadata"] = {"messages": [f"[ERROR] {exc.detail}"]}
            return web.json_response(body)
        # Slack names the token's scopes on every Web API response.
        headers = {"x-oauth-scopes": ",".join(self.scopes)}
        return web.json_response({"ok": True, **call.result}, headers=headers)

    async def _args(self, request: web.Request) -> dict[str, Any]:
        raw = await request.text()
        if request.content_type == "application/json":
            args: dict[str, Any] = json.loads(raw) if raw else {}
        else:
            args = dict(parse_qsl(raw, keep_blank_values=True))
        args.update(dict(request.query))
        if isinstance(args.get("blocks"), str):
            try:
                args["blocks"] = json.loads(args["blocks"])
            except json.JSONDecodeError:
                args["blocks"] = "not json"
        return args

    def _auth(self, header: str | None, args: dict[str, Any], want: str) -> None:
        token = header.removeprefix("Bearer ").strip() if header else args.get("token")
        if not token:
            raise SlackError("not_authed")
        if token != want:
            raise SlackError("invalid_auth")

    def _dispatch(self, method: str, auth: str | None, args: dict[str, Any]) -> dict[str, Any]:
        if method == "apps.connections.open":
            self._auth(auth, args, self.app_token)
            return {"url": f"ws://127.0.0.1:{self._port}/socket"}
        self._auth(auth, args, self.bot_token)
        if method in self.failing:
            raise SlackError(self.failing[method])
        if method == "auth.test":
            return {
                "url": "https://quorum-emulator.slack.com/",
                "team": "Quorum Emulator",
                "user": "quorum",
                "team_id": TEAM,
                "user_id": BOT_USER,
                "bot_id": BOT_ID,
                "is_enterprise_install": False,
            }
        if method == "chat.postMessage":
            return self._post(args)
        if method == "chat.update":
            return self._update(args)
        if method == "chat.postEphemeral":
            return self._ephemeral(args)
        if method == "chat.delete":
            return self._delete(args)
        if method in _ASSISTANT:
            return _ASSISTANT[method](self, args)
        raise SlackError("unknown_method")

    # ------------------------------------------------------------ AI apps

    def _scope(self, scope: str) -> None:
        if scope not in self.scopes:
            raise SlackError("missing_scope", f"needed: {scope}")

    def _assistant_thread(self, args: dict[str, Any]) -> tuple[str, str]:
        channel_id, thread_ts = args.get("channel_id"), args.get("thread_ts")
        if not channel_id or not thread_ts:
            raise SlackError("invalid_arguments", "channel_id and thread_ts are required")
        if channel_id not in self.channels:
            raise SlackError("channel_not_found")
        if (channel_id, thread_ts) not in self.assistant_threads:
            raise SlackError("invalid_thread_ts", "not an assistant thread")
        return str(channel_id), str(thread_ts)

    def _set_status(self, args: dict[str, Any]) -> dict[str, Any]:
        self._scope("assistant:write")
        key = self._assistant_thread(args)
        if not isinstance(args.get("status"), str):
            raise SlackError("invalid_arguments", "status is required")
        self.statuses.setdefault(key, []).append(args["status"])
        return {}

    def _clear_status(self, channel: str, thread_ts: str) -> None:
        """Slack clears an assistant thread's status when the app replies in it."""
        shown = self.statuses.get((channel, thread_ts))
        if shown and shown[-1]:
            shown.append("")

    def _set_prompts(self, args: dict[str, Any]) -> dict[str, Any]:
        self._scope("assistant:write")
        key = self._assistant_thread(args)
        prompts = args.get("prompts")
        if not isinstance(prompts, list) or not 1 <= len(prompts) <= 4:
            raise SlackError("invalid_arguments", "prompts: 1 to 4 of them")
        for p in prompts:
            if not isinstance(p, dict) or not p.get("title") or not p.get("message"):
                raise SlackError("invalid_arguments", "each prompt needs a title and a message")
        self.prompts[key] = [dict(p) for p in prompts]
        return {}

    def _start_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        self._scope("chat:write")
        channel = self._channel(args)
        thread_ts = args.get("thread_ts")
        if not thread_ts:
            raise SlackError("invalid_arguments", "thread_ts is required")
        if thread_ts not in self.messages[channel]:
            raise SlackError("thread_not_found")
        if self.refuse_streams:
            raise SlackError(self.refuse_streams)
        if self.channels[channel] != "im":  # Slack: required when streaming to channels
            if args.get("recipient_team_id") != TEAM or not args.get("recipient_user_id"):
                raise SlackError("invalid_arguments", "recipient_team_id and _user_id required")
        text = str(args.get("markdown_text") or "")
        msg = Message(channel, self._next_ts(), text, [], BOT_USER, BOT_ID, str(thread_ts))
        msg.streaming, msg.appended = True, [text] if text else []
        msg.versions.append({"text": text, "blocks": []})
        self.messages[channel][msg.ts] = msg
        self._clear_status(channel, str(thread_ts))
        return {"channel": channel, "ts": msg.ts}

    def _streaming(self, args: dict[str, Any]) -> Message:
        channel = self._channel(args)
        msg = self.messages[channel].get(str(args.get("ts")))
        if msg is None:
            raise SlackError("message_not_found")
        if msg.bot_id != BOT_ID or msg.streaming is not True:
            raise SlackError("message_not_in_streaming_state")
        return msg

    def _append_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        msg = self._streaming(args)
        text = args.get("markdown_text")
        if not text and not args.get("chunks"):
            raise SlackError("no_text")
        if len(msg.text) + len(text or "") > MAX_TEXT:
            raise SlackError("msg_too_long")
        msg.text += str(text or "")
        msg.appended.append(str(text or ""))
        msg.versions.append({"text": msg.text, "blocks": []})
        return {"channel": msg.channel, "ts": msg.ts}

    def _stop_stream(self, args: dict[str, Any]) -> dict[str, Any]:
        msg = self._streaming(args)
        msg.text += str(args.get("markdown_text") or "")
        if args.get("blocks") is not None:
            validate_blocks(args["blocks"])
            msg.blocks = list(args["blocks"])
        msg.streaming = False
        msg.versions.append({"text": msg.text, "blocks": msg.blocks})
        return {"channel": msg.channel, "ts": msg.ts, "message": msg.payload()}

    def open_assistant(
        self, user: str = ALICE, viewing: str | None = "C0GENERAL", channel: str = "D0ALICE"
    ) -> dict[str, Any]:
        """A user opens the assistant panel (beside ``viewing``): its parent message in the
        app's DM, and the ``assistant_thread_started`` envelope Slack sends."""
        parent = Message(channel, self._next_ts(), "New Assistant Thread", [], BOT_USER, BOT_ID)
        self.messages[channel][parent.ts] = parent
        self.assistant_threads.add((channel, parent.ts))
        return self._assistant_event("assistant_thread_started", user, channel, parent.ts, viewing)

    def assistant_context_changed(
        self, thread: dict[str, Any], viewing: str, user: str = ALICE
    ) -> dict[str, Any]:
        """The user switches channels with the panel open."""
        at = thread["event"]["assistant_thread"]
        return self._assistant_event(
            "assistant_thread_context_changed", user, at["channel_id"], at["thread_ts"], viewing
        )

    def _assistant_event(
        self, kind: str, user: str, channel: str, thread_ts: str, viewing: str | None
    ) -> dict[str, Any]:
        context = {"channel_id": viewing, "team_id": TEAM, "enterprise_id": None}
        event = {
            "type": kind,
            "assistant_thread": {
                "user_id": user,
                "context": context if viewing else {},
                "channel_id": channel,
                "thread_ts": thread_ts,
            },
            "event_ts": self._next_ts(),
        }
        msg = Message(channel, thread_ts, "", [])
        envelope = self.event(msg)
        envelope["event"] = event
        return envelope

    def _channel(self, args: dict[str, Any]) -> str:
        channel = args.get("channel")
        if not channel or channel not in self.channels:
            raise SlackError("channel_not_found")
        return str(channel)

    def _content(self, args: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        text, blocks = args.get("text") or "", args.get("blocks")
        if not text and not blocks:
            raise SlackError("no_text")
        if blocks is not None:
            validate_blocks(blocks)
        if len(text) > MAX_TEXT:
            raise SlackError("msg_too_long")
        return text, list(blocks or [])

    def _post(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args)
        text, blocks = self._content(args)
        thread_ts = args.get("thread_ts") or None
        if thread_ts is not None and thread_ts not in self.messages[channel]:
            raise SlackError("thread_not_found")
        msg = Message(channel, self._next_ts(), text, blocks, BOT_USER, BOT_ID, thread_ts)
        msg.versions.append({"text": text, "blocks": blocks})
        self.messages[channel][msg.ts] = msg
        if thread_ts is not None:
            self._clear_status(channel, thread_ts)
        return {"channel": channel, "ts": msg.ts, "message": msg.payload()}

    def _update(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args)
        msg = self.messages[channel].get(str(args.get("ts")))
        if msg is None:
            raise SlackError("message_not_found")
        if msg.bot_id != BOT_ID or msg.streaming is True:
            raise SlackError("cant_update_message")
        text, blocks = self._content(args)
        msg.text, msg.blocks = text, blocks
        msg.versions.append({"text": text, "blocks": blocks})
        return {"channel": channel, "ts": msg.ts, "text": text, "message": msg.payload()}

    def _delete(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args)
        msg = self.messages[channel].get(str(args.get("ts")))
        if msg is None:
            raise SlackError("message_not_found")
        if msg.bot_id != BOT_ID:
            raise SlackError("cant_delete_message")
        del self.messages[channel][msg.ts]
        self.deleted.append(msg)
        return {"channel": channel, "ts": msg.ts}

    def _ephemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(args)
        if not args.get("user"):
            raise SlackError("user_not_in_channel")
        text, blocks = self._content(args)
        thread_ts = args.get("thread_ts") or None
        if thread_ts is not None and thread_ts not in self.messages[channel]:
            raise SlackError("thread_not_found")
        note = {"channel": channel, "user": args["user"], "text": text, "blocks": blocks}
        self.ephemerals.append({**note, "thread_ts": thread_ts})
        return {"message_ts": self._next_ts()}

    async def _respond(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.responses.append({"id": request.match_info["id"], **body})
        return web.Response(text="ok")

    # ------------------------------------------------------------ files

    def share_file(self, name: str, data: bytes, size: int | None = None) -> dict[str, Any]:
        """A file a user uploads: the file object Slack puts on the message event.
        ``size`` overrides the reported size (a file too large to send in a test)."""
        file_id = f"F{uuid.uuid4().hex[:10].upper()}"
        self.files[file_id] = data
        url = f"{self.url}/files-pri/{TEAM}-{file_id}/{name}"
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "size": len(data) if size is None else size,
            "mode": "hosted",
            "url_private": url,
            "url_private_download": url + "?download=1",
        }

    async def _download(self, request: web.Request) -> web.StreamResponse:
        """``url_private_download``: the file to its team's bot token (``Authorization:
        Bearer``), else Slack's redirect to the sign-in page."""
        file_id = request.match_info["id"].removeprefix(f"{TEAM}-")
        header = request.headers.get("Authorization", "")
        authorized = header == f"Bearer {self.bot_token}"
        self.downloads.append((file_id, authorized))
        if not authorized:
            raise web.HTTPFound("/signin")
        if file_id not in self.files:
            raise web.HTTPNotFound()
        # Streamed without a length (as a CDN may): the downloader sees the size as it comes.
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        await resp.prepare(request)
        data, self.sent[file_id] = self.files[file_id], 0
        try:
            for at in range(0, len(data), 1 << 16):
                await resp.write(data[at : at + (1 << 16)])
                self.sent[file_id] += len(data[at : at + (1 << 16)])
            await resp.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the downloader hung up
        return resp

    async def _signin(self, request: web.Request) -> web.Response:
        return web.Response(text="<html>Sign in to Slack</html>", content_type="text/html")

    # ------------------------------------------------------------ what happened

    def called(self, method: str, ok: bool | None = None) -> list[Call]:
        """Recorded calls of one method (only successful or failed ones when ``ok`` is set)."""
        return [c for c in self.calls if c.method == method and (ok is None or c.ok == ok)]

    def errors(self) -> list[Call]:
        """Calls Slack refused."""
        return [c for c in self.calls if not c.ok]

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        """Replies in a thread (not its first message), oldest first."""
        found = [m for m in self.messages[channel].values() if m.thread_ts == thread_ts]
        return sorted(found, key=lambda m: m.ts)

    def top_level(self, channel: str) -> list[Message]:
        """Messages not in a thread, oldest first."""
        found = [m for m in self.messages[channel].values() if m.thread_ts is None]
        return sorted(found, key=lambda m: m.ts)

    def bot_messages(self) -> list[Message]:
        """Every message the bot posted, anywhere."""
        return [m for msgs in self.messages.values() for m in msgs.values() if m.bot_id]

    async def wait_for(self, predicate: Any, within_s: float = 10.0) -> None:
        """Wait until ``predicate()`` is true (AssertionError after ``within_s``)."""
        deadline = time.monotonic() + within_s
        while not predicate():
            if time.monotonic() > deadline:
                raise AssertionError("timed out waiting for the emulator")
            await asyncio.sleep(0.01)

    # ------------------------------------------------------------ the user's side

    def user_posts(
        self, channel: str, text: str, user: str = ALICE, thread_ts: str | None = None
    ) -> Message:
        """A user's message appears in a channel (or a thread)."""
        msg = Message(channel, self._next_ts(), text, [], user=user, thread_ts=thread_ts)
        self.messages[channel][msg.ts] = msg
        return msg

    def event(
        self, msg: Message, kind: str = "message", event_id: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        """The Events API envelope Slack sends for a message (``message`` or ``app_mention``)."""
        event: dict[str, Any] = {
            "type": kind,
            "channel": msg.channel,
            "text": msg.text,
            "ts": msg.ts,
            "event_ts": msg.ts,
            "team": TEAM,
        }
        if msg.user:
            event["user"] = msg.user
        if msg.bot_id:
            event["bot_id"] = msg.bot_id
        if msg.thread_ts:
            event["thread_ts"] = msg.thread_ts
        if kind == "message":
            event["channel_type"] = self.channels[msg.channel]
        event.update(extra)
        return {
            "token": "legacy-verification-token",
            "team_id": TEAM,
            "api_app_id": APP_ID,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{uuid.uuid4().hex[:10].upper()}",
            "event_time": int(time.time()),
            "authorizations": [
                {"team_id": TEAM, "user_id": BOT_USER, "is_bot": True, "enterprise_id": None}
            ],
            "is_ext_shared_channel": False,
        }

    def command(
        self, name: str, text: str, channel: str = "C0GENERAL", user: str = ALICE
    ) -> dict[str, str]:
        """The form fields of a slash command invocation."""
        return {
            "token": "legacy-verification-token",
            "team_id": TEAM,
            "team_domain": "quorum-emulator",
            "channel_id": channel,
            "channel_name": channel.lower(),
            "user_id": user,
            "user_name": "alice",
            "command": name,
            "text": text,
            "api_app_id": APP_ID,
            "response_url": f"{self.url}/respond/{uuid.uuid4().hex[:8]}",
            "trigger_id": f"{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:8]}",
        }

    def block_action(self, msg: Message, action_id: str, user: str = ALICE) -> dict[str, Any]:
        """The interaction payload of a click on a button in ``msg``."""
        button = next(
            (e, b)
            for b in msg.blocks
            if b.get("type") == "actions"
            for e in b["elements"]
            if e.get("action_id") == action_id
        )
        element, block = button
        return {
            "type": "block_actions",
            "user": {"id": user, "username": "alice", "team_id": TEAM},
            "api_app_id": APP_ID,
            "token": "legacy-verification-token",
            "container": {
                "type": "message",
                "message_ts": msg.ts,
                "channel_id": msg.channel,
                "is_ephemeral": False,
                "thread_ts": msg.thread_ts,
            },
            "trigger_id": f"{uuid.uuid4().int % 10**12}.{uuid.uuid4().hex[:8]}",
            "team": {"id": TEAM, "domain": "quorum-emulator"},
            "channel": {"id": msg.channel, "name": msg.channel.lower()},
            "message": msg.payload(),
            "response_url": f"{self.url}/respond/{uuid.uuid4().hex[:8]}",
            "actions": [
                {
                    "type": element.get("type", "button"),
                    "action_id": action_id,
                    "block_id": block.get("block_id", "b"),
                    "value": element.get("value"),
                    "text": element.get("text"),
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }

    def signed(
        self,
        body: str,
        content_type: str,
        *,
        retry_num: int | None = None,
        timestamp: int | None = None,
        secret: str | None = None,
    ) -> dict[str, str]:
        """Headers Slack sends with a request body, signature included."""
        ts = int(time.time()) if timestamp is None else timestamp
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": str(ts),
            "X-Slack-Signature": sign(body, ts, secret or self.signing_secret),
        }
        if retry_num is not None:
            headers["X-Slack-Retry-Num"] = str(retry_num)
            headers["X-Slack-Retry-Reason"] = "http_timeout"
        return headers

    async def deliver(self, body: str, content_type: str, **sign_opts: Any) -> Delivery:
        """POST a signed body to the app's events URL, as Slack does."""
        assert self.target and self._session, "start() the emulator and set .target"
        headers = self.signed(body, content_type, **sign_opts)
        t0 = time.perf_counter()
        async with self._session.post(self.target, data=body.encode(), headers=headers) as r:
            text = await r.text()
            return Delivery(r.status, text, time.perf_counter() - t0)

    async def deliver_event(self, payload: dict[str, Any], **sign_opts: Any) -> Delivery:
        """Deliver an Events API envelope."""
        return await self.deliver(json.dumps(payload), "application/json", **sign_opts)

    async def deliver_command(self, fields: dict[str, str], **sign_opts: Any) -> Delivery:
        """Deliver a slash command."""
        return await self.deliver(
            urlencode(fields), "application/x-www-form-urlencoded", **sign_opts
        )

    async def deliver_action(self, payload: dict[str, Any], **sign_opts: Any) -> Delivery:
        """Deliver an interaction (a button click)."""
        body = urlencode({"payload": json.dumps(payload)})
        return await self.deliver(body, "application/x-www-form-urlencoded", **sign_opts)

    # ------------------------------------------------------------ Socket Mode

    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        await ws.send_json(
            {
                "type": "hello",
                "num_connections": len(self._sockets),
                "debug_info": {"host": "emulator", "approximate_connection_time": 3600},
                "connection_info": {"app_id": APP_ID},
            }
        )
        try:
            async for frame in ws:
                if frame.type == aiohttp.WSMsgType.TEXT:
                    self.socket_acks.append(json.loads(frame.data))
        finally:
            self._sockets.remove(ws)
        return ws

    @property
    def socket_connected(self) -> bool:
        """True while a Socket Mode client is connected."""
        return bool(self._sockets)

    async def send_envelope(self, kind: str, payload: dict[str, Any], retry: int = 0) -> str:
        """Send a Socket Mode envelope (``events_api``, ``slash_commands``, ``interactive``)."""
        envelope_id = str(uuid.uuid4())
        await self._sockets[-1].send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "payload": payload,
                "accepts_response_payload": kind != "events_api",
                "retry_attempt": retry,
                "retry_reason": "timeout" if retry else "",
            }
        )
        return envelope_id


_ASSISTANT.update(
    {
        "assistant.threads.setStatus": SlackEmulator._set_status,
        "assistant.threads.setSuggestedPrompts": SlackEmulator._set_prompts,
        "chat.startStream": SlackEmulator._start_stream,
        "chat.appendStream": SlackEmulator._append_stream,
        "chat.stopStream": SlackEmulator._stop_stream,
    }
)
