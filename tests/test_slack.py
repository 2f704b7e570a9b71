"""The Slack adapter through the real Bolt app and the real AsyncWebClient: signed
requests from the Slack emulator hit the app's aiohttp server (or Socket Mode), and the
app's replies land in the emulator, which refuses what Slack would refuse."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from slack_bolt.async_app import AsyncApp
from slack_bolt.request.async_request import AsyncBoltRequest

from adapters.chat.conversation import APOLOGY, NOT_ALLOWED
from adapters.slack.app import build_slack_app
from adapters.slack.events import run_slack, start_http
from adapters.slack.render import ACTION_UP, plain_text
from bot.config import Settings, load_settings
from bot.inflight import InFlight
from bot.models import Answer, Citation, PartialAnswer, ProgressEvent, ThreadKey
from bot.research.loop import STOPPED_EARLY
from retrieval.errors import ConfigError, InvalidInput
from retrieval.models import SearchFilters
from tests.emulators.slack import (
    ALICE,
    APP_TOKEN,
    BOT_TOKEN,
    BOT_USER,
    SIGNING_SECRET,
    TEAM,
    Message,
    SlackEmulator,
    texts_in,
)
from tests.fakes import FakeCore, Script, answer

GENERAL = "C0GENERAL"
LINK_IN_MRKDWN = "https://www.youtube.com/watch?v=authdeep&amp;t=734"


@dataclass
class Bot:
    app: AsyncApp
    background: InFlight
    runner: web.AppRunner

    async def settle(self) -> None:
        await self.background.drain()


def make_settings(slack: SlackEmulator, **kw: Any) -> Settings:
    return load_settings(
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack.api_url,
        **kw,
    )


@contextlib.asynccontextmanager
async def running(
    core: Any, settings: Settings, slack: SlackEmulator, interval_s: float = 0.05
) -> AsyncIterator[Bot]:
    background = InFlight()
    app = build_slack_app(core, settings, background=background, update_interval_s=interval_s)
    runner = await start_http(app, 0, "127.0.0.1")
    slack.target = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
    try:
        yield Bot(app, background, runner)
    finally:
        await background.drain()
        await runner.cleanup()


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[FakeCore]:
    fake = FakeCore(tmp_path / "claims.sqlite3")
    yield fake
    await fake.close()


@pytest.fixture
async def bot(core: FakeCore, slack: SlackEmulator) -> AsyncIterator[Bot]:
    async with running(core, make_settings(slack), slack) as b:
        yield b


async def mention(
    slack: SlackEmulator, bot: Bot, text: str, channel: str = GENERAL, thread_ts: str | None = None
) -> Message:
    msg = slack.user_posts(channel, f"<@{BOT_USER}> {text}", thread_ts=thread_ts)
    delivery = await slack.deliver_event(slack.event(msg, "app_mention"))
    assert delivery.status == 200
    await bot.settle()
    return msg


def bot_replies(slack: SlackEmulator, channel: str, thread_ts: str) -> list[Message]:
    return [m for m in slack.thread(channel, thread_ts) if m.bot_id]


def has_buttons(msg: Message) -> bool:
    return any(b["type"] == "actions" for b in msg.blocks)


# ---------------------------------------------------------------- mentions


async def test_mention_placeholder_then_updates_of_the_same_message(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    core.enqueue(
        Script(
            answer(),
            events=(
                ProgressEvent("searching 'Auth0 Cognito'"),
                PartialAnswer("We chose **Cognito**"),
                PartialAnswer("We chose **Cognito** over Auth0 for cost [1]."),
            ),
            delay_s=0.08,
        )
    )
    msg = await mention(slack, bot, "what did we decide about Auth0?")

    [reply] = bot_replies(slack, GENERAL, msg.ts)
    [placeholder] = slack.called("chat.postMessage")
    assert placeholder.args["thread_ts"] == msg.ts
    assert "Searching the archive…" in placeholder.args["text"]
    updates = slack.called("chat.update")
    assert len(updates) >= 3 and {u.args["ts"] for u in updates} == {reply.ts}
    texts = ["\n".join(texts_in(v["blocks"])) for v in reply.versions]
    assert "_searching 'Auth0 Cognito'…_" in texts[1]
    assert any("We chose *Cognito*" in t and "[1]" in t for t in texts[2:-1])
    final = reply.all_text()
    assert f"[<{LINK_IN_MRKDWN}|1>]" in final  # the inline citation opens the video at 12:14
    assert f"1. <{LINK_IN_MRKDWN}|Auth deep dive @ 12:14> — John" in final
    assert has_buttons(reply)
    assert not slack.errors()

    [q] = core.questions
    assert q.text == "what did we decide about Auth0?"
    assert q.thread == ThreadKey("slack", TEAM, GENERAL, msg.ts)
    assert (q.kb, q.mode, q.user, q.event_id) == (TEAM, "quick", ALICE, f"{GENERAL}:{msg.ts}")


async def test_updates_are_throttled_and_the_final_lands_last(
    slack: SlackEmulator, core: FakeCore
) -> None:
    partials = tuple(PartialAnswer("Cognito " * i) for i in range(1, 41))
    core.enqueue(Script(answer("The final answer [1]."), events=partials, delay_s=0.025))
    async with running(core, make_settings(slack), slack, interval_s=0.3) as bot:
        msg = await mention(slack, bot, "what happened?")
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    updates = slack.called("chat.update")
    # about 1 s of partials at most one update per 0.3 s, plus the final
    assert 2 <= len(updates) <= 6
    gaps = [b.at - a.at for a, b in zip(updates[:-1], updates[1:-1], strict=False)]
    assert all(g >= 0.25 for g in gaps)
    assert "The final answer" in reply.all_text() and has_buttons(reply)


async def test_thread_follow_up_needs_no_mention_and_keeps_the_thread(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    first = await mention(slack, bot, "who chose Cognito?")
    follow = slack.user_posts(GENERAL, "and when was that?", thread_ts=first.ts)
    assert (await slack.deliver_event(slack.event(follow))).status == 200
    await bot.settle()

    assert [q.text for q in core.questions] == ["who chose Cognito?", "and when was that?"]
    assert core.questions[1].thread == core.questions[0].thread
    assert core.history[core.questions[0].thread] == ["who chose Cognito?", "and when was that?"]
    assert len(bot_replies(slack, GENERAL, first.ts)) == 2

    # not for us: a top-level message, and a reply in a thread Quorum is not in
    other = slack.user_posts(GENERAL, "lunch?")
    reply = slack.user_posts(GENERAL, "sure", thread_ts=other.ts)
    for m in (other, reply):
        await slack.deliver_event(slack.event(m))
    await bot.settle()
    assert len(core.questions) == 2
    assert not bot_replies(slack, GENERAL, other.ts)


async def test_direct_messages_each_thread_is_a_session(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    dm = slack.user_posts("D0ALICE", "when was the cutover?")
    await slack.deliver_event(slack.event(dm))
    await bot.settle()
    follow = slack.user_posts("D0ALICE", "who ran it?", thread_ts=dm.ts)
    await slack.deliver_event(slack.event(follow))
    await bot.settle()
    other = slack.user_posts("D0ALICE", "a new topic")
    await slack.deliver_event(slack.event(other))
    await bot.settle()

    keys = [q.thread for q in core.questions]
    assert keys[0] == keys[1] == ThreadKey("slack", TEAM, "D0ALICE", dm.ts)
    assert keys[2] == ThreadKey("slack", TEAM, "D0ALICE", other.ts)
    assert len(bot_replies(slack, "D0ALICE", dm.ts)) == 2
    assert len(bot_replies(slack, "D0ALICE", other.ts)) == 1
    assert not slack.top_level("D0ALICE")[2:]  # the bot never posts top-level in a DM


async def test_markup_in_the_question_becomes_plain_words(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    await mention(slack, bot, "is &lt;AuthProvider&gt; &amp; <https://auth0.com|auth0.com> ok?")
    assert core.questions[0].text == "is <AuthProvider> & auth0.com ok?"
    assert plain_text(f"<@{BOT_USER}|quorum> hi <#C1|general> <!here>", BOT_USER) == "hi #general"


async def test_options_in_a_mention_become_filters(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    await mention(slack, bot, 'why? speaker:John before:2024-06-30 source:"Auth deep dive"')
    assert core.questions[0].text == "why?"
    assert core.questions[0].filters == SearchFilters(
        speaker="John", before=date(2024, 6, 30), source="Auth deep dive"
    )
    msg = await mention(slack, bot, "why? after:someday")
    [note] = slack.ephemerals
    assert note["user"] == ALICE and note["thread_ts"] is None
    assert note["text"] == "after:someday is not a date; use YYYY-MM-DD, e.g. after:2024-01-31."
    assert len(core.questions) == 1 and not bot_replies(slack, GENERAL, msg.ts)


# ---------------------------------------------------------------- slash commands


async def test_ask_posts_the_question_visibly_and_answers_in_its_thread(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    text = 'who chose Cognito? speaker:John after:2024-01-01 source:"Auth deep dive"'
    delivery = await slack.deliver_command(slack.command("/ask", text))
    assert delivery.status == 200 and delivery.seconds < 1.0
    await bot.settle()

    [echo] = slack.top_level(GENERAL)
    assert f"*<@{ALICE}> asked:* who chose Cognito? speaker:John" in echo.all_text()
    [reply] = bot_replies(slack, GENERAL, echo.ts)
    assert f"<{LINK_IN_MRKDWN}|1>" in reply.all_text()
    [q] = core.questions
    assert q.text == "who chose Cognito?" and q.mode == "quick"
    assert q.thread == ThreadKey("slack", TEAM, GENERAL, echo.ts)
    assert q.filters == SearchFilters(
        speaker="John", after=date(2024, 1, 1), source="Auth deep dive"
    )

    follow = slack.user_posts(GENERAL, "and why?", thread_ts=echo.ts)
    await slack.deliver_event(slack.event(follow))
    await bot.settle()
    assert core.questions[1].thread == q.thread
    assert not slack.errors() and not slack.responses


async def test_research_is_deep_and_shows_progress(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    note = f"{STOPPED_EARLY} (it reached its limit of 8 steps); the answer uses what was found."
    core.enqueue(
        Script(
            answer(mode="deep", note=note),
            events=(ProgressEvent("searching 'Auth0 Cognito'"), ProgressEvent("reading")),
            delay_s=0.08,
        )
    )
    await slack.deliver_command(slack.command("/research", "how did the migration go?"))
    await bot.settle()

    [echo] = slack.top_level(GENERAL)
    assert "asked for deep research:* how did the migration go?" in echo.all_text()
    [reply] = bot_replies(slack, GENERAL, echo.ts)
    versions = [json.dumps(v, ensure_ascii=False) for v in reply.versions]
    assert "Researching the archive…" in versions[0]
    assert any("_searching 'Auth0 Cognito'…_" in v for v in versions)
    assert note in reply.all_text()
    assert core.questions[0].mode == "deep"


async def test_bad_option_is_an_ephemeral_sentence(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    await slack.deliver_command(slack.command("/ask", "who? after:2024-13-01"))
    await slack.deliver_command(slack.command("/ask", "   "))
    await bot.settle()
    bad_date, usage = slack.responses
    assert bad_date["text"] == (
        "after:2024-13-01 is not a date; use YYYY-MM-DD, e.g. after:2024-01-31."
    )
    assert bad_date["response_type"] == "ephemeral"
    assert usage["text"].startswith("Usage: `/ask QUESTION`")
    assert not slack.called("chat.postMessage") and not core.questions


# ---------------------------------------------------------------- exactly once


async def test_retries_and_the_mention_message_pair_get_one_answer(
    slack: SlackEmulator, core: FakeCore, bot: Bot, tmp_path: Path
) -> None:
    core.enqueue(Script(answer(), delay_s=0.2))
    msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> who chose Cognito?")
    as_mention, as_message = slack.event(msg, "app_mention"), slack.event(msg, "message")
    deliveries = await asyncio.gather(
        slack.deliver_event(as_mention),
        slack.deliver_event(as_message),
        slack.deliver_event(as_mention, retry_num=1),
        slack.deliver_event(as_message, retry_num=2),
    )
    assert [d.status for d in deliveries] == [200] * 4
    await bot.settle()
    assert len(core.questions) == 1
    assert len(bot_replies(slack, GENERAL, msg.ts)) == 1

    # a restart: a new app and core on the same claims store refuse the redelivery
    await core.close()
    reborn = FakeCore(core.claims_path)
    try:
        async with running(reborn, make_settings(slack), slack) as bot2:
            await slack.deliver_event(as_mention, retry_num=3)
            await bot2.settle()
        assert not reborn.questions
    finally:
        await reborn.close()
    assert len(bot_replies(slack, GENERAL, msg.ts)) == 1


async def test_bot_messages_edits_deletes_and_joins_are_ignored(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    first = await mention(slack, bot, "who chose Cognito?")
    own = bot_replies(slack, GENERAL, first.ts)[0]
    events = [
        slack.event(own),  # our own reply (bolt drops it, and so would we)
        slack.event(
            slack.user_posts(GENERAL, "beep", thread_ts=first.ts),
            subtype="bot_message",
            bot_id="B0OTHER",
        ),
        slack.event(first, subtype="message_changed", message={"text": "edited"}),
        slack.event(first, subtype="message_deleted"),
        slack.event(slack.user_posts(GENERAL, "joined"), subtype="channel_join"),
    ]
    for payload in events:
        assert (await slack.deliver_event(payload)).status == 200
    await bot.settle()
    assert len(core.questions) == 1
    assert len(slack.called("chat.postMessage")) == 1


# ---------------------------------------------------------------- feedback, access, errors


async def test_feedback_click_is_stored_and_shown(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    msg = await mention(slack, bot, "who chose Cognito?")
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    delivery = await slack.deliver_action(slack.block_action(reply, ACTION_UP))
    assert delivery.status == 200
    await bot.settle()

    assert core.feedback == [(1, ALICE, 1)]
    assert not has_buttons(reply)
    assert "Thanks — feedback recorded 👍" in reply.all_text()
    assert f"<{LINK_IN_MRKDWN}|1>" in reply.all_text()  # the answer itself is untouched


async def test_feedback_on_a_forgotten_answer_says_so_without_a_traceback(
    slack: SlackEmulator, core: FakeCore, bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    gone = "That answer is no longer known, so it can't be rated."

    async def forgotten(exchange_id: int, user: str, value: int) -> None:
        raise InvalidInput(gone)

    msg = await mention(slack, bot, "who chose Cognito?")
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    core.record_feedback = forgotten  # type: ignore[method-assign]
    await slack.deliver_action(slack.block_action(reply, ACTION_UP))
    await bot.settle()
    [note] = slack.ephemerals
    assert (note["user"], note["text"]) == (ALICE, gone)
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]


def test_start_up_has_no_token_will_be_unused_notice(
    slack: SlackEmulator,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)  # how operators set it; Bolt reads it too
    build_slack_app(FakeCore(tmp_path / "claims"), make_settings(slack))
    assert not [r for r in caplog.records if "will be unused" in r.getMessage()]


async def test_disallowed_channel_gets_an_ephemeral_note_only(
    slack: SlackEmulator, core: FakeCore
) -> None:
    async with running(core, make_settings(slack, slack_channels="C0GENERAL"), slack) as bot:
        msg = await mention(slack, bot, "who chose Cognito?", channel="C0RANDOM")
        await slack.deliver_command(slack.command("/ask", "who?", channel="C0RANDOM"))
        await bot.settle()
        assert not core.questions and not slack.called("chat.postMessage")
        [note] = slack.ephemerals
        assert (note["channel"], note["user"], note["text"]) == ("C0RANDOM", ALICE, NOT_ALLOWED)
        assert slack.responses[0]["text"] == NOT_ALLOWED
        assert not bot_replies(slack, "C0RANDOM", msg.ts)

        await mention(slack, bot, "who chose Cognito?")  # the allowed channel still works
        assert len(core.questions) == 1


async def test_error_answer_replaces_the_placeholder(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    sentence = "Search is unavailable right now (Weaviate did not answer); try again shortly."
    core.enqueue(Answer(sentence, kind="error", mode="quick"))
    msg = await mention(slack, bot, "who chose Cognito?")
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert "Searching the archive" in reply.versions[0]["text"]
    assert f":warning: {sentence}" in reply.all_text()
    assert not has_buttons(reply) and len(reply.versions) == 2


async def test_unexpected_failure_is_an_apology_and_a_logged_traceback(
    slack: SlackEmulator, core: FakeCore, bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    core.enqueue(Script(error=RuntimeError("kaboom")))
    with caplog.at_level(logging.INFO):
        msg = await mention(slack, bot, "a private question about salaries")
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert APOLOGY in reply.all_text() and "kaboom" not in reply.all_text()
    [record] = [r for r in caplog.records if r.name == "quorum.chat"]
    assert record.exc_info is not None and "kaboom" in caplog.text
    assert "salaries" not in caplog.text  # message text stays out of the logs


async def test_a_long_answer_is_split_within_block_kit_limits(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    cites = tuple(
        Citation(n, f"h{n}", "Auth deep dive", f"https://youtu.be/x?t={60 * n}", f"Dive @ {n}:00")
        for n in range(1, 13)
    )
    sentence = "The team compared Auth0 and Cognito on cost, effort and risk. "
    paras = [f"**Point {i}.** {sentence * 10}[{i % 12 + 1}]" for i in range(120)]
    text = "\n\n".join([*paras, "```\n" + "x = 1\n" * 700 + "```", "word " * 1500])
    core.enqueue(answer(text, citations=cites))
    msg = await mention(slack, bot, "tell me everything")

    replies = bot_replies(slack, GENERAL, msg.ts)
    assert len(replies) >= 3 and not slack.errors()
    assert slack.called("chat.update")[-1].args["ts"] == replies[0].ts
    joined = "\n".join(t for r in replies for t in texts_in(r.blocks))
    assert [joined.count(f"*Point {i}.*") for i in range(120)] == [1] * 120
    assert all(f"<https://youtu.be/x?t={60 * n}|{n}>" in joined for n in range(1, 13))
    assert [has_buttons(r) for r in replies] == [False] * (len(replies) - 1) + [True]
    for r in replies:
        assert len(r.blocks) <= 50
        assert all(len(b.get("elements", [])) <= 10 for b in r.blocks if b["type"] == "context")


# ---------------------------------------------------------------- the transport


async def test_bad_signature_or_stale_request_is_refused(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> who chose Cognito?")
    forged = await slack.deliver_event(slack.event(msg, "app_mention"), secret="not-the-secret")
    stale = await slack.deliver_event(
        slack.event(msg, "app_mention"), timestamp=int(time.time()) - 600
    )
    await bot.settle()
    assert (forged.status, stale.status) == (401, 401)
    assert not core.questions and not slack.called("chat.postMessage")


async def test_ack_comes_before_the_answer(slack: SlackEmulator, core: FakeCore, bot: Bot) -> None:
    core.enqueue(Script(answer(), delay_s=1.0))
    msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> slow one")
    delivery = await slack.deliver_event(slack.event(msg, "app_mention"))
    assert delivery.status == 200 and delivery.seconds < 0.5
    assert not slack.called("chat.update")
    await bot.settle()
    assert slack.called("chat.update")


async def test_url_verification_through_async_dispatch(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    body = json.dumps({"token": "t", "challenge": "c-123", "type": "url_verification"})
    headers: dict[str, str | Sequence[str]] = {**slack.signed(body, "application/json")}
    response = await bot.app.async_dispatch(AsyncBoltRequest(body=body, headers=headers))
    assert response.status == 200 and "c-123" in response.body


def test_missing_credentials_are_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="SLACK_BOT_TOKEN"):
        build_slack_app(FakeCore(tmp_path / "c"), load_settings())
    with pytest.raises(ConfigError, match="SLACK_SIGNING_SECRET"):
        build_slack_app(FakeCore(tmp_path / "c"), load_settings(slack_bot_token="xoxb-1"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_run_slack_serves_http_events_until_cancelled(
    slack: SlackEmulator, core: FakeCore
) -> None:
    port = _free_port()
    task = asyncio.create_task(run_slack(core, make_settings(slack, slack_port=port)))
    slack.target = f"http://127.0.0.1:{port}/slack/events"
    msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> who chose Cognito?")
    deadline = time.monotonic() + 10
    while True:
        try:
            delivery = await slack.deliver_event(slack.event(msg, "app_mention"))
            break
        except OSError:
            assert time.monotonic() < deadline, "the HTTP server never came up"
            await asyncio.sleep(0.05)
    assert delivery.status == 200
    await slack.wait_for(lambda: any(has_buttons(m) for m in bot_replies(slack, GENERAL, msg.ts)))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_run_slack_socket_mode(slack: SlackEmulator, core: FakeCore) -> None:
    settings = load_settings(
        slack_bot_token=BOT_TOKEN, slack_app_token=APP_TOKEN, slack_api_url=slack.api_url
    )
    task = asyncio.create_task(run_slack(core, settings))
    try:
        await slack.wait_for(lambda: slack.socket_connected)
        msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> who chose Cognito?")
        envelope = await slack.send_envelope("events_api", slack.event(msg, "app_mention"))
        await slack.wait_for(
            lambda: any(a.get("envelope_id") == envelope for a in slack.socket_acks)
        )
        await slack.wait_for(
            lambda: any(has_buttons(m) for m in bot_replies(slack, GENERAL, msg.ts))
        )

        command = await slack.send_envelope("slash_commands", slack.command("/ask", "and why?"))
        await slack.wait_for(
            lambda: any(a.get("envelope_id") == command for a in slack.socket_acks)
        )
        await slack.wait_for(lambda: len(core.questions) == 2)
        assert core.questions[1].text == "and why?"
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert not slack.errors()


async def test_rate_limited_updates_are_retried_and_the_answer_lands(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    slack.rate_limited["chat.update"] = 1
    msg = await mention(slack, bot, "who chose Cognito?")
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert [c.error for c in slack.called("chat.update")] == ["ratelimited", None]
    assert f"<{LINK_IN_MRKDWN}|1>" in reply.all_text() and has_buttons(reply)


async def test_a_thread_reply_addressed_to_someone_else_is_left_alone(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    first = await mention(slack, bot, "who chose Cognito?")
    to_bob = slack.user_posts(GENERAL, "<@U0BOB> can you double-check?", thread_ts=first.ts)
    about_john = slack.user_posts(GENERAL, "what did <@U0JOHN> say?", thread_ts=first.ts)
    for m in (to_bob, about_john):
        await slack.deliver_event(slack.event(m))
    await bot.settle()
    assert [q.text for q in core.questions] == ["who chose Cognito?", "what did @U0JOHN say?"]


async def test_a_broken_store_is_an_apology_in_the_thread(
    slack: SlackEmulator, core: FakeCore, bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    core.broken_store = True
    msg = await mention(slack, bot, "who chose Cognito?")
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    assert APOLOGY in reply.all_text() and not core.questions
    assert any(r.exc_info for r in caplog.records if r.name == "quorum.slack")
