"""The conversation every chat platform has with Quorum, written once: whether a message
is for Quorum, claiming it exactly once, the allow-list, typed options, the question,
the live reply and the apology policy. A platform adapter only translates its events
into an ``Incoming`` and implements ``Surface`` (how to refuse, how to reply), then hands
both to ``Conversation.receive``, which takes the steps in the one order every platform
shares; it never decides any of this itself. Free of SDK imports
(``tests/test_architecture.py``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from adapters.chat.options import USAGE, parse_options
from bot.models import Answer, Core, Event, Mode, Question, ThreadKey
from retrieval.errors import InvalidInput
from retrieval.models import SearchFilters

log = logging.getLogger("quorum.chat")

PLACEHOLDER: dict[Mode, str] = {
    "quick": "Searching the archive…",
    "deep": "Researching the archive…",
}
APOLOGY = "Sorry — something went wrong on my side while answering. Please try again."
RESTARTED = "Sorry — Quorum restarted before it could finish. Please ask again."
NOT_ALLOWED = (
    "Sorry, I'm not enabled in this channel. Ask me in a channel where I am, "
    "or in a direct message."
)
FEEDBACK_FAILED = "Sorry — I couldn't record that feedback. Please try again."
THANKS = "Thanks, feedback recorded."


def usage(command: str) -> str:
    """How to write a question with options, for an empty command."""
    return f"Usage: `{command} QUESTION` with options {USAGE}"


@dataclass(frozen=True)
class Incoming:
    """A message a platform received, in the terms the conversation decides on.

    ``key`` is the conversation it belongs to (the thread it is in, or the one an answer
    would start); ``follow_up`` says it was posted inside an existing thread or
    conversation; ``addressed_elsewhere`` that it starts by mentioning someone else
    ("@Bob what do you think?" is not for Quorum)."""

    key: ThreadKey
    message_id: str
    user: str
    text: str
    direct: bool = False
    mentioned: bool = False
    follow_up: bool = False
    addressed_elsewhere: bool = False
    files: bool = False  # it carries files (added to the archive when sent to Quorum)


class Reply(Protocol):
    """One answer being delivered: a placeholder, live progress, the final answer."""

    async def start(self, placeholder: str) -> None: ...

    async def on_event(self, event: Event) -> None: ...

    async def finish(self, answer: Answer) -> None: ...

    async def fail(self, text: str) -> None:
        """Say one sentence in place of the answer; must not raise."""
        ...


class Surface(Protocol):
    """What a platform does at each step of one message it received (the order of the
    steps is ``Conversation.receive``'s). None of these decides anything."""

    async def allowed(self, msg: Incoming) -> bool:
        """The platform's allow-list admits where ``msg`` was posted."""
        ...

    async def refuse(self, msg: Incoming) -> None:
        """``msg`` is not allowed where it was posted: say so privately, or nothing."""
        ...

    async def add_files(self, msg: Incoming) -> None:
        """Files sent to Quorum: check who may, add them, report each one."""
        ...

    async def tell(self, msg: Incoming, text: str) -> None:
        """One sentence to the asker alone where possible (a bad option); must not raise."""
        ...

    async def fail(self, msg: Incoming, text: str) -> None:
        """One sentence in the conversation in place of an answer; must not raise."""
        ...

    async def reply(self, question: Question) -> tuple[Question, Reply]:
        """Where the answer goes: the ``Reply``, and the question moved to the thread it
        will be in (a platform may start one)."""
        ...


class Conversation:
    """The rules of talking to Quorum on any platform, over one core."""

    def __init__(self, core: Core, platform: str, kb_for: Callable[[str], str]) -> None:
        self.core, self.platform, self.kb_for = core, platform, kb_for

    async def is_for_us(self, msg: Incoming) -> bool:
        """A DM, a mention, or a follow-up in a thread Quorum is answering in."""
        if msg.direct or msg.mentioned:
            return True
        if not msg.follow_up or msg.addressed_elsewhere:
            return False
        return await self.core.is_active_thread(msg.key)

    async def receive(self, msg: Incoming, surface: Surface) -> Answer | None:
        """A message a platform received, in the one order every platform shares: is it for
        Quorum → claim it once → the allow-list → files, or the question → the answer. A
        bad option is told to the asker; any other failure before the answer is the
        apology. Returns the answer, or None when there was none."""
        if not await self.is_for_us(msg):
            return None
        try:
            if not await self.claim(msg.message_id):
                return None
            if not await surface.allowed(msg):
                await surface.refuse(msg)
                return None
            if msg.files and (msg.direct or msg.mentioned):
                await surface.add_files(msg)
                return None
            question, reply = await surface.reply(self.question(msg))
        except InvalidInput as exc:
            await surface.tell(msg, str(exc))
            return None
        except Exception:
            # logged as the platform's own (quorum.<name>): where an operator looks
            logging.getLogger(f"quorum.{self.platform}").exception(
                "could not take message %s (%s)", msg.message_id, msg.key
            )
            await surface.fail(msg, APOLOGY)
            return None
        return await self.answer(question, reply)

    async def claim(self, event_id: str) -> bool:
        """True once per event id, across retries, replicas and restarts."""
        return await self.core.claim_event(self.platform, event_id)

    def question(
        self,
        msg: Incoming,
        mode: Mode = "quick",
        filters: SearchFilters | None = None,
    ) -> Question:
        """The core's question for ``msg``: its typed options (``speaker:``, ``source:``
        …) become filters unless ``filters`` come from the platform's own form.

        Raises InvalidInput (one sentence) for a bad option."""
        text = msg.text
        if filters is None:
            text, filters = parse_options(msg.text)
        return Question(
            text=text,
            thread=msg.key,
            user=msg.user,
            kb=self.kb_for(msg.key.workspace),
            mode=mode,
            filters=filters,
            event_id=msg.message_id,
        )

    async def answer(self, question: Question, reply: Reply) -> Answer | None:
        """Ask the core and deliver the answer in ``reply``: the placeholder at once, live
        progress, the answer. Any failure becomes one sentence in the thread (never
        silence, never a traceback); a shutdown says Quorum restarted, then lets the
        cancellation through. Returns the answer, or None when it failed."""
        try:
            await reply.start(PLACEHOLDER[question.mode])
            answer = await self.core.ask(question, reply.on_event)
            await reply.finish(answer)
            return answer
        except asyncio.CancelledError:
            await reply.fail(RESTARTED)
            raise
        except Exception:
            log.exception("answering failed (%s)", question.thread)
            await reply.fail(APOLOGY)
            return None

    async def feedback(
        self,
        exchange_id: int,
        user: str,
        value: int,
        recorded: Callable[[], Awaitable[object]],
        say: Callable[[str], Awaitable[object]],
    ) -> None:
        """Store a 👍/👎, then ``recorded()`` (the platform's thank-you), or ``say`` that it
        failed; never raises."""
        try:
            await self.core.record_feedback(exchange_id, user, value)
        except InvalidInput as exc:  # an answer the store no longer knows: said, no traceback
            log.info("feedback for exchange %s not recorded: %s", exchange_id, exc)
            await _quietly(say(str(exc)))
            return
        except Exception as exc:
            log.warning("recording feedback for exchange %s failed: %s", exchange_id, exc)
            await _quietly(say(FEEDBACK_FAILED))
            return
        await _quietly(recorded())


async def _quietly(sent: Awaitable[object]) -> None:
    try:
        await sent
    except Exception as exc:
        log.warning("could not tell the user about their feedback: %s", exc)


__all__ = [
    "APOLOGY",
    "FEEDBACK_FAILED",
    "NOT_ALLOWED",
    "PLACEHOLDER",
    "RESTARTED",
    "THANKS",
    "Conversation",
    "Incoming",
    "InvalidInput",
    "Reply",
    "Surface",
    "usage",
]
