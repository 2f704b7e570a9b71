"""Delivering an answer in a Slack thread: the placeholder, its throttled updates, the
final answer."""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from adapters.chat.live import LiveEdits
from adapters.slack.render import (
    SlackMessage,
    answer_messages,
    notice,
    partial_message,
    progress_message,
)
from bot.models import Answer, Event, ProgressEvent

log = logging.getLogger("quorum.slack")

SHUTDOWN_GRACE_S = 5.0


class SlackReply:
    """One answer delivered in a Slack thread: a placeholder, throttled updates of that
    same message, then the final answer (first part replacing the placeholder, the rest
    following in the thread)."""

    def __init__(
        self, client: AsyncWebClient, channel: str, thread_ts: str, interval_s: float
    ) -> None:
        self.client, self.channel, self.thread_ts = client, channel, thread_ts
        self.interval_s = interval_s
        self.ts: str | None = None
        self._live: LiveEdits[SlackMessage] | None = None

    async def start(self, placeholder: str) -> None:
        """Post the placeholder in the thread (once: a second start keeps the first)."""
        if self.ts is not None:
            return
        resp = await self._post(notice(placeholder))
        self.ts = str(resp["ts"])
        self._live = LiveEdits(self._update, _progress, self.interval_s)

    async def on_event(self, event: Event) -> None:
        """The core's EventSink: shown in the placeholder, at most once an interval."""
        if self._live is not None:
            await self._live.on_event(event)

    async def finish(self, answer: Answer) -> None:
        """Replace the placeholder with the answer."""
        await self._send(answer_messages(answer))

    async def fail(self, text: str) -> None:
        """Say one sentence in place of the answer; never raises."""
        try:
            await self._send([notice(text)])
        except Exception:
            log.exception("could not post the error message (channel %s)", self.channel)

    async def show(self, step: str) -> None:
        """``Status``: the placeholder, posted by the first step and edited by the next."""
        if self.ts is None:
            await self.start(step)
        else:
            await self._update(progress_message(step))

    async def clear(self) -> None:
        """``Status``: the placeholder deleted (the answer is streaming below it)."""
        if self._live is not None:
            await self._live.close()
        if self.ts is None:
            return
        try:
            await self.client.chat_delete(channel=self.channel, ts=self.ts)
            self.ts, self._live = None, None
        except Exception as exc:
            log.warning("could not delete the placeholder (channel %s): %s", self.channel, exc)

    async def done(self, text: str) -> None:
        """An upload's result in place of its progress; never raises."""
        await self.fail(text)

    async def _send(self, messages: list[SlackMessage]) -> None:
        if self._live is not None:
            await self._live.close()
        first, *rest = messages
        if self.ts is None:
            await self._post(first)
        else:
            await self._update(first)
        for message in rest:
            await self._post(message)

    async def _post(self, m: SlackMessage) -> Any:
        return await self.client.chat_postMessage(
            channel=self.channel, thread_ts=self.thread_ts, text=m.text, blocks=m.blocks
        )

    async def _update(self, m: SlackMessage) -> None:
        if self.ts is None:
            raise RuntimeError("update before the placeholder was posted")
        await self.client.chat_update(
            channel=self.channel, ts=self.ts, text=m.text, blocks=m.blocks
        )


def _progress(event: Event) -> SlackMessage:
    if isinstance(event, ProgressEvent):
        return progress_message(event.text)
    return partial_message(event.text)
