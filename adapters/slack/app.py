"""Quorum on Slack (slack-bolt's AsyncApp, Socket Mode or HTTP events).

Every listener acks at once and hands the work to a background task it keeps a reference
to. A question gets a placeholder in its thread right away; the core's progress events
and partial answers update that same message (at most about once a second), and the final
answer replaces it, continued in further thread messages when it is long.

Exactly once: Slack retries deliveries and sends both ``app_mention`` and ``message`` for
one post, with different event ids, so a question is claimed with the core by
``channel:ts`` of the user's message; the core persists claims across restarts.
Message text never goes to the log: only ids do.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from adapters.chat.conversation import (
    APOLOGY,
    FEEDBACK_FAILED,
    NOT_ALLOWED,
    Conversation,
    Incoming,
    Reply,
    usage,
)
from adapters.chat.options import parse_options
from adapters.chat.uploads import NOT_ADMIN, Uploads, speakers_said
from adapters.slack.assistant import PanelContexts, answer_in, assistant, suggest
from adapters.slack.render import (
    ACTION_UP,
    asked_message,
    feedback_recorded,
    notice,
    plain_text,
)
from adapters.slack.reply import SlackReply
from adapters.slack.settings import slack_settings
from adapters.slack.uploads import ACTION_FORGET, ACTION_KEEP, SlackSources, uploads_in
from bot.config import Settings
from bot.inflight import InFlight
from bot.models import Actor, Core, Mode, Question, ThreadKey
from retrieval.errors import ConfigError, InvalidInput

log = logging.getLogger("quorum.slack")

PLATFORM = "slack"
UPDATE_INTERVAL_S = 1.0
USER_SUBTYPES = (None, "thread_broadcast", "file_share")

CANT_POST = "I can't post in this conversation. Invite me with `/invite @Quorum`, or DM me."


class SlackAdapter:
    """The listeners' work: events and commands -> a Question -> the core -> messages."""

    def __init__(
        self, core: Core, settings: Settings, client: AsyncWebClient, background: InFlight
    ) -> None:
        self.core, self.settings, self.client, self.background = core, settings, client, background
        self.update_interval_s = UPDATE_INTERVAL_S
        self.chat = Conversation(core, PLATFORM, self.kb)
        self.uploads = Uploads(core.library, settings.upload_max_mb)
        self.own = slack_settings(settings)
        self.sources = SlackSources(self.uploads, self.own.admins, self.kb)
        self.panels = PanelContexts()

    def allowed(self, channel: str) -> bool:
        """Channels on the allow-list (every channel when it is empty); DMs always."""
        allow = self.own.channels
        return not allow or channel in allow or channel.startswith("D")

    def kb(self, team_id: str) -> str:
        """The knowledge base a workspace asks."""
        return self.own.kb or team_id

    def kb_of(self, key: ThreadKey) -> str:
        """The knowledge base a thread asks: the one tied (QUORUM_SLACK_CHANNEL_KBS) to the
        channel it is in, or that its assistant panel is beside; else the workspace's."""
        panel = self.panels.opened(key.channel, key.thread)
        where = self.panels.viewing(key.channel, key.thread) if panel else key.channel
        return self.own.channel_kbs.get(where or "") or self.kb(key.workspace)

    async def on_message(
        self, event: dict[str, Any], team_id: str, bot_user_id: str | None
    ) -> None:
        """A mention, a DM, or a reply in a thread Quorum is answering in."""
        if (
            event.get("subtype") not in USER_SUBTYPES
            or event.get("bot_id")
            or not event.get("user")
        ):
            return
        channel, ts, user = str(event["channel"]), str(event["ts"]), str(event["user"])
        raw, reply_to = str(event.get("text") or ""), event.get("thread_ts")
        msg = Incoming(
            key=ThreadKey(PLATFORM, team_id, channel, str(reply_to or ts)),
            message_id=f"{channel}:{ts}",
            user=user,
            text=plain_text(raw, bot_user_id),
            direct=event.get("channel_type") == "im" or channel.startswith("D"),
            mentioned=event.get("type") == "app_mention"
            or bool(bot_user_id and re.search(rf"<@{re.escape(bot_user_id)}[|>]", raw)),
            follow_up=reply_to not in (None, ts),
            addressed_elsewhere=raw.startswith("<@"),
            files=bool(event.get("files")),
        )
        await self.chat.receive(msg, _Posted(self, event))

    async def add_files(self, msg: Incoming, event: dict[str, Any], reply_to: Any) -> None:
        """Files shared with Quorum: an admin's are ingested, each reported in the thread."""
        if not self.sources.may_manage(msg.user):
            await self._ephemeral(msg.key.channel, msg.user, NOT_ADMIN, reply_to)
            return
        speakers = speakers_said(msg.text)
        if isinstance(speakers, str):
            await self._ephemeral(msg.key.channel, msg.user, speakers, reply_to)
            return
        token = self.own.bot_token
        for upload in uploads_in(event, token.get_secret_value() if token else ""):
            by = Actor("slack", msg.user)
            reply = self.reply(msg.key)
            await self.uploads.add(self.kb_of(msg.key), upload, reply, by, speakers)
        if self.panels.opened(msg.key.channel, msg.key.thread):
            await suggest(self, msg.key)  # the prompts follow what the archive holds

    def reply(self, key: ThreadKey) -> SlackReply:
        """A reply in ``key``'s thread."""
        return SlackReply(self.client, key.channel, key.thread, self.update_interval_s)

    def answer_in(self, question: Question) -> tuple[Question, Reply]:
        """Where a question's answer goes (``adapters.slack.assistant.answer_in``)."""
        return answer_in(self, question)

    async def on_command(self, command: dict[str, Any], respond: AsyncRespond, mode: Mode) -> None:
        """``/ask`` or ``/research``: echo the question visibly, then answer in its thread."""
        channel, user, team = command["channel_id"], command["user_id"], command["team_id"]
        text = plain_text(str(command.get("text") or ""), None)
        if not self.allowed(channel):
            await respond(NOT_ALLOWED, response_type="ephemeral")
            return
        try:
            question_text, _ = parse_options(text)
        except InvalidInput as exc:
            await respond(str(exc), response_type="ephemeral")
            return
        if not question_text:
            await respond(usage(command.get("command", "/ask")), response_type="ephemeral")
            return
        echo = asked_message(user, text, deep=mode == "deep")
        try:
            posted = await self.client.chat_postMessage(
                channel=channel, text=echo.text, blocks=echo.blocks
            )
        except SlackApiError as exc:
            log.warning("cannot post in %s: %s", channel, exc.response.get("error"))
            await respond(CANT_POST, response_type="ephemeral")
            return
        except Exception:
            log.exception("could not post the question (channel %s)", channel)
            await respond(APOLOGY, response_type="ephemeral")
            return
        key = ThreadKey(PLATFORM, team, channel, str(posted["ts"]))
        msg = Incoming(key, f"{channel}:{posted['ts']}", user, text)
        await self.chat.answer(*self.answer_in(self.chat.question(msg, mode)))

    async def on_feedback(self, body: dict[str, Any], action: dict[str, Any]) -> None:
        """A 👍/👎 click: store it and swap the buttons for a thank-you."""
        channel, user = body["channel"]["id"], body["user"]["id"]
        value = 1 if action.get("action_id") == ACTION_UP else -1
        message = body.get("message") or {}

        async def recorded() -> None:
            await self.client.chat_update(
                channel=channel,
                ts=message["ts"],
                text=message.get("text") or "Answer",
                blocks=feedback_recorded(list(message.get("blocks") or []), value),
            )

        async def say(text: str) -> None:
            await self._ephemeral(channel, user, text, message.get("thread_ts"))

        try:
            exchange_id = int(action["value"])
        except (KeyError, ValueError):
            log.warning("feedback click without an exchange id (channel %s)", channel)
            await say(FEEDBACK_FAILED)
            return
        await self.chat.feedback(exchange_id, user, value, recorded, say)

    async def _ephemeral(self, channel: str, user: str, text: str, thread_ts: Any) -> None:
        m = notice(text)
        try:
            await self.client.chat_postEphemeral(
                channel=channel, user=user, text=m.text, blocks=m.blocks, thread_ts=thread_ts
            )
        except SlackApiError as exc:
            log.warning("ephemeral note failed in %s: %s", channel, exc.response.get("error"))


