"""An answer streamed natively, on any platform that can: progress shown as a status
beside the thread, the answer's words appended to one message as the core writes them,
the final answer (citations linked, feedback buttons) set when the stream stops. When the
platform refuses to stream (an older workspace, a missing scope) the answer falls back to
the placeholder that is edited (``LiveEdits``), with one log line: never a lost answer."""

from __future__ import annotations

import logging
from typing import Protocol, cast

from adapters.chat.conversation import Reply
from adapters.chat.live import LiveEdits
from bot.models import Answer, Event, PartialAnswer, ProgressEvent

log = logging.getLogger("quorum.chat")


class Refused(Exception):
    """The platform will not stream here; the message says why (its error code)."""


class Stream(Protocol):
    """One message whose text grows: start it with the first words, append the rest,
    stop it with the final answer. Each raises ``Refused`` when the platform says no."""

    async def start(self, text: str) -> None: ...

    async def append(self, text: str) -> None: ...

    async def stop(self, answer: Answer) -> None:
        """End the stream and show ``answer`` whole (links, sources, feedback)."""
        ...


class Status(Protocol):
    """A line beside the thread saying what Quorum is doing ("Searching 41 recordings…")."""

    async def show(self, text: str) -> None: ...

    async def clear(self) -> None:
        """Remove the line; must not raise."""
        ...


class StreamedReply:
    """A ``Reply`` that streams: ``status`` shows progress until the first words, the
    words go to ``stream`` at most once per interval, and ``fallback`` (the platform's
    placeholder-and-edits reply; it may be the status itself) takes over wherever the
    stream is refused."""

    def __init__(
        self,
        stream: Stream,
        status: Status,
        fallback: Reply,
        interval_s: float,
        where: str = "",
    ) -> None:
        self.stream, self.status, self.fallback = stream, status, fallback
        self.interval_s, self.where = interval_s, where
        self.sent = ""  # the text the stream holds
        self.streaming = False
        self.backup: Reply | None = None  # the fallback, once the stream was refused
        self._placeholder = ""
        self._status: LiveEdits[str] = LiveEdits(status.show, _text, interval_s)
        self._words: LiveEdits[str] = LiveEdits(self._append, _text, interval_s)

    async def start(self, placeholder: str) -> None:
        """Show the placeholder as the status (refused: the fallback's placeholder)."""
        self._placeholder = placeholder
        try:
            await self.status.show(placeholder)
        except Exception as exc:
            await self._refused(exc, None)

    async def on_event(self, event: Event) -> None:
        """Progress to the status; the answer's words into the stream (started by the first)."""
        if self.backup is not None:
            await self.backup.on_event(event)
        elif isinstance(event, ProgressEvent):
            if not self.streaming:
                await self._status.on_event(event)
        elif not self.streaming:
            await self._begin(event.text)
        else:
            await self._words.on_event(event)

    async def _begin(self, text: str) -> None:
        await self._status.close()
        try:
            await self.stream.start(text)
        except Refused as exc:
            await self._refused(exc, PartialAnswer(text))
            return
        self.streaming, self.sent = True, text
        await self.status.clear()

    async def _refused(self, exc: Exception, latest: Event | None) -> None:
        log.warning("streaming refused (%s): %s; answering by edits instead", self.where, exc)
        self.backup = self.fallback
        await self.backup.start(self._placeholder)
        if latest is not None:
            await self.backup.on_event(latest)

    async def _append(self, text: str) -> None:
        # The core sends the whole text so far; a rewrite of words already sent cannot be
        # taken back mid-stream, so it waits for the final answer, which replaces them all.
        if not text.startswith(self.sent) or text == self.sent:
            return
        await self.stream.append(text[len(self.sent) :])
        self.sent = text

    async def finish(self, answer: Answer) -> None:
        """Stop the stream with the answer; never streamed or refused: the fallback's way."""
        await self._status.close()
        await self._words.close()
        if self.streaming and self.backup is None:
            try:
                await self.stream.stop(answer)
                return
            except Exception as exc:
                log.warning("the stream did not stop (%s): %s; posting the answer", self.where, exc)
                self.streaming = False
                self.backup = self.fallback
        if self.backup is None:
            self.backup = self.fallback
        await self._clear_status()
        await self.backup.finish(answer)

    async def fail(self, text: str) -> None:
        """One sentence in place of the answer; never raises."""
        await self._status.close()
        await self._words.close()
        await self._clear_status()
        if self.streaming and self.backup is None:
            try:  # the sentence ends the stream, in place of the words so far
                await self.stream.stop(Answer(text=text, kind="error", mode="quick"))
                return
            except Exception as exc:
                log.warning("the stream did not stop (%s): %s", self.where, exc)
        if self.backup is None:
            self.backup = self.fallback
        await self.backup.fail(text)

    async def _clear_status(self) -> None:
        # A status that is itself the fallback's placeholder (a message edited in place)
        # stays: the answer or the sentence replaces it.
        if self.status is not cast(object, self.fallback):
            await self.status.clear()


def _text(event: Event) -> str:
    return event.text
