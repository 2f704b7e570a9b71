"""A local emulator of the Discord REST API (v10) for tests: discord.py's own HTTP client
is pointed at it (``discord.http.Route.BASE = emulator.url``), and gateway events are
handed to the client as the payload dicts Discord would send (``emulator.slash(...)``,
``emulator.post(...)``, ``emulator.click(...)``, and the MESSAGE_CREATE / THREAD_CREATE
events queued in ``emulator.events`` when the bot posts or starts a thread).

It checks what Discord checks and answers in Discord's error shape:

- ``Authorization: Bot <token>`` on bot routes (401), none needed on interaction routes;
- interaction callbacks: known interaction and token, within 3 s of creation (10062
  Unknown interaction), once only (40060), a response type that fits the interaction;
- follow-ups only after a response (10015 Unknown Webhook); the first follow-up after a
  deferred ("thinking") response replaces the loading message, as on Discord;
- message bodies: content <= 2000, <= 10 embeds, title <= 256, description <= 4096,
  <= 25 fields (name <= 256, value <= 1024), footer <= 2048, <= 6000 characters across
  all embeds, action rows of <= 5 well-formed buttons with unique custom ids <= 100
  characters, and never an empty message (400 50035 Invalid Form Body / 50006);
- attachments on the CDN only by their signed URL (``ex``/``is``/``hm``: an unsigned,
  tampered or expired link is 404 "This content is no longer available."), as Discord's
  CDN serves them; every download is recorded in ``emulator.downloads``;
- thread names of 1-100 characters, one thread per message (160004), channels and
  messages that exist (10003, 10008); scripted failures such as 403 50013 Missing
  Permissions (``emulator.fail(...)``).

Every request is recorded in ``emulator.calls``; routes it does not know land in
``emulator.unexpected`` (and get Discord's 404).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from aiohttp import WSMsgType, web

TOKEN = "emulator-bot-token"
APP_ID = 1200000000000000001  # the bot user's id is the application's, as on Discord
DISCORD_EPOCH_MS = 1420070400000
INTERACTION_DEADLINE_S = 3.0
LOADING, EPHEMERAL = 1 << 7, 1 << 6
MESSAGE_CONTENT_INTENT = 1 << 15
NAME = re.compile(r"^[-_'\w]{1,32}$")
Json = dict[str, Any]


@dataclass
class Call:
    """One request the emulator received."""

    method: str
    path: str  # without the /api/v10 prefix
    query: dict[str, str]
    body: Any
    headers: dict[str, str]
    status: int = 0
    at: float = field(default_factory=time.monotonic)


class DiscordError(Exception):
    """A Discord-shaped error response."""

    def __init__(self, status: int, code: int, message: str, errors: Json | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.errors = status, code, message, errors

    def body(self) -> Json:
        body: Json = {"code": self.code, "message": self.message}
        if self.errors:
            body["errors"] = self.errors
        return body


def form_error(path: tuple[str | int, ...], code: str, message: str) -> DiscordError:
    """400 50035 Invalid Form Body with the nested ``errors`` Discord sends."""
    errors: Json = {"_errors": [{"code": code, "message": message}]}
    for key in reversed(path):
        errors = {str(key): errors}
    return DiscordError(400, 50035, "Invalid Form Body", errors)


def _max(value: Any, limit: int, path: tuple[str | int, ...]) -> None:
    if value is not None and len(value) > limit:
        raise form_error(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")


def _required(value: Any, path: tuple[str | int, ...]) -> None:
    if value is None or value == "":
        raise form_error(path, "BASE_TYPE_REQUIRED", "This field is required")


def validate_embeds(embeds: Any) -> None:
    """Discord's embed limits, one embed at a time and in total."""
    if not isinstance(embeds, list):
        raise form_error(("embeds",), "LIST_TYPE_CONVERT", "Must be an array.")
    _max(embeds, 10, ("embeds",))
    total = 0
    for i, e in enumerate(embeds):
        where: tuple[str | int, ...] = ("embeds", i)
        for key, limit in (("title", 256), ("description", 4096)):
            _max(e.get(key), limit, (*where, key))
            total += len(e.get(key) or "")
        for key in ("url",):
            if e.get(key) and not str(e[key]).startswith(("http://", "https://")):
                raise form_error((*where, key), "URL_TYPE_INVALID_URL", "Not a well formed URL.")
        fields = e.get("fields") or []
        _max(fields, 25, (*where, "fields"))
        for j, f in enumerate(fields):
            _required(f.get("name"), (*where, "fields", j, "name"))
            _required(f.get("value"), (*where, "fields", j, "value"))
            _max(f["name"], 256, (*where, "fields", j, "name"))
            _max(f["value"], 1024, (*where, "fields", j, "value"))
            total += len(f["name"]) + len(f["value"])
        footer, author = e.get("footer") or {}, e.get("author") or {}
        _max(footer.get("text"), 2048, (*where, "footer", "text"))
        _max(author.get("name"), 256, (*where, "author", "name"))
        total += len(footer.get("text") or "") + len(author.get("name") or "")
    if total > 6000:
        raise form_error(
            ("embeds",), "MAX_EMBED_SIZE_EXCEEDED", "Embed size exceeds maximum size of 6000"
        )


