"""A third chat platform, written the way docs/architecture.md says to add one: a
translator of its events into ``Incoming``, a ``Reply``, a renderer through
``adapters.chat.view``, and a ``Platform`` entry. It gets every rule (who is answered,
exactly once, typed options, live progress, apologies, linked citations, feedback)
without writing any of them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from adapters import serve
from adapters.chat.conversation import APOLOGY, Conversation, Incoming
from adapters.chat.live import LiveEdits
from adapters.chat.view import link_markers, source_lines, wants_feedback
from adapters.platform import Platform
from bot.config import load_settings
from bot.models import Answer, Event, ThreadKey
from tests.fakes import FakeCore, Script


@dataclass
class Room:
    """The third platform's whole API: messages posted and edited in rooms."""

    posted: list[dict[str, Any]] = field(default_factory=list)

    async def post(self, room: str, text: str) -> int:
        self.posted.append({"room": room, "text": text, "edits": []})
        return len(self.posted) - 1

    async def edit(self, message: int, text: str) -> None:
        self.posted[message]["edits"].append(text)


def render(a: Answer) -> str:
    body = link_markers(
        a.text, {c.n: c for c in a.citations}, lambda n, c: f"<{c.link}|{n}>", " ".join
    )
    lines = [f"{s.n}. {s.label}" for s in source_lines(a)]
    buttons = ["[+1] [-1]"] if wants_feedback(a) else []
    return "\n".join([body, *lines, *buttons])


class RoomReply:
    def __init__(self, api: Room, room: str) -> None:
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
        await self.api.edit(self.message, text)


class RoomAdapter:
    """The whole adapter: events in, replies out."""

    def __init__(self, core: FakeCore, api: Room) -> None:
        self.api = api
        self.chat = Conversation(core, "rooms", lambda workspace: workspace)

    async def on_event(self, event: dict[str, Any]) -> None:
        msg = Incoming(
            key=ThreadKey("rooms", "acme", event["room"], event["room"]),
            message_id=event["id"],
            user=event["user"],
            text=event["text"].replace("@quorum", "").strip(),
            mentioned="@quorum" in event["text"],
            follow_up=True,  # a room is one conversation
        )
        if not await self.chat.is_for_us(msg) or not await self.chat.claim(msg.message_id):
            return
        await self.chat.answer(self.chat.question(msg), RoomReply(self.api, event["room"]))


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[FakeCore]:
    fake = FakeCore(tmp_path / "claims.sqlite3")
    yield fake
    await fake.close()


async def test_a_third_platform_gets_every_rule_for_free(core: FakeCore) -> None:
    api = Room()
    rooms = RoomAdapter(core, api)
    ask = {
        "room": "r1",
        "id": "e1",
        "user": "u1",
        "text": "@quorum who chose Cognito? speaker:John",
    }
    await rooms.on_event(ask)
    await rooms.on_event(ask)  # redelivered: answered once
    await rooms.on_event({"room": "r2", "id": "e2", "user": "u1", "text": "lunch?"})  # not for us
    (posted,) = api.posted
    assert posted["text"] == "Searching the archive…"
    assert posted["edits"][-1].startswith("We chose Cognito over Auth0 for cost <https://")
    assert "1. Auth deep dive @ 12:14" in posted["edits"][-1] and "[+1] [-1]" in posted["edits"][-1]
    assert (
        core.questions[0].filters.speaker == "John"
        and core.questions[0].text == "who chose Cognito?"
    )

    await rooms.on_event({"room": "r1", "id": "e3", "user": "u2", "text": "and when?"})  # follow-up
    assert len(api.posted) == 2

    core.enqueue(Script(error=RuntimeError("boom")))
    await rooms.on_event({"room": "r1", "id": "e4", "user": "u2", "text": "@quorum again?"})
    assert api.posted[-1]["edits"][-1] == APOLOGY


def test_registering_it_is_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    rooms = Platform("rooms", lambda s: True, "ROOMS_TOKEN", "tests.test_third_platform:run")
    monkeypatch.setattr(serve, "PLATFORMS", (*serve.PLATFORMS, rooms))
    assert serve.configured(load_settings()) == ["rooms"]
