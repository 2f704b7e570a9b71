"""The rooms platform's whole adapter: its vendor API (``Rooms``, in memory), events in
as ``Incoming`` through ``Conversation.receive``, a ``Reply`` rendered through
``adapters.chat.view``, its runner, its doctor row and its poster."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import typer

from adapters.chat.conversation import NOT_ALLOWED, Conversation, Incoming
from adapters.chat.live import LiveEdits
from adapters.chat.view import link_markers, source_lines, wants_feedback
from adapters.platform import Check
from bot.config import Settings
from bot.models import Answer, Core, Event, Question, ThreadKey
from retrieval.errors import ConfigError
from tests.rooms.settings import RoomsSettings

VALID_TOKEN = "rooms-token"


@dataclass
class Rooms:
    """The third platform's API: messages posted and edited in rooms, events queued."""

    posted: list[dict[str, Any]] = field(default_factory=list)
    inbox: list[dict[str, Any]] = field(default_factory=list)

    async def post(self, room: str, text: str) -> int:
        self.posted.append({"room": room, "text": text, "edits": []})
        return len(self.posted) - 1

    async def edit(self, message: int, text: str) -> None:
        self.posted[message]["edits"].append(text)

    def last(self, message: int) -> str:
        """What a message shows now."""
        return str(([self.posted[message]["text"]] + self.posted[message]["edits"])[-1])


API = Rooms()  # the vendor's servers; tests reset it


def render(a: Answer) -> str:
    body = link_markers(
        a.text, {c.n: c for c in a.citations}, lambda n, c: f"<{c.link}|{n}>", " ".join
    )
    lines = [f"{s.n}. {s.label}" for s in source_lines(a)]
    buttons = ["[+1] [-1]"] if wants_feedback(a) else []
    return "\n".join([body, *lines, *buttons])


class RoomReply:
    def __init__(self, api: Rooms, room: str) -> None:
        self.api, self.room, self.message = api, room, -1
        self.live: LiveEdits[str] | None = None

    async def start(self, placeholder: str) -> None:
        self.message = await self.api.post(self.room, placeholder)
        self.live = LiveEdits(lambda t: self.api.edit(self.message, t), lambda e: e.text, 0.01)

    async def on_event(self, event: Event) -> None:
        assert self.live is not None
        await self.live.on_event(event)

    async def finish(self, a: Answer) -> None:
        assert self.live is not None
        await self.live.close()
        await self.api.edit(self.message, render(a))

    async def fail(self, text: str) -> None:
        if self.message < 0:
            await self.api.post(self.room, text)
        else:
            await self.api.edit(self.message, text)


class RoomSurface:
    """One room message at the conversation's steps."""

    def __init__(self, api: Rooms, own: RoomsSettings) -> None:
        self.api, self.own = api, own

    async def allowed(self, msg: Incoming) -> bool:
        return not self.own.rooms or msg.key.channel in self.own.rooms

    async def refuse(self, msg: Incoming) -> None:
        await self.api.post(msg.key.channel, NOT_ALLOWED)

    async def add_files(self, msg: Incoming) -> None:
        await self.api.post(msg.key.channel, "files are not supported here")

    async def tell(self, msg: Incoming, text: str) -> None:
        await self.api.post(msg.key.channel, text)

    async def fail(self, msg: Incoming, text: str) -> None:
        await self.api.post(msg.key.channel, text)

    async def reply(self, question: Question) -> tuple[Question, RoomReply]:
        return question, RoomReply(self.api, question.thread.channel)


class RoomAdapter:
    """Events in, replies out."""

    def __init__(self, core: Core, api: Rooms, own: RoomsSettings) -> None:
        self.api, self.own = api, own
        self.chat = Conversation(core, "rooms", lambda workspace: own.kb or workspace)

    async def on_event(self, event: dict[str, Any]) -> None:
        msg = Incoming(
            key=ThreadKey("rooms", "acme", event["room"], event["room"]),
            message_id=event["id"],
            user=event["user"],
            text=event["text"].replace("@quorum", "").strip(),
            mentioned="@quorum" in event["text"],
            follow_up=True,  # a room is one conversation
        )
        await self.chat.receive(msg, RoomSurface(self.api, self.own))


def _connect(settings: Settings) -> RoomsSettings:
    own = settings.platform(RoomsSettings)
    if own.token is None or own.token.get_secret_value() != VALID_TOKEN:
        raise ConfigError("The rooms server rejected ROOMS_TOKEN.")
    return own


async def run_rooms(core: Core, settings: Settings, on_ready: Callable[[], None]) -> None:
    """Answer what is in the inbox, then return (a real platform answers until cancelled)."""
    adapter = RoomAdapter(core, API, _connect(settings))
    on_ready()
    while API.inbox:
        await adapter.on_event(API.inbox.pop(0))


async def check_rooms(settings: Settings) -> Check | None:
    """The rooms row of ``quorum doctor``."""
    if settings.platform(RoomsSettings).token is None:
        return None
    try:
        _connect(settings)
    except ConfigError as exc:
        return Check("rooms", "FAIL", str(exc), "Copy the token from the rooms admin page.")
    return Check("rooms", "ok", "token accepted")


async def post_to_rooms(settings: Settings, channel: str, markdown: str) -> None:
    """One message to a room (announced summaries)."""
    _connect(settings)
    await API.post(channel, markdown)


rooms_app = typer.Typer(name="rooms", help="Rooms set-up commands.", no_args_is_help=True)


@rooms_app.command("list")
def list_rooms() -> None:
    """The rooms Quorum has posted in."""
    typer.echo(", ".join(sorted({p["room"] for p in API.posted})) or "none")