def validate_components(rows: Any) -> None:
    """Action rows of buttons, as Discord accepts them."""
    if not isinstance(rows, list):
        raise form_error(("components",), "LIST_TYPE_CONVERT", "Must be an array.")
    _max(rows, 5, ("components",))
    seen: set[str] = set()
    for i, row in enumerate(rows):
        if row.get("type") != 1:
            raise form_error(("components", i, "type"), "COMPONENT_TYPE_INVALID", "Invalid type")
        items = row.get("components") or []
        if not 1 <= len(items) <= 5:
            raise form_error(
                ("components", i, "components"),
                "BASE_TYPE_BAD_LENGTH",
                "Must be between 1 and 5 in length.",
            )
        for j, b in enumerate(items):
            where: tuple[str | int, ...] = ("components", i, "components", j)
            if b.get("type") != 2:
                continue  # only buttons are checked closely
            style, custom_id, url = b.get("style"), b.get("custom_id"), b.get("url")
            if style not in (1, 2, 3, 4, 5, 6):
                raise form_error(
                    (*where, "style"),
                    "BASE_TYPE_CHOICES",
                    "Value must be one of {1, 2, 3, 4, 5, 6}.",
                )
            if style == 5:
                _required(url, (*where, "url"))
                if custom_id:
                    raise form_error(
                        (*where, "custom_id"),
                        "COMPONENT_LINK_BUTTON_CUSTOM_ID",
                        "A link button cannot have a custom id",
                    )
            elif style != 6:
                _required(custom_id, (*where, "custom_id"))
                _max(custom_id, 100, (*where, "custom_id"))
                if custom_id in seen:
                    raise form_error(
                        (*where, "custom_id"),
                        "COMPONENT_CUSTOM_ID_DUPLICATED",
                        "Component custom id cannot be duplicated",
                    )
                seen.add(custom_id)
            _max(b.get("label"), 80, (*where, "label"))
            if not b.get("label") and not b.get("emoji"):
                raise form_error((*where, "label"), "BASE_TYPE_REQUIRED", "This field is required")


def validate_message(body: Any, *, create: bool) -> None:
    """A message create or edit body."""
    if not isinstance(body, dict):
        raise DiscordError(400, 50109, "The request body contains invalid JSON.")
    content = body.get("content")
    if content is not None and not isinstance(content, str):
        raise form_error(("content",), "BASE_TYPE_STRING", "Must be a string.")
    _max(content, 2000, ("content",))
    if body.get("embeds") is not None:
        validate_embeds(body["embeds"])
    if body.get("components") is not None:
        validate_components(body["components"])
    mentions = body.get("allowed_mentions")
    if mentions is not None and not set(mentions.get("parse", [])) <= {
        "roles",
        "users",
        "everyone",
    }:
        raise form_error(("allowed_mentions", "parse"), "BASE_TYPE_CHOICES", "Invalid value.")
    if create and not (
        content
        or body.get("embeds")
        or body.get("components")
        or body.get("sticker_ids")
        or body.get("attachments")
        or body.get("poll")
    ):
        raise DiscordError(400, 50006, "Cannot send an empty message")


