"""Quorum as a Slack AI app, through the real Bolt app (its ``AsyncAssistant``
middleware) and the real AsyncWebClient against the Slack emulator, which checks the
AI-app methods as Slack does: the assistant panel, its suggested prompts and status
line, native streaming and its fallback to today's edits."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import date
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.chat.prompts import suggestions
from adapters.slack.render import ACTION_UP
from bot.models import Event, PartialAnswer, ProgressEvent, ThreadKey
from retrieval.models import Source, SourceInfo
from tests.emulators.slack import ALICE, BOT_TOKEN, BOT_USER, TEAM, Message, SlackEmulator
from tests.fakes import LINK, FakeCore, answer
from tests.test_slack import Bot, bot_replies, has_buttons, make_settings, running

DM = "D0ALICE"
LINK_IN_MRKDWN = LINK.replace("&", "&amp;")
WORDS = (
    "We chose",
    "We chose Cognito over",
    "We chose Cognito over Auth0 for cost [1].",
)


def scripted(core: FakeCore) -> None:
    """One answer: two progress steps, the words in three parts, the final answer."""
    events: list[Event] = [ProgressEvent("searching 'cognito'"), ProgressEvent("reading it")]
    events += [PartialAnswer(w) for w in WORDS]
    core.enqueue(answer(exchange_id=7), events, delay_s=0.03)


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator


@pytest.fixture
async def core() -> FakeCore:
    return FakeCore()


@pytest.fixture
async def bot(core: FakeCore, slack: SlackEmulator) -> AsyncIterator[Bot]:
    async with running(core, make_settings(slack), slack, interval_s=0.01) as b:
        yield b


async def open_panel(slack: SlackEmulator, bot: Bot, viewing: str = "C0GENERAL") -> str:
    started = slack.open_assistant(viewing=viewing)
    assert (await slack.deliver_event(started)).status == 200
    await bot.settle()
    return str(started["event"]["assistant_thread"]["thread_ts"])


async def ask_in_panel(slack: SlackEmulator, bot: Bot, thread_ts: str, text: str) -> Message:
    msg = slack.user_posts(DM, text, thread_ts=thread_ts)
    assert (await slack.deliver_event(slack.event(msg))).status == 200
    await bot.settle()
    return msg


async def test_panel_prompts_status_streamed_answer_then_feedback(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    thread = await open_panel(slack, bot)
    prompts = slack.prompts[(DM, thread)]
    assert prompts[0] == {
        "title": "Decisions in Auth deep dive",
        "message": 'What was decided? source:"Auth deep dive"',
    }
    assert {
        "title": "What Alice Chen raised",
        "message": 'What did Alice Chen raise? speaker:"Alice Chen"',
    } in prompts

    scripted(core)
    await ask_in_panel(slack, bot, thread, prompts[0]["message"])

    [question] = core.questions
    assert question.thread == ThreadKey("slack", TEAM, DM, thread)
    assert question.text == "What was decided?" and question.filters.source == "Auth deep dive"
    shown = slack.statuses[(DM, thread)]
    assert shown[0] == "Searching the archive…" and "searching 'cognito'" in shown
    assert shown[-1] == ""  # cleared once the words came
    [reply] = bot_replies(slack, DM, thread)
    assert reply.streaming is False  # started, appended, stopped once
    assert "".join(reply.appended) == WORDS[-1]  # the words as written, nothing twice
    assert reply.appended[0] == WORDS[0]  # the first words started the stream
    assert [c.method for c in slack.calls if c.method.startswith("chat.")] == [
        "chat.startStream",
        *["chat.appendStream"] * (len(reply.appended) - 1),
        "chat.stopStream",
        "chat.update",
    ]
    [stop] = slack.called("chat.stopStream")
    assert [b["type"] for b in stop.args["blocks"]] == ["actions"]  # 👍/👎 when it stops
    assert f"<{LINK_IN_MRKDWN}|1>" in reply.all_text()  # the [1] opens 12:14
    assert "Auth deep dive @ 12:14" in reply.all_text() and has_buttons(reply)
    assert not slack.errors()

    await slack.deliver_action(slack.block_action(reply, ACTION_UP))
    await bot.settle()
    assert core.feedback == [(7, ALICE, 1)]
    assert "Thanks — feedback recorded 👍" in reply.all_text()


async def test_a_refused_stream_falls_back_to_edits_with_one_log_line(
    slack: SlackEmulator, core: FakeCore, bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    thread = await open_panel(slack, bot)
    slack.refuse_streams = "not_allowed"
    scripted(core)
    with caplog.at_level(logging.WARNING, "quorum"):
        await ask_in_panel(slack, bot, thread, "who chose Cognito?")

    [reply] = bot_replies(slack, DM, thread)
    assert reply.streaming is None  # posted, then edited: today's path
    assert reply.versions[0]["text"] == "Searching the archive…" and len(reply.versions) >= 2
    assert f"<{LINK_IN_MRKDWN}|1>" in reply.all_text() and has_buttons(reply)
    refused = [r for r in caplog.records if "streaming refused" in r.getMessage()]
    assert len(refused) == 1 and "not_allowed" in refused[0].getMessage()
    assert [c.error for c in slack.errors()] == ["not_allowed"]


async def test_without_the_assistant_scope_the_answer_comes_by_edits(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    thread = await open_panel(slack, bot)
    slack.scopes.remove("assistant:write")
    scripted(core)
    await ask_in_panel(slack, bot, thread, "who chose Cognito?")
    [reply] = bot_replies(slack, DM, thread)
    assert reply.streaming is None and has_buttons(reply)
    assert "We chose Cognito over Auth0" in reply.all_text()
    assert not slack.called("chat.startStream")
    assert {c.error for c in slack.errors()} == {"missing_scope"}


@pytest.mark.parametrize("method", ["chat.stopStream", "chat.update"])
async def test_a_stream_that_breaks_at_the_end_still_delivers_the_answer(
    slack: SlackEmulator, core: FakeCore, bot: Bot, method: str
) -> None:
    thread = await open_panel(slack, bot)
    slack.failing[method] = "internal_error"
    scripted(core)
    await ask_in_panel(slack, bot, thread, "who chose Cognito?")
    linked = [m for m in bot_replies(slack, DM, thread) if f"<{LINK_IN_MRKDWN}|1>" in m.all_text()]
    assert len(linked) == 1 and has_buttons(linked[0])  # the answer whole, posted once


async def test_an_answer_without_words_on_the_way_is_posted_once(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    thread = await open_panel(slack, bot)
    core.enqueue(answer(exchange_id=3))  # extractive answers arrive whole
    await ask_in_panel(slack, bot, thread, "who chose Cognito?")
    [reply] = bot_replies(slack, DM, thread)
    assert has_buttons(reply) and len(reply.versions) == 1
    assert slack.statuses[(DM, thread)][-1] == ""
    assert not slack.errors()


async def test_a_failure_mid_stream_ends_the_stream_with_the_apology(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    thread = await open_panel(slack, bot)
    core.enqueue(RuntimeError("boom"), [PartialAnswer("We chose")], delay_s=0.01)
    await ask_in_panel(slack, bot, thread, "who chose Cognito?")
    [reply] = bot_replies(slack, DM, thread)
    assert reply.streaming is False and "Sorry" in reply.all_text()
    assert not slack.errors()


async def test_the_viewed_channel_picks_its_knowledge_base(
    slack: SlackEmulator, core: FakeCore
) -> None:
    settings = make_settings(slack, slack_channel_kbs="C0RANDOM:random-kb")
    async with running(core, settings, slack, interval_s=0.01) as bot:
        thread = await open_panel(slack, bot, viewing="C0GENERAL")
        await ask_in_panel(slack, bot, thread, "first")
        started = slack.open_assistant(viewing="C0GENERAL")
        await slack.deliver_event(started)
        await bot.settle()
        second = str(started["event"]["assistant_thread"]["thread_ts"])
        same = slack.assistant_context_changed(started, viewing="C0GENERAL")
        await slack.deliver_event(same)  # the same knowledge base: the prompts stay
        await bot.settle()
        asked = list(core.kbs)
        moved = slack.assistant_context_changed(started, viewing="C0RANDOM")
        assert (await slack.deliver_event(moved)).status == 200
        await bot.settle()
        await ask_in_panel(slack, bot, second, "second")
    assert [q.kb for q in core.questions] == [TEAM, "random-kb"]
    assert set(asked) == {TEAM} and set(core.kbs[len(asked) :]) == {"random-kb"}
    calls = slack.called("assistant.threads.setSuggestedPrompts")
    assert [c.args["thread_ts"] for c in calls] == [thread, second, second]


async def test_prompts_follow_the_knowledge_base(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    first = await open_panel(slack, bot)
    core.titles = ["Cut-over retro", *core.titles]
    core.speaker_names = []
    second = await open_panel(slack, bot)
    assert "Decisions in Cut-over retro" in [p["title"] for p in slack.prompts[(DM, second)]]
    assert "Decisions in Cut-over retro" not in [p["title"] for p in slack.prompts[(DM, first)]]
    core.titles = []
    empty = await open_panel(slack, bot)
    assert slack.prompts[(DM, empty)] == [{"title": "How to ask", "message": "help"}]


class _Listing:
    """A library that lists sources (the newest recording first is what the panel offers)."""

    def __init__(self, infos: list[SourceInfo]) -> None:
        self.infos = infos

    async def sources(self, kb: str) -> list[SourceInfo]:
        return list(self.infos)


async def test_prompts_offer_the_newest_recordings_first() -> None:
    def info(title: str, day: date | None) -> SourceInfo:
        return SourceInfo(Source(id=title, title=title, kind="video", recorded_at=day), 3)

    core = FakeCore()
    listing = [info("Old", date(2024, 1, 1)), info("Undated", None), info("New", date(2025, 6, 1))]
    core.library = _Listing(listing)  # type: ignore[assignment]
    titles = [s.title for s in await suggestions(core, "kb")]
    assert titles[:2] == ["Decisions in New", "Decisions in Old"]


async def test_a_dm_thread_not_opened_as_a_panel_is_answered_by_edits(
    slack: SlackEmulator, core: FakeCore, bot: Bot
) -> None:
    dm = slack.user_posts(DM, "when was the cutover?")
    await slack.deliver_event(slack.event(dm))
    await bot.settle()
    core.enqueue(replace(answer(), exchange_id=2), [PartialAnswer("We")])
    await ask_in_panel(slack, bot, dm.ts, "who ran it?")
    assert not slack.called("chat.startStream") and len(bot_replies(slack, DM, dm.ts)) == 2


# ---------------------------------------------------------------- the emulator checks


async def test_the_emulator_checks_the_stream_lifecycle_as_slack_does(
    slack: SlackEmulator,
) -> None:
    client = AsyncWebClient(token=BOT_TOKEN, base_url=slack.api_url)
    parent = slack.user_posts("C0GENERAL", "question")

    async def refused(call: Any) -> str:
        with pytest.raises(SlackApiError) as info:
            await call
        return str(info.value.response["error"])

    start = client.chat_startStream(channel="C0GENERAL", thread_ts=parent.ts, markdown_text="a")
    assert await refused(start) == "invalid_arguments"  # a channel needs its recipient
    assert await refused(client.chat_startStream(channel="C0GENERAL", thread_ts="1.2")) == (
        "thread_not_found"
    )
    stream = await client.chat_startStream(
        channel="C0GENERAL",
        thread_ts=parent.ts,
        markdown_text="a",
        recipient_team_id=TEAM,
        recipient_user_id=ALICE,
    )
    ts = stream["ts"]
    assert await refused(client.chat_appendStream(channel="C0GENERAL", ts=ts)) == "no_text"
    assert await refused(client.chat_update(channel="C0GENERAL", ts=ts, text="x")) == (
        "cant_update_message"
    )
    await client.chat_appendStream(channel="C0GENERAL", ts=ts, markdown_text="b")
    await client.chat_stopStream(channel="C0GENERAL", ts=ts)
    again = client.chat_appendStream(channel="C0GENERAL", ts=ts, markdown_text="c")
    assert await refused(again) == "message_not_in_streaming_state"
    assert await refused(client.chat_stopStream(channel="C0GENERAL", ts=ts)) == (
        "message_not_in_streaming_state"
    )
    status = client.assistant_threads_setStatus(channel_id=DM, thread_ts=parent.ts, status="x")
    assert await refused(status) == "invalid_thread_ts"  # not an assistant thread
    prompts = client.assistant_threads_setSuggestedPrompts(channel_id=DM, prompts=[])
    assert await refused(prompts) == "invalid_arguments"
    assert slack.messages["C0GENERAL"][ts].text == "ab"


# ---------------------------------------------------------------- streaming in any thread


async def mention_with(slack: SlackEmulator, core: FakeCore, stream: str) -> list[Message]:
    async with running(core, make_settings(slack, slack_stream=stream), slack, 0.01) as bot:
        scripted(core)
        msg = slack.user_posts("C0GENERAL", f"<@{BOT_USER}> who chose Cognito?")
        await slack.deliver_event(slack.event(msg, "app_mention"))
        await bot.settle()
        return bot_replies(slack, "C0GENERAL", msg.ts)


async def test_a_channel_thread_streams_below_its_placeholder(
    slack: SlackEmulator, core: FakeCore
) -> None:
    [reply] = await mention_with(slack, core, "all")
    [placeholder] = slack.deleted  # the progress line gave way to the words
    assert placeholder.versions[0]["text"] == "Searching the archive…"
    assert any("searching 'cognito'" in v["text"] for v in placeholder.versions)
    [start] = slack.called("chat.startStream")
    assert (start.args["recipient_team_id"], start.args["recipient_user_id"]) == (TEAM, ALICE)
    assert reply.streaming is False and "".join(reply.appended) == WORDS[-1]
    assert f"<{LINK_IN_MRKDWN}|1>" in reply.all_text() and has_buttons(reply)
    assert not slack.errors()


async def test_a_refused_channel_stream_keeps_the_one_placeholder_and_edits_it(
    slack: SlackEmulator, core: FakeCore
) -> None:
    slack.refuse_streams = "not_allowed"
    [reply] = await mention_with(slack, core, "all")
    assert reply.streaming is None and not slack.deleted
    assert reply.versions[0]["text"] == "Searching the archive…" and len(reply.versions) >= 3
    assert f"<{LINK_IN_MRKDWN}|1>" in reply.all_text() and has_buttons(reply)


async def test_streaming_off_keeps_the_panel_on_edits(slack: SlackEmulator, core: FakeCore) -> None:
    async with running(core, make_settings(slack, slack_stream="off"), slack, 0.01) as bot:
        thread = await open_panel(slack, bot)
        scripted(core)
        await ask_in_panel(slack, bot, thread, "who chose Cognito?")
    assert not slack.called("chat.startStream") and not slack.called("assistant.threads.setStatus")
    [reply] = bot_replies(slack, DM, thread)
    assert has_buttons(reply) and len(reply.versions) >= 3
