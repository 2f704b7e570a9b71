"""``StreamedReply``, the platform-neutral streamed answer, over a hand-written stream and
status: words appended once each, a rewrite never appended, every refusal (status, start,
stop) ending in the fallback's answer, and a failure mid-stream ending the stream."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import pytest

from adapters.chat.conversation import APOLOGY, Conversation
from adapters.chat.stream import Refused, StreamedReply
from bot.models import Answer, PartialAnswer, ProgressEvent, Question, ThreadKey
from tests.fakes import FakeCore, answer
from tests.test_conversation import FakeReply

THREAD = ThreadKey("fake", "W1", "C1", "100.1")


@dataclass
class FakeStream:
    """Records what the user would see; ``refuse`` names the step the platform refuses."""

    refuse: str | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def _step(self, name: str, text: str) -> None:
        if self.refuse == name:
            raise Refused(f"{name}: not_allowed")
        self.calls.append((name, text))

    async def start(self, text: str) -> None:
        await self._step("start", text)

    async def append(self, text: str) -> None:
        await self._step("append", text)

    async def stop(self, answer: Answer) -> None:
        await self._step("stop", answer.text)


@dataclass
class FakeStatus:
    refuse: bool = False
    shown: list[str] = field(default_factory=list)

    async def show(self, text: str) -> None:
        if self.refuse:
            raise Refused("missing_scope")
        self.shown.append(text)

    async def clear(self) -> None:
        self.shown.append("")


def question() -> Question:
    return Question(text="who chose Cognito?", thread=THREAD, user="U1", kb="kb")


async def run(
    core: FakeCore, stream: FakeStream, status: FakeStatus, fallback: FakeReply
) -> Answer | None:
    reply = StreamedReply(stream, status, fallback, interval_s=0.0, where="C1")
    return await Conversation(core, "fake", lambda w: "kb").answer(question(), reply)


WORDS = [PartialAnswer("We"), PartialAnswer("We chose"), PartialAnswer("We chose Cognito")]


async def test_each_word_is_streamed_once_and_the_stream_stops_with_the_answer() -> None:
    core, stream, status, fallback = FakeCore(), FakeStream(), FakeStatus(), FakeReply()
    core.enqueue(answer("We chose Cognito [1]."), [ProgressEvent("searching"), *WORDS], 0.01)
    assert await run(core, stream, status, fallback) is not None
    assert stream.calls[0] == ("start", "We")
    appended = "".join(t for name, t in stream.calls if name == "append")
    assert "We" + appended == "We chose Cognito"
    assert stream.calls[-1] == ("stop", "We chose Cognito [1].")
    assert status.shown[0] == "Searching the archive…" and "searching" in status.shown
    assert status.shown[-1] == "" and not fallback.shown


async def test_a_rewrite_of_words_already_sent_waits_for_the_final_answer() -> None:
    core, stream, status, fallback = FakeCore(), FakeStream(), FakeStatus(), FakeReply()
    rewrite = [PartialAnswer("We chose"), PartialAnswer("Cognito was chosen")]
    core.enqueue(answer("Cognito was chosen [1]."), rewrite, 0.01)
    await run(core, stream, status, fallback)
    assert [name for name, _ in stream.calls] == ["start", "stop"]


@pytest.mark.parametrize("refuse", ["status", "start", "stop"])
async def test_every_refusal_ends_in_the_fallbacks_answer(refuse: str) -> None:
    core, fallback = FakeCore(), FakeReply()
    stream = FakeStream(refuse=refuse if refuse != "status" else None)
    status = FakeStatus(refuse=refuse == "status")
    core.enqueue(answer("We chose Cognito [1]."), WORDS, 0.01)
    assert await run(core, stream, status, fallback) is not None
    assert fallback.shown[-1] == "We chose Cognito [1]."
    if refuse != "stop":
        assert fallback.shown[0] == "Searching the archive…"  # today's placeholder


async def test_a_failure_mid_stream_ends_the_stream_with_the_apology() -> None:
    core, stream, status, fallback = FakeCore(), FakeStream(), FakeStatus(), FakeReply()
    core.enqueue(RuntimeError("boom"), WORDS[:1], 0.01)
    assert await run(core, stream, status, fallback) is None
    assert stream.calls[-1] == ("stop", APOLOGY) and not fallback.shown


async def test_a_shutdown_mid_stream_says_so_and_lets_the_cancel_through() -> None:
    core, stream, status, fallback = FakeCore(), FakeStream(), FakeStatus(), FakeReply()
    core.enqueue(answer(), [*WORDS[:1], ProgressEvent("x")], 0.5)
    task = asyncio.create_task(run(core, stream, status, fallback))
    await asyncio.sleep(0.7)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert stream.calls[-1][0] == "stop" and "restarted" in stream.calls[-1][1]
