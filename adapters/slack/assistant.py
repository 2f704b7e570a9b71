"""Quorum as a Slack AI app: the assistant panel (Bolt's ``AsyncAssistant``), its status
line (``assistant.threads.setStatus``), suggested prompts drawn from the knowledge base
(``assistant.threads.setSuggestedPrompts``), and Slack's native streaming
(``chat.startStream`` / ``appendStream`` / ``stopStream``) behind the platform-neutral
``Stream`` and ``Status`` of ``adapters/chat/stream.py``.

The panel's threads run the same conversation as any DM thread (``Panelled.on_message``);
only their reply streams. Which channel each open panel is beside is kept in memory
(``PanelContexts``): after a restart a panel's thread is answered as a DM thread is."""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from typing import Any, Protocol

from slack_bolt.context.assistant.thread_context import AssistantThreadContext
from slack_bolt.context.assistant.thread_context_store.async_store import (
    AsyncAssistantThreadContextStore,
)
from slack_bolt.middleware.assistant.async_assistant import AsyncAssistant
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.chat.conversation import Reply
from adapters.chat.prompts import TITLE, suggestions
from adapters.chat.stream import Refused, Status, StreamedReply
from adapters.slack.render import SlackMessage, answer_messages, feedback_block
from adapters.slack.reply import SlackReply
from adapters.slack.settings import SlackSettings
from bot.inflight import InFlight
from bot.models import Answer, Core, Question, ThreadKey

log = logging.getLogger("quorum.slack")

MAX_PANELS = 10_000  # open panels remembered (the oldest forgotten first)


class PanelContexts(AsyncAssistantThreadContextStore):
    """The open assistant threads and the channel each is beside, in memory, bounded."""

    def __init__(self, limit: int = MAX_PANELS) -> None:
        self._threads: OrderedDict[tuple[str, str], dict[str, str]] = OrderedDict()
        self._limit = limit

    async def save(self, *, channel_id: str, thread_ts: str, context: dict[str, str]) -> None:
        self._threads[(channel_id, thread_ts)] = dict(context or {})
        self._threads.move_to_end((channel_id, thread_ts))
        while len(self._threads) > self._limit:
            self._threads.popitem(last=False)

    async def find(self, *, channel_id: str, thread_ts: str) -> AssistantThreadContext | None:
        found = self._threads.get((channel_id, thread_ts))
        return AssistantThreadContext(found) if found and found.get("channel_id") else None

    def opened(self, channel: str, thread_ts: str) -> bool:
        """True for a thread opened as an assistant panel."""
        return (channel, thread_ts) in self._threads

    def viewing(self, channel: str, thread_ts: str) -> str | None:
        """The channel the user had open beside the panel, if any."""
        return (self._threads.get((channel, thread_ts)) or {}).get("channel_id") or None


def _refused(exc: SlackApiError) -> Refused:
    return Refused(str(exc.response.get("error") or "refused"))


class SlackStream:
    """One answer streamed into a thread with Slack's streaming methods; the final answer
    (citations linked at their second, sources, feedback buttons) replaces the streamed
    words once the stream stops, and what does not fit follows in the thread."""

    def __init__(
        self, client: AsyncWebClient, channel: str, thread_ts: str, team: str, user: str
    ) -> None:
        self.client, self.channel, self.thread_ts = client, channel, thread_ts
        self.team, self.user = team, user
        self.ts: str | None = None

    async def start(self, text: str) -> None:
        try:
            resp = await self.client.chat_startStream(
                channel=self.channel,
                thread_ts=self.thread_ts,
                markdown_text=text,
                recipient_team_id=self.team,
                recipient_user_id=self.user,
            )
        except SlackApiError as exc:
            raise _refused(exc) from exc
        self.ts = str(resp["ts"])

    async def append(self, text: str) -> None:
        if self.ts is None:
            raise Refused("append before start")
        try:
            await self.client.chat_appendStream(
                channel=self.channel, ts=self.ts, markdown_text=text
            )
        except SlackApiError as exc:
            raise _refused(exc) from exc

    async def stop(self, answer: Answer) -> None:
        if self.ts is None:
            raise Refused("stop before start")
        first, *rest = answer_messages(answer)
        rated = answer.exchange_id is not None and _rated(first)
        buttons = [feedback_block(answer.exchange_id or 0)] if rated else None
        try:
            await self.client.chat_stopStream(channel=self.channel, ts=self.ts, blocks=buttons)
        except SlackApiError as exc:
            raise _refused(exc) from exc
        try:  # the streamed markdown becomes the answer as every thread shows it
            await self._update(first)
        except SlackApiError as exc:
            log.warning("could not finish the streamed answer: %s; posting it", exc)
            rest.insert(0, first)
        for message in rest:
            await self.client.chat_postMessage(
                channel=self.channel,
                thread_ts=self.thread_ts,
                text=message.text,
                blocks=message.blocks,
            )

    async def _update(self, m: SlackMessage) -> None:
        assert self.ts is not None
        await self.client.chat_update(
            channel=self.channel, ts=self.ts, text=m.text, blocks=m.blocks
        )