class _Posted:
    """One Slack message at the conversation's steps (``Surface``): notes to its author
    are ephemeral, in its thread; the answer and an apology are in the thread."""

    def __init__(self, adapter: SlackAdapter, event: dict[str, Any]) -> None:
        self.adapter, self.event = adapter, event
        self.reply_to = event.get("thread_ts")

    async def allowed(self, msg: Incoming) -> bool:
        return self.adapter.allowed(msg.key.channel)

    async def refuse(self, msg: Incoming) -> None:
        await self.tell(msg, NOT_ALLOWED)

    async def add_files(self, msg: Incoming) -> None:
        await self.adapter.add_files(msg, self.event, self.reply_to)

    async def tell(self, msg: Incoming, text: str) -> None:
        await self.adapter._ephemeral(msg.key.channel, msg.user, text, self.reply_to)

    async def fail(self, msg: Incoming, text: str) -> None:
        await self.adapter.reply(msg.key).fail(text)

    async def reply(self, question: Question) -> tuple[Question, Reply]:
        return self.adapter.answer_in(question)


class _DropTokenUnused(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "`token` will be unused" not in record.getMessage()


_NO_TOKEN_NOTICE = _DropTokenUnused()


def _api_url(url: str) -> str:
    return url if url.endswith("/") else url + "/"


def web_client(settings: Settings, session: aiohttp.ClientSession | None) -> AsyncWebClient:
    """The Web API client with the bot token, or a ConfigError saying what to set."""
    own = slack_settings(settings)
    if own.bot_token is None:
        raise ConfigError("SLACK_BOT_TOKEN is not set: copy the xoxb- token from the app's page.")
    if own.app_token is None and own.signing_secret is None:
        raise ConfigError(
            "Set SLACK_APP_TOKEN (xapp-, Socket Mode) or SLACK_SIGNING_SECRET (HTTP events)."
        )
    client = AsyncWebClient(
        token=own.bot_token.get_secret_value(),
        base_url=_api_url(own.api_url),
        session=session,
    )
    # Slack answers 429 with Retry-After when a workspace posts fast; wait and retry.
    client.retry_handlers.append(AsyncRateLimitErrorRetryHandler(max_retry_count=3))
    return client


def build_slack_app(
    core: Core,
    settings: Settings,
    *,
    background: InFlight | None = None,
    session: aiohttp.ClientSession | None = None,
    update_interval_s: float = UPDATE_INTERVAL_S,
) -> AsyncApp:
    """The Bolt app with Quorum's listeners. Socket Mode needs SLACK_APP_TOKEN; HTTP
    events need SLACK_SIGNING_SECRET (requests are verified against it). ``background``
    holds the work started after each ack (pass one to await it); ``session`` is shared
    by every Web API call (kept-alive connections; without it, one session per call)."""
    client = web_client(settings, session)
    secret = slack_settings(settings).signing_secret
    # Bolt reads SLACK_BOT_TOKEN itself and warns that the client we pass wins over it.
    logging.getLogger("slack_bolt.AsyncApp").addFilter(_NO_TOKEN_NOTICE)
    app = AsyncApp(
        name="quorum",
        client=client,
        signing_secret=secret.get_secret_value() if secret else "",
        process_before_response=True,  # our listeners only spawn a task: ack comes at once
    )
    adapter = SlackAdapter(
        core, settings, client, background if background is not None else InFlight(log)
    )
    adapter.update_interval_s = update_interval_s
    app.assistant(assistant(adapter))
    _listen(app, adapter)
    return app


def _listen(app: AsyncApp, adapter: SlackAdapter) -> None:
    """Quorum's listeners: each acks at once and leaves the work to the background."""
    spawn = adapter.background.spawn

    async def on_event(
        body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
    ) -> None:
        team = str(body.get("team_id") or context.team_id or "")
        spawn(adapter.on_message(event, team, context.bot_user_id))

    async def on_ask(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        spawn(adapter.on_command(command, respond, "quick"))

    async def on_research(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        spawn(adapter.on_command(command, respond, "deep"))

    async def on_feedback(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        spawn(adapter.on_feedback(body, action))

    async def on_sources(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        spawn(adapter.sources.on_sources(command, respond))

    async def on_forget(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        spawn(adapter.sources.on_forget(command, respond))

    async def on_speakers(ack: AsyncAck, command: dict[str, Any], respond: AsyncRespond) -> None:
        await ack()
        spawn(adapter.sources.on_speakers(command, respond))

    async def on_forget_click(
        ack: AsyncAck, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> None:
        await ack()
        spawn(adapter.sources.on_click(body, action, respond))

    app.event("app_mention")(on_event)
    app.event("message")(on_event)
    app.command("/ask")(on_ask)
    app.command("/research")(on_research)
    app.action(re.compile(r"^quorum_feedback_(up|down)$"))(on_feedback)
    app.command("/sources")(on_sources)
    app.command("/forget")(on_forget)
    app.command("/speakers")(on_speakers)
    app.action(ACTION_FORGET)(on_forget_click)
    app.action(ACTION_KEEP)(on_forget_click)
