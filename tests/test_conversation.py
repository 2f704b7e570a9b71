"""The rules of talking to Quorum, tested once against a fake platform: every platform
adapter (Slack, Discord, …) runs this same ``Conversation``, so each rule here holds on
all of them; the emulator end-to-end tests only guard each port."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from adapters.chat.conversation import (
    APOLOGY,
    FEEDBACK_FAILED,
    PLACEHOLDER,
    RESTARTED,
    THANKS,
    Conversation,
    Incoming,
)
from bot.models import Answer, Event, PartialAnswer, ProgressEvent, Question, ThreadKey
from retrieval.errors import InvalidInput
from retrieval.models import SearchFilters
from tests.fakes import FakeCore, Script, answer

THREAD = ThreadKey("fake", "W1", "C1", "100.1")


@dataclass
class FakeReply:
    """A platform reply that records what the user would see, in order."""

    shown: list[str] = field(default_factory=list)

    async def start(self, placeholder: str) -> None:
        self.shown.append(placeholder)

    async def on_event(self, event: Event) -> None:
        self.shown.append(event.text)

    async def finish(self, answer: Answer) -> None:
        self.shown.append(answer.text)

    async def fail(self, text: str) -> None:
        self.shown.append(text)


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[FakeCore]:
    fake = FakeCore(tmp_path / "claims.db")
    yield fake
    await fake.close()


def chat(core: FakeCore) -> Conversation:
    return Conversation(core, "fake", lambda workspace: f"kb-{workspace}")


def msg(text: str = "who chose Cognito?", **kw: object) -> Incoming:
    return Incoming(THREAD, "m1", "U1", text, **kw)  # type: ignore[arg-type]


async def test_dms_and_mentions_are_answered_chatter_is_not(core: FakeCore) -> None:
    c = chat(core)
    assert await c.is_for_us(msg(direct=True))
    assert await c.is_for_us(msg(mentioned=True))
    assert not await c.is_for_us(msg())  # a top-level message to the channel


async def test_follow_ups_only_in_threads_quorum_is_answering(core: FakeCore) -> None:
    c = chat(core)
    assert not await c.is_for_us(msg(follow_up=True))  # nobody asked Quorum here yet
    await core.ask(c.question(msg(mentioned=True)))  # now it is Quorum's thread
    assert await c.is_for_us(msg("and the cost?", follow_up=True))
    assert not await c.is_for_us(
        msg("@Bob what do you think?", follow_up=True, addressed_elsewhere=True)
    )


async def test_an_event_is_claimed_once(core: FakeCore) -> None:
    c = chat(core)
    assert await c.claim("C1:100.1")
    assert not await c.claim("C1:100.1")  # a redelivery, or the other replica
    assert await chat(core).claim("C1:100.2")


async def test_typed_options_become_filters_and_a_bad_one_is_one_sentence(core: FakeCore) -> None:
    c = chat(core)
    q = c.question(msg('what about rollback? speaker:Priya source:"Cut-over retro"'), "deep")
    assert q.text == "what about rollback?" and q.mode == "deep" and q.kb == "kb-W1"
    assert q.filters == SearchFilters(speaker="Priya", source="Cut-over retro")
    with pytest.raises(InvalidInput, match="after:yesterday is not a date"):
        c.question(msg("what changed? after:yesterday"))
    form = SearchFilters(speaker="John")  # a platform's own form (Discord's /ask options)
    q = c.question(msg("speaker:Priya as typed"), filters=form)
    assert q.filters == form and q.text == "speaker:Priya as typed"


async def test_the_reply_shows_placeholder_progress_then_the_answer(core: FakeCore) -> None:
    core.enqueue(
        Script(answer("Cognito [1]."), events=(ProgressEvent("searching"), PartialAnswer("Cog")))
    )
    reply = FakeReply()
    got = await chat(core).answer(chat(core).question(msg()), reply)
    assert got is not None and reply.shown == [
        PLACEHOLDER["quick"],
        "searching",
        "Cog",
        "Cognito [1].",
    ]


async def test_a_failure_is_one_apology_never_the_error(core: FakeCore) -> None:
    core.enqueue(Script(error=RuntimeError("kaboom: /srv/secret.db")))
    reply = FakeReply()
    assert await chat(core).answer(chat(core).question(msg()), reply) is None
    assert reply.shown == [PLACEHOLDER["quick"], APOLOGY]


async def test_a_shutdown_mid_answer_says_so_in_the_thread(core: FakeCore) -> None:
    core.enqueue(Script(delay_s=5))
    reply = FakeReply()
    task = asyncio.create_task(chat(core).answer(chat(core).question(msg()), reply))
    await asyncio.sleep(0.1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert reply.shown == [PLACEHOLDER["quick"], RESTARTED]


async def test_feedback_is_stored_and_thanked_or_said_to_have_failed(core: FakeCore) -> None:
    said: list[str] = []

    async def say(text: str) -> None:
        said.append(text)

    await chat(core).feedback(7, "U1", 1, lambda: say(THANKS), say)
    assert core.feedback == [(7, "U1", 1)] and said == [THANKS]

    async def broken(exchange_id: int, user: str, value: int) -> None:
        raise KeyError(exchange_id)  # an unknown exchange id

    core.record_feedback = broken  # type: ignore[method-assign]
    await chat(core).feedback(8, "U1", -1, lambda: say(THANKS), say)
    assert said == [THANKS, FEEDBACK_FAILED]


@dataclass
class FakeSurface:
    """A platform's side of one message: records each step the conversation asked for."""

    allow: bool = True
    steps: list[str] = field(default_factory=list)
    reply_: FakeReply = field(default_factory=FakeReply)

    async def allowed(self, m: Incoming) -> bool:
        self.steps.append("allowed?")
        return self.allow

    async def refuse(self, m: Incoming) -> None:
        self.steps.append("refuse")

    async def add_files(self, m: Incoming) -> None:
        self.steps.append("files")

    async def tell(self, m: Incoming, text: str) -> None:
        self.steps.append(f"tell: {text}")

    async def fail(self, m: Incoming, text: str) -> None:
        self.steps.append(f"fail: {text}")

    async def reply(self, question: Question) -> tuple[Question, FakeReply]:
        self.steps.append("reply")
        return question, self.reply_