def _rated(first: SlackMessage) -> bool:
    return any(b.get("type") == "actions" for b in first.blocks)


class AssistantStatus:
    """The panel's status line under the thread ("Searching the archive…")."""

    def __init__(self, client: AsyncWebClient, channel: str, thread_ts: str) -> None:
        self.client, self.channel, self.thread_ts = client, channel, thread_ts

    async def show(self, text: str) -> None:
        await self.client.assistant_threads_setStatus(
            channel_id=self.channel, thread_ts=self.thread_ts, status=text[:200]
        )

    async def clear(self) -> None:
        try:
            await self.show("")
        except Exception as exc:
            log.warning("could not clear the status: %s", exc)


class Panelled(Protocol):
    """What the panel's listeners need of Slack's adapter (``app.SlackAdapter``)."""

    core: Core
    client: AsyncWebClient
    own: SlackSettings
    panels: PanelContexts
    background: InFlight
    update_interval_s: float

    def kb_of(self, key: ThreadKey) -> str:
        """The knowledge base a thread asks."""
        ...

    def reply(self, key: ThreadKey) -> SlackReply:
        """A reply in ``key``'s thread."""
        ...

    async def on_message(
        self, event: dict[str, Any], team_id: str, bot_user_id: str | None
    ) -> None:
        """A message in a panel, as any other message."""
        ...


def answer_in(adapter: Panelled, question: Question) -> tuple[Question, Reply]:
    """Where a question's answer goes, from the knowledge base its thread asks: streamed
    (QUORUM_SLACK_STREAM) beside an assistant panel's status line, or below a thread's
    placeholder; else, or when Slack refuses the stream, the placeholder that is edited."""
    key, how = question.thread, adapter.own.stream
    panel = adapter.panels.opened(key.channel, key.thread)
    question = dataclasses.replace(question, kb=adapter.kb_of(key))
    reply = adapter.reply(key)
    if how == "off" or (how == "panel" and not panel):
        return question, reply
    stream = SlackStream(adapter.client, key.channel, key.thread, key.workspace, question.user)
    status: Status = AssistantStatus(adapter.client, key.channel, key.thread) if panel else reply
    interval = adapter.update_interval_s
    return question, StreamedReply(stream, status, reply, interval, key.channel)


def assistant(adapter: Panelled) -> AsyncAssistant:
    """Bolt's assistant middleware with Quorum's panel listeners: each acks at once and
    leaves the work to the background."""
    panel = AsyncAssistant(thread_context_store=adapter.panels)
    spawn = adapter.background.spawn

    async def started(payload: dict[str, Any], body: dict[str, Any]) -> None:
        spawn(opened(adapter, payload["assistant_thread"], str(body.get("team_id") or "")))

    async def moved(payload: dict[str, Any], body: dict[str, Any]) -> None:
        spawn(opened(adapter, payload["assistant_thread"], str(body.get("team_id") or "")))

    async def message(payload: dict[str, Any], body: dict[str, Any], context: Any) -> None:
        team = str(body.get("team_id") or context.team_id or "")
        spawn(adapter.on_message(payload, team, context.bot_user_id))

    panel.thread_started(started)
    panel.thread_context_changed(moved)
    panel.user_message(message)
    return panel


async def opened(adapter: Panelled, thread: dict[str, Any], team: str) -> None:
    """A panel opened, or moved beside another channel: remember where, and suggest
    prompts from its knowledge base (again only when the move changed it)."""
    key = ThreadKey("slack", team, str(thread["channel_id"]), str(thread["thread_ts"]))
    was = adapter.kb_of(key) if adapter.panels.opened(key.channel, key.thread) else None
    context = thread.get("context") or {}
    await adapter.panels.save(channel_id=key.channel, thread_ts=key.thread, context=context)
    if adapter.kb_of(key) != was:
        await suggest(adapter, key)


async def suggest(adapter: Panelled, key: ThreadKey) -> None:
    """Set a panel's suggested prompts from what its knowledge base holds now."""
    prompts = await suggestions(adapter.core, adapter.kb_of(key))
    try:
        await adapter.client.assistant_threads_setSuggestedPrompts(
            channel_id=key.channel,
            thread_ts=key.thread,
            title=TITLE,
            prompts=[{"title": p.title, "message": p.message} for p in prompts],
        )
    except SlackApiError as exc:
        log.warning("suggested prompts refused: %s", exc.response.get("error"))