def validate_commands(commands: Any) -> None:
    """A bulk overwrite of application commands."""
    if not isinstance(commands, list):
        raise form_error((), "LIST_TYPE_CONVERT", "Must be an array.")
    _max(commands, 100, ())
    for i, c in enumerate(commands):
        if c.get("type", 1) == 1:
            if not NAME.match(c.get("name", "")) or c["name"] != c["name"].lower():
                raise form_error(
                    (i, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"
                )
            if not 1 <= len(c.get("description", "")) <= 100:
                raise form_error(
                    (i, "description"),
                    "BASE_TYPE_BAD_LENGTH",
                    "Must be between 1 and 100 in length.",
                )
        options = c.get("options") or []
        _max(options, 25, (i, "options"))
        optional = False
        for j, o in enumerate(options):
            where = (i, "options", j)
            if not NAME.match(o.get("name", "")) or o["name"] != o["name"].lower():
                raise form_error(
                    (*where, "name"), "APPLICATION_COMMAND_INVALID_NAME", "Command name is invalid"
                )
            if not 1 <= len(o.get("description", "")) <= 100:
                raise form_error(
                    (*where, "description"),
                    "BASE_TYPE_BAD_LENGTH",
                    "Must be between 1 and 100 in length.",
                )
            if o.get("required"):
                if optional:
                    raise form_error(
                        (*where, "required"),
                        "APPLICATION_COMMAND_OPTIONS_REQUIRED_INVALID",
                        "Required options must be placed before non-required options",
                    )
            else:
                optional = True
            if o.get("autocomplete") and o.get("choices"):
                raise form_error(
                    (*where, "autocomplete"),
                    "APPLICATION_COMMAND_OPTION_CHOICES_AUTOCOMPLETE",
                    "Autocomplete cannot be set with choices",
                )


def _json(body: Any, status: int) -> web.Response:
    # Exactly "application/json", no charset: discord.py parses only that as JSON.
    return web.Response(
        body=json.dumps(body).encode(), status=status, headers={"Content-Type": "application/json"}
    )


def _now() -> str:
    return datetime.now(UTC).isoformat()


@dataclass
class Interaction:
    """An interaction the emulator handed out, and what the bot did with it."""

    id: int
    token: str
    type: int  # 2 command, 3 component, 4 autocomplete
    channel_id: int
    guild_id: int | None
    created: float
    response: int | None = None  # callback type
    original_id: int | None = None
    message_ids: set[int] = field(default_factory=set)


@dataclass
class Failure:
    method: str
    pattern: re.Pattern[str]
    error: DiscordError
    times: int


class DiscordEmulator:
    """The Discord REST API, in memory: guilds, channels, messages, threads, interactions."""

    def __init__(self, token: str = TOKEN, app_id: int = APP_ID, bot_name: str = "Quorum") -> None:
        self.token, self.app_id = token, app_id
        self.bot = self.user(app_id, bot_name, bot=True)
        self.calls: list[Call] = []
        self.unexpected: list[Call] = []
        self.events: list[tuple[str, Json]] = []  # gateway events for the bot
        self.channels: dict[int, Json] = {}
        self.messages: dict[int, Json] = {}
        self.members: dict[int, set[int]] = {}  # guild -> user ids
        self.commands: dict[int | None, list[Json]] = {}  # guild id (None: global)
        self.interactions: dict[int, Interaction] = {}
        self.bot_roles: dict[int, int] = {}  # guild -> the bot's managed role
        self.roles_of: dict[int, list[int]] = {}  # user -> their guild roles
        self.files: dict[int, bytes] = {}  # attachment id -> its bytes
        self.downloads: list[tuple[int, bool]] = []  # (attachment id, signed right) per GET
        self._cdn_key = f"cdn-{time.time_ns()}".encode()
        self.guilds: dict[int, Json] = {}  # GUILD_CREATE payloads, sent after READY
        self.message_content_enabled = True  # the portal's Message Content switch
        self.identified: list[Json] = []  # IDENTIFY payloads received on the gateway
        self.ready = asyncio.Event()
        self._sockets: list[web.WebSocketResponse] = []
        self._seq = itertools.count(1)
        self._failures: list[Failure] = []
        self._ids = itertools.count()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- lifecycle

    @property
    def url(self) -> str:
        """What to set ``discord.http.Route.BASE`` / ``QUORUM_DISCORD_API_URL`` to."""
        return f"http://127.0.0.1:{self.port}/api/v10"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_get("/attachments/{cid}/{aid}/{name}", self._cdn)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> DiscordEmulator:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # --- building the world (what the gateway would tell the bot)

    def snowflake(self) -> int:
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        return (ms << 22) | (next(self._ids) & 0x3FFFFF)

    @staticmethod
    def user(user_id: int, name: str, *, bot: bool = False) -> Json:
        """A user object."""
        return {
            "id": str(user_id),
            "username": name,
            "discriminator": "0",
            "global_name": name,
            "avatar": None,
            "bot": bot,
            "public_flags": 0,
        }

    def guild(self, guild_id: int, channels: dict[int, str], *, name: str = "Team") -> Json:
        """Register a guild with text channels; the GUILD_CREATE payload for the bot."""
        role = self.snowflake()
        self.bot_roles[guild_id] = role
        self.members[guild_id] = {self.app_id}
        chans = []
        for pos, (cid, cname) in enumerate(channels.items()):
            chan = {
                "id": str(cid),
                "type": 0,
                "name": cname,
                "guild_id": str(guild_id),
                "position": pos,
                "permission_overwrites": [],
                "nsfw": False,
                "parent_id": None,
                "topic": None,
                "rate_limit_per_user": 0,
                "last_message_id": None,
            }
            self.channels[cid] = chan
            chans.append(chan)
        everyone: Json = {"id": str(guild_id), "name": "@everyone", "permissions": "1071698660929"}
        managed: Json = {
            "id": str(role),
            "name": self.bot["username"],
            "permissions": "0",
            "managed": True,
            "tags": {"bot_id": str(self.app_id)},
        }
        for r in (everyone, managed):
            r.update(position=0, color=0, hoist=False, mentionable=False, flags=0)
            r.setdefault("managed", False)
        self.guilds[guild_id] = payload = {
            "id": str(guild_id),
            "name": name,
            "icon": None,
            "owner_id": "1",
            "features": [],
            "roles": [everyone, managed],
            "channels": chans,
            "threads": [],
            "members": [self._member(self.bot, [role])],
            "member_count": 2,
            "large": False,
            "unavailable": False,
            "emojis": [],
            "stickers": [],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
            "premium_tier": 0,
            "preferred_locale": "en-US",
            "verification_level": 0,
            "default_message_notifications": 0,
            "explicit_content_filter": 0,
            "mfa_level": 0,
            "nsfw_level": 0,
            "system_channel_flags": 0,
            "afk_timeout": 300,
            "joined_at": _now(),
        }
        return payload

    def add_role(self, guild_id: int, name: str, members: list[Json]) -> int:
        """A plain role (no permissions) in a guild, given to ``members``."""
        rid = self.snowflake()
        role: Json = {"id": str(rid), "name": name, "permissions": "0", "managed": False}
        role.update(position=1, color=0, hoist=False, mentionable=False, flags=0)
        self.guilds[guild_id]["roles"].append(role)
        for user in members:
            self.roles_of.setdefault(int(user["id"]), []).append(rid)
        return rid

    def attachment(
        self, channel_id: int, filename: str, data: bytes, size: int | None = None
    ) -> Json:
        """A file a user attaches: the attachment object, with a signed CDN URL.
        ``size`` overrides the reported size (a file too large to send in a test)."""
        aid = self.snowflake()
        self.files[aid] = data
        path = f"/attachments/{channel_id}/{aid}/{filename}"
        url = f"http://127.0.0.1:{self.port}{path}?{self._signature(path, time.time() + 86400)}"
        return {
            "id": str(aid),
            "filename": filename,
            "size": len(data) if size is None else size,
            "url": url,
            "proxy_url": url,
            "content_type": "application/octet-stream",
        }

    def _signature(self, path: str, expires: float) -> str:
        ex, issued = f"{int(expires):x}", f"{int(time.time()):x}"
        hm = hmac.new(self._cdn_key, f"{path}{ex}{issued}".encode(), hashlib.sha256).hexdigest()
        return f"ex={ex}&is={issued}&hm={hm}"

    async def _cdn(self, request: web.Request) -> web.Response:
        """Discord's CDN: the file to a link it signed and that has not expired."""
        aid = int(request.match_info["aid"])
        q = request.query
        want = hmac.new(
            self._cdn_key,
            f"{request.path}{q.get('ex', '')}{q.get('is', '')}".encode(),
            hashlib.sha256,
        ).hexdigest()
        signed = (
            hmac.compare_digest(want, q.get("hm", "")) and int(q.get("ex", "0"), 16) > time.time()
        )
        self.downloads.append((aid, signed))
        if not signed or aid not in self.files:
            return web.Response(status=404, text="This content is no longer available.")
        return web.Response(body=self.files[aid], content_type="application/octet-stream")

    def join(self, guild_id: int, user: Json) -> None:
        """Make a user a member of a guild."""
        self.members.setdefault(guild_id, set()).add(int(user["id"]))

    def dm_channel(self, user: Json) -> int:
        """A DM channel between the bot and a user."""
        cid = self.snowflake()
        self.channels[cid] = {
            "id": str(cid),
            "type": 1,
            "recipients": [user],
            "last_message_id": None,
        }
        return cid

    def _member(self, user: Json, roles: list[int]) -> Json:
        return {
            "user": user,
            "roles": [str(r) for r in roles + self.roles_of.get(int(user["id"]), [])],
            "joined_at": _now(),
            "deaf": False,
            "mute": False,
            "flags": 0,
            "nick": None,
            "avatar": None,
            "permissions": "1071698660929",
        }

    def post(
        self,
        channel_id: int,
        author: Json,
        content: str,
        *,
        mention_bot: bool = False,
        mention_role: bool = False,
        attachments: list[Json] | None = None,
    ) -> Json:
        """A user posts a message (with ``attachments``); the MESSAGE_CREATE payload the
        gateway delivers."""
        chan = self.channels[channel_id]
        guild_id = int(chan["guild_id"]) if chan.get("guild_id") else None
        mentions: list[Json] = []
        roles: list[str] = []
        if mention_bot:
            content = f"<@{self.app_id}> {content}"
            mentions.append(self.bot)
        if mention_role and guild_id:
            content = f"<@&{self.bot_roles[guild_id]}> {content}"
            roles.append(str(self.bot_roles[guild_id]))
        msg = self._message(
            channel_id,
            author,
            content,
            mentions=mentions,
            mention_roles=roles,
            attachments=list(attachments or []),
        )
        return self._gateway_message(msg)

    def slash(
        self,
        name: str,
        channel_id: int,
        user: Json,
        files: dict[str, Json] | None = None,
        **options: str,
    ) -> Json:
        """A user runs a slash command (``files``: attachment options); the
        INTERACTION_CREATE payload."""
        payload = self._command_interaction(2, name, channel_id, user, options, None)
        for option, attachment in (files or {}).items():
            payload["data"]["options"].append(
                {"name": option, "type": 11, "value": attachment["id"]}
            )
            resolved = payload["data"].setdefault("resolved", {}).setdefault("attachments", {})
            resolved[attachment["id"]] = attachment
        return payload

    def autocomplete(
        self, name: str, channel_id: int, user: Json, focused: str, **options: str
    ) -> Json:
        """A user types into an autocompleted option; the INTERACTION_CREATE payload."""
        return self._command_interaction(4, name, channel_id, user, options, focused)

    def click(self, message_id: int, custom_id: str, user: Json) -> Json:
        """A user clicks a button on a message; the INTERACTION_CREATE payload."""
        msg = self.messages[message_id]
        ids = [c.get("custom_id") for row in msg.get("components", []) for c in row["components"]]
        assert custom_id in ids, f"no button {custom_id!r} on message {message_id}: {ids}"
        payload = self._interaction(3, int(msg["channel_id"]), user)
        # A component's interaction answers on the message it is on (@original is it).
        inter = self.interactions[int(payload["id"])]
        inter.original_id = message_id
        inter.message_ids.add(message_id)
        payload["data"] = {"custom_id": custom_id, "component_type": 2}
        payload["message"] = msg
        return payload

    def fail(
        self,
        method: str,
        path: str,
        *,
        status: int = 403,
        code: int = 50013,
        message: str = "Missing Permissions",
        times: int = 1,
    ) -> None:
        """Make the next ``times`` requests matching ``method`` and the ``path`` regex fail."""
        self._failures.append(
            Failure(method, re.compile(path), DiscordError(status, code, message), times)
        )

    def find(self, method: str, path: str) -> list[Call]:
        """Recorded calls by method and path regex (full match)."""
        rx = re.compile(path)
        return [c for c in self.calls if c.method == method and rx.fullmatch(c.path)]

    def channel_messages(self, channel_id: int) -> list[Json]:
        """Messages in a channel (or thread), oldest first, as Discord stores them now."""
        return [m for m in self.messages.values() if int(m["channel_id"]) == channel_id]

    def pop_events(self) -> list[tuple[str, Json]]:
        events, self.events = self.events, []
        return events

    # --- payload helpers

    def _command_interaction(
        self,
        kind: int,
        name: str,
        channel_id: int,
        user: Json,
        options: dict[str, str],
        focused: str | None,
    ) -> Json:
        chan = self.channels[channel_id]
        guild_id = int(chan["guild_id"]) if chan.get("guild_id") else None
        command = self._registered(name, guild_id)
        data: Json = {
            "id": command["id"],
            "name": name,
            "type": 1,
            "options": [
                {"name": k, "type": 3, "value": v, **({"focused": True} if k == focused else {})}
                for k, v in options.items()
            ],
        }
        if command.get("guild_id"):
            data["guild_id"] = command["guild_id"]
        payload = self._interaction(kind, channel_id, user)
        payload["data"] = data
        return payload

    def _registered(self, name: str, guild_id: int | None) -> Json:
        for scope in (guild_id, None):
            for c in self.commands.get(scope, []):
                if c["name"] == name:
                    return c
        raise AssertionError(f"/{name} is not registered with Discord: sync the commands first")

    def _interaction(self, kind: int, channel_id: int, user: Json) -> Json:
        chan = self.channels[channel_id]
        guild_id = int(chan["guild_id"]) if chan.get("guild_id") else None
        iid = self.snowflake()
        token = f"itoken-{iid}"
        self.interactions[iid] = Interaction(
            iid, token, kind, channel_id, guild_id, time.monotonic()
        )
        channel = {k: chan[k] for k in ("id", "type", "name", "guild_id", "parent_id") if k in chan}
        payload: Json = {
            "id": str(iid),
            "application_id": str(self.app_id),
            "type": kind,
            "token": token,
            "version": 1,
            "channel_id": str(channel_id),
            "channel": {**channel, "permissions": "1071698660929"},
            "app_permissions": "1071698660929",
            "locale": "en-US",
            "entitlements": [],
            "attachment_size_limit": 26214400,
        }
        if guild_id is not None:
            payload.update(
                guild_id=str(guild_id),
                guild_locale="en-US",
                guild={"id": str(guild_id), "locale": "en-US", "features": []},
                member=self._member(user, []),
                authorizing_integration_owners={"0": str(guild_id)},
                context=0,
            )
        else:
            payload.update(user=user, authorizing_integration_owners={"0": "0"}, context=1)
        return payload

    def _message(self, channel_id: int, author: Json, content: str, **extra: Any) -> Json:
        mid = self.snowflake()
        msg: Json = {
            "id": str(mid),
            "channel_id": str(channel_id),
            "author": author,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "components": [],
            "pinned": False,
            "type": 0,
            "flags": 0,
        }
        msg.update(extra)
        self.messages[mid] = msg
        if channel_id in self.channels:
            self.channels[channel_id]["last_message_id"] = str(mid)
        return msg

    def _gateway_message(self, msg: Json) -> Json:
        chan = self.channels[int(msg["channel_id"])]
        payload = dict(msg)
        if chan.get("guild_id"):
            payload["guild_id"] = chan["guild_id"]
            member = self._member(msg["author"], [])
            member.pop("user")
            payload["member"] = member
        return payload

    def _bot_posted(self, msg: Json) -> None:
        if not msg["flags"] & EPHEMERAL:
            self._emit("MESSAGE_CREATE", self._gateway_message(msg))

    def _emit(self, event: str, data: Json) -> None:
        """An event for the bot: over the gateway when it is connected, else queued."""
        if self._sockets:
            asyncio.get_running_loop().create_task(self.dispatch(event, data))
        else:
            self.events.append((event, data))

    # --- the gateway (enough of it for discord.py to connect, identify and get events)

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    async def dispatch(self, event: str, data: Json) -> None:
        """Send a DISPATCH event to every connected bot."""
        frame = {"op": 0, "t": event, "s": next(self._seq), "d": data}
        for ws in list(self._sockets):
            await ws.send_json(frame)

    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        await ws.send_json({"op": 10, "s": None, "t": None, "d": {"heartbeat_interval": 41250}})
        try:
            async for frame in ws:
                if frame.type is not WSMsgType.TEXT:
                    continue
                op, data = frame.json().get("op"), frame.json().get("d")
                if op == 1:  # heartbeat
                    await ws.send_json({"op": 11, "s": None, "t": None, "d": None})
                elif op == 2:
                    await self._identify(ws, data)
        finally:
            if ws in self._sockets:
                self._sockets.remove(ws)
        return ws

    async def _identify(self, ws: web.WebSocketResponse, data: Json) -> None:
        self.identified.append(data)
        if data.get("token") != self.token:
            await ws.close(code=4004, message=b"Authentication failed.")
            return
        if data.get("intents", 0) & MESSAGE_CONTENT_INTENT and not self.message_content_enabled:
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        self._sockets.append(ws)
        await self.dispatch(
            "READY",
            {
                "v": 10,
                "user": self.bot,
                "guilds": [{"id": str(g), "unavailable": True} for g in self.guilds],
                "session_id": f"session-{self.snowflake()}",
                "resume_gateway_url": self.gateway_url,
                "application": {"id": str(self.app_id), "flags": 1 << 19},
            },
        )
        for payload in self.guilds.values():
            await self.dispatch("GUILD_CREATE", payload)
        self.ready.set()

    @staticmethod
    def _apply(msg: Json, body: Json) -> None:
        for key in ("content", "embeds", "components"):
            if key in body and body[key] is not None:
                value = body[key]
                if key == "embeds":
                    value = [{"type": "rich", **e} for e in value]
                msg[key] = value
        if "flags" in body and body["flags"] is not None:
            msg["flags"] = (msg["flags"] & ~0x4) | (int(body["flags"]) & 0x4)

    # --- HTTP

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        path = request.path.removeprefix("/api/v10")
        call = Call(request.method, path, dict(request.query), body, dict(request.headers))
        self.calls.append(call)
        try:
            if not request.path.startswith("/api/v10/"):
                raise DiscordError(404, 0, "404: Not Found")
            for failure in self._failures:
                if (
                    failure.times > 0
                    and failure.method == call.method
                    and failure.pattern.fullmatch(path)
                ):
                    failure.times -= 1
                    raise failure.error
            status, result = self._route(call)
        except DiscordError as exc:
            call.status = exc.status
            return _json(exc.body(), exc.status)
        call.status = status
        if status == 204:
            return web.Response(status=204)
        return _json(result, status)

    def _route(self, call: Call) -> tuple[int, Any]:
        for method, pattern, auth, handler in self._routes():
            match = re.fullmatch(pattern, call.path)
            if match and method == call.method:
                if auth and call.headers.get("Authorization") != f"Bot {self.token}":
                    raise DiscordError(401, 0, "401: Unauthorized")
                return handler(call, *match.groups())
        self.unexpected.append(call)
        raise DiscordError(404, 0, "404: Not Found")

    def _routes(self) -> list[tuple[str, str, bool, Callable[..., tuple[int, Any]]]]:
        return [
            ("GET", r"/users/@me", True, lambda c: (200, self.bot)),
            ("GET", r"/gateway/bot", True, self._gateway_bot),
            ("GET", r"/oauth2/applications/@me", True, self._app_info),
            ("GET", r"/applications/(\d+)/commands", True, self._get_commands),
            ("GET", r"/applications/(\d+)/guilds/(\d+)/commands", True, self._get_commands),
            ("PUT", r"/applications/(\d+)/commands", True, self._put_commands),
            ("PUT", r"/applications/(\d+)/guilds/(\d+)/commands", True, self._put_commands),
            ("POST", r"/interactions/(\d+)/([^/]+)/callback", False, self._callback),
            ("POST", r"/webhooks/(\d+)/([^/]+)", False, self._followup),
            (
                "PATCH",
                r"/webhooks/(\d+)/([^/]+)/messages/(@original|\d+)",
                False,
                self._edit_webhook,
            ),
            ("GET", r"/webhooks/(\d+)/([^/]+)/messages/(@original|\d+)", False, self._get_webhook),
            ("POST", r"/channels/(\d+)/messages", True, self._create_message),
            ("PATCH", r"/channels/(\d+)/messages/(\d+)", True, self._edit_message),
            ("POST", r"/channels/(\d+)/messages/(\d+)/threads", True, self._start_thread),
            ("POST", r"/channels/(\d+)/typing", True, lambda c, cid: (204, None)),
            ("GET", r"/guilds/(\d+)/members/(\d+)", True, self._get_member),
        ]

    def _gateway_bot(self, call: Call) -> tuple[int, Any]:
        limit = {"total": 1000, "remaining": 999, "reset_after": 0, "max_concurrency": 1}
        return 200, {"url": self.gateway_url, "shards": 1, "session_start_limit": limit}

    def _app_info(self, call: Call) -> tuple[int, Any]:
        return 200, {
            "id": str(self.app_id),
            "name": self.bot["username"],
            "icon": None,
            "description": "",
            "bot_public": False,
            "bot_require_code_grant": False,
            "owner": self.user(1, "owner"),
            "verify_key": "0" * 64,
            # GATEWAY_MESSAGE_CONTENT_LIMITED: the portal's Message Content switch is on.
            "flags": 1 << 19 if self.message_content_enabled else 0,
            "team": None,
            "summary": "",
        }

    def _get_commands(
        self, call: Call, app_id: str, guild_id: str | None = None
    ) -> tuple[int, Any]:
        if int(app_id) != self.app_id:
            raise DiscordError(403, 50001, "Missing Access")
        return 200, self.commands.get(int(guild_id) if guild_id else None, [])

    def _put_commands(
        self, call: Call, app_id: str, guild_id: str | None = None
    ) -> tuple[int, Any]:
        if int(app_id) != self.app_id:
            raise DiscordError(403, 50001, "Missing Access")
        validate_commands(call.body)
        saved = []
        for c in call.body:
            saved.append(
                {
                    "id": str(self.snowflake()),
                    "application_id": str(self.app_id),
                    "version": str(self.snowflake()),
                    "type": c.get("type", 1),
                    "name": c["name"],
                    "description": c.get("description", ""),
                    "options": c.get("options", []),
                    "default_member_permissions": c.get("default_member_permissions"),
                    "nsfw": c.get("nsfw", False),
                    "contexts": c.get("contexts"),
                    "integration_types": c.get("integration_types", [0]),
                    **({"guild_id": guild_id} if guild_id else {}),
                }
            )
        self.commands[int(guild_id) if guild_id else None] = saved
        return 200, saved

    def _interaction_for(self, iid: int | None, token: str) -> Interaction:
        for i in self.interactions.values():
            if i.token == token and (iid is None or i.id == iid):
                return i
        raise DiscordError(
            404, 10062 if iid else 10015, "Unknown interaction" if iid else "Unknown Webhook"
        )

    def _callback(self, call: Call, iid: str, token: str) -> tuple[int, Any]:
        inter = self._interaction_for(int(iid), token)
        if time.monotonic() - inter.created > INTERACTION_DEADLINE_S:
            raise DiscordError(404, 10062, "Unknown interaction")
        if inter.response is not None:
            raise DiscordError(400, 40060, "Interaction has already been acknowledged.")
        body = call.body or {}
        kind, data = body.get("type"), body.get("data") or {}
        allowed = {2: {4, 5, 9}, 3: {4, 5, 6, 7, 9}, 4: {8}}[inter.type]
        if kind not in allowed:
            raise form_error(
                ("type",), "INTERACTION_RESPONSE_TYPE_INVALID", "Invalid interaction response type"
            )
        message: Json | None = None
        if kind == 8:
            choices = data.get("choices")
            if not isinstance(choices, list):
                raise form_error(
                    ("data", "choices"), "BASE_TYPE_REQUIRED", "This field is required"
                )
            _max(choices, 25, ("data", "choices"))
            for j, ch in enumerate(choices):
                if not 1 <= len(ch.get("name", "")) <= 100:
                    raise form_error(
                        ("data", "choices", j, "name"),
                        "BASE_TYPE_BAD_LENGTH",
                        "Must be between 1 and 100 in length.",
                    )
                _max(str(ch.get("value", "")), 100, ("data", "choices", j, "value"))
        elif kind in (4, 5):
            flags = int(data.get("flags") or 0)
            if kind == 4:
                validate_message(data, create=True)
            else:
                flags |= LOADING
            message = self._message(
                inter.channel_id,
                self.bot,
                data.get("content") or "",
                flags=flags,
                type=20,
                webhook_id=str(self.app_id),
                application_id=str(self.app_id),
            )
            self._apply(message, data)
            message["flags"] = flags
            inter.original_id = int(message["id"])
            inter.message_ids.add(inter.original_id)
            if kind == 4:
                self._bot_posted(message)
        elif kind == 7:
            validate_message(data, create=False)
            if inter.original_id in self.messages:  # UPDATE_MESSAGE: the clicked message
                self._apply(self.messages[inter.original_id], data)
        inter.response = kind
        if call.query.get("with_response") not in ("1", "true", "True"):
            return 204, None
        result: Json = {
            "interaction": {
                "id": str(inter.id),
                "type": inter.type,
                "response_message_id": message["id"] if message else None,
                "response_message_loading": kind == 5,
                "response_message_ephemeral": bool(message and message["flags"] & EPHEMERAL),
            }
        }
        if message is not None:
            result["resource"] = {"type": kind, "message": message}
        return 200, result

    def _followup(self, call: Call, app_id: str, token: str) -> tuple[int, Any]:
        inter = self._interaction_for(None, token)
        if int(app_id) != self.app_id or inter.response is None:
            raise DiscordError(404, 10015, "Unknown Webhook")
        body = call.body or {}
        validate_message(body, create=True)
        original = self.messages.get(inter.original_id or -1)
        if inter.response == 5 and original is not None and original["flags"] & LOADING:
            msg = original  # the first follow-up replaces the "thinking" message
            msg["flags"] &= ~LOADING
        else:
            flags = int(body.get("flags") or 0) & EPHEMERAL
            msg = self._message(
                inter.channel_id,
                self.bot,
                "",
                flags=flags,
                webhook_id=str(self.app_id),
                application_id=str(self.app_id),
            )
            inter.message_ids.add(int(msg["id"]))
        self._apply(msg, body)
        self._bot_posted(msg)
        if call.query.get("wait") in ("true", "1", "True"):
            return 200, msg
        return 204, None

    def _webhook_message(self, app_id: str, token: str, mid: str) -> Json:
        inter = self._interaction_for(None, token)
        if int(app_id) != self.app_id:
            raise DiscordError(404, 10015, "Unknown Webhook")
        target = inter.original_id if mid == "@original" else int(mid)
        if target is None or target not in inter.message_ids:
            raise DiscordError(404, 10008, "Unknown Message")
        return self.messages[target]

    def _edit_webhook(self, call: Call, app_id: str, token: str, mid: str) -> tuple[int, Any]:
        msg = self._webhook_message(app_id, token, mid)
        validate_message(call.body or {}, create=False)
        self._apply(msg, call.body or {})
        msg["flags"] &= ~LOADING
        msg["edited_timestamp"] = _now()
        return 200, msg

    def _get_webhook(self, call: Call, app_id: str, token: str, mid: str) -> tuple[int, Any]:
        return 200, self._webhook_message(app_id, token, mid)

    def _channel(self, cid: str) -> Json:
        chan = self.channels.get(int(cid))
        if chan is None:
            raise DiscordError(404, 10003, "Unknown Channel")
        return chan

    def _create_message(self, call: Call, cid: str) -> tuple[int, Any]:
        self._channel(cid)
        body = call.body or {}
        validate_message(body, create=True)
        ref = body.get("message_reference")
        extra: Json = {}
        if ref:
            target = self.messages.get(int(ref.get("message_id", 0)))
            if target is None:
                raise form_error(
                    ("message_reference",), "REPLIES_UNKNOWN_MESSAGE", "Unknown message"
                )
            extra = {
                "message_reference": {"message_id": target["id"], "channel_id": cid},
                "type": 19,
            }
        msg = self._message(int(cid), self.bot, "", **extra)
        self._apply(msg, body)
        self._bot_posted(msg)
        return 200, msg

    def _edit_message(self, call: Call, cid: str, mid: str) -> tuple[int, Any]:
        self._channel(cid)
        msg = self.messages.get(int(mid))
        if msg is None or msg["channel_id"] != cid:
            raise DiscordError(404, 10008, "Unknown Message")
        if msg["author"]["id"] != str(self.app_id):
            raise DiscordError(403, 50005, "Cannot edit a message authored by another user")
        validate_message(call.body or {}, create=False)
        self._apply(msg, call.body or {})
        msg["edited_timestamp"] = _now()
        return 200, msg

    def _start_thread(self, call: Call, cid: str, mid: str) -> tuple[int, Any]:
        chan = self._channel(cid)
        if chan["type"] not in (0, 5):
            raise DiscordError(400, 50024, "Cannot execute action on this channel type")
        msg = self.messages.get(int(mid))
        if msg is None or msg["channel_id"] != cid or msg["flags"] & EPHEMERAL:
            raise DiscordError(404, 10008, "Unknown Message")
        if msg.get("thread"):
            raise DiscordError(400, 160004, "A thread has already been created for this message")
        body = call.body or {}
        name = body.get("name") or ""
        if not 1 <= len(name) <= 100:
            raise form_error(
                ("name",), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length."
            )
        archive = body.get("auto_archive_duration", 4320)
        if archive not in (60, 1440, 4320, 10080):
            raise form_error(
                ("auto_archive_duration",),
                "BASE_TYPE_CHOICES",
                "Value must be one of {60, 1440, 4320, 10080}.",
            )
        thread = {
            "id": mid,  # a thread started on a message shares its id
            "type": 11,
            "guild_id": chan["guild_id"],
            "parent_id": cid,
            "owner_id": str(self.app_id),
            "name": name,
            "last_message_id": None,
            "rate_limit_per_user": 0,
            "message_count": 0,
            "member_count": 1,
            "total_message_sent": 0,
            "flags": 0,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": archive,
                "archive_timestamp": _now(),
                "locked": False,
                "create_timestamp": _now(),
            },
        }
        self.channels[int(mid)] = thread
        msg["thread"] = thread
        self._emit("THREAD_CREATE", {**thread, "newly_created": True})
        return 201, thread

    def _get_member(self, call: Call, gid: str, uid: str) -> tuple[int, Any]:
        if int(uid) not in self.members.get(int(gid), set()):
            raise DiscordError(404, 10007, "Unknown Member")
        return 200, self._member(self.user(int(uid), f"user{uid}"), [])