async def test_every_platform_takes_a_message_in_one_order(core: FakeCore) -> None:
    c = chat(core)
    ignored = FakeSurface()
    assert await c.receive(msg(), ignored) is None and ignored.steps == []  # not for us

    refused = FakeSurface(allow=False)
    await c.receive(msg(mentioned=True), refused)
    await c.receive(msg(mentioned=True), refused)  # redelivered: claimed before refusing
    assert refused.steps == ["allowed?", "refuse"] and core.questions == []

    files = FakeSurface()
    await c.receive(Incoming(THREAD, "m2", "U1", "", mentioned=True, files=True), files)
    assert files.steps == ["allowed?", "files"] and core.questions == []

    bad = FakeSurface()
    await c.receive(Incoming(THREAD, "m3", "U1", "x after:someday", direct=True), bad)
    assert bad.steps[-1].startswith("tell: after:someday is not a date")

    asked = FakeSurface()
    answered = await c.receive(
        Incoming(THREAD, "m4", "U1", "who chose Cognito?", direct=True), asked
    )
    assert asked.steps == ["allowed?", "reply"] and answered is not None
    assert asked.reply_.shown[0] == PLACEHOLDER["quick"] and len(core.questions) == 1

    core.broken_store = True  # the claim itself fails: the apology, in the conversation
    broken = FakeSurface()
    await c.receive(Incoming(THREAD, "m5", "U1", "again?", direct=True), broken)
    assert broken.steps == [f"fail: {APOLOGY}"]
