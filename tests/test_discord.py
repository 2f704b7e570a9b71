"""The Discord adapter, end to end through discord.py's real objects: gateway payloads go
through the client's own parsers (``Interaction(data=..., state=...)``,
``Message(state=..., channel=..., data=...)``) and discord.py's HTTP client talks to a local
emulator of Discord's REST API (tests/emulators/discord.py), which checks routes, auth,
timing and limits. The core is a small hand-written fake."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import re
from collections.abc import AsyncIterator, Callable
from datetime import date
from typing import Any

import discord
import pytest
import pytest_asyncio
import typer
from discord.gateway import DiscordWebSocket
from typer.testing import CliRunner

from adapters.chat.conversation import THANKS
from adapters.discord.channels import conversation
from adapters.discord.cli import discord_app, sync_commands
from adapters.discord.client import (
    NO_THREAD,
    NOT_HERE,
    QuorumClient,
    build_discord_client,
    intents,
    run_discord,
)
from adapters.discord.render import PLACEHOLDER, RESTARTED, SORRY
from bot.config import Settings, load_settings
from bot.models import (
    Answer,
    Citation,
    Core,
    Event,
    PartialAnswer,
    ProgressEvent,
    ThreadKey,
)
from bot.research.loop import STOPPED_EARLY
from retrieval.errors import ConfigError
from tests.emulators.discord import DiscordEmulator
from tests.fakes import FakeCore

GUILD, CHANNEL, OTHER_CHANNEL = 900000000000000001, 900000000000000002, 900000000000000003
ALICE = DiscordEmulator.user(700000000000000001, "alice")
OTHER_BOT = DiscordEmulator.user(700000000000000002, "otherbot", bot=True)
WEBHOOK = r"/webhooks/\d+/[^/]+"


def citation(n: int, title: str = "Auth deep dive", at: str = "12:14", s: int = 734) -> Citation:
    return Citation(
        n=n,
        hit_id=f"h{n}",
        title=title,
        link=f"https://youtu.be/abc?t={s}",
        label=f"{title} @ {at}",
        start_s=float(s),
        speaker="Alice Chen",
    )


def answer(text: str = "We chose Cognito for SSO [1].", **kw: Any) -> Answer:
    kw.setdefault("citations", (citation(1),))
    return Answer(text=text, kind=kw.pop("kind", "answer"), mode=kw.pop("mode", "quick"), **kw)


# --- harness


@pytest_asyncio.fixture(loop_scope="session")
async def emu() -> AsyncIterator[DiscordEmulator]:
    old, old_gateway = discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    async with DiscordEmulator() as emulator:
        yield emulator
        assert emulator.unexpected == [], "the adapter called routes Discord does not have"
        unauthorized = [c for c in emulator.calls if c.status == 401]
        assert all("Authorization" in c.headers for c in unauthorized), "a bot call lacked auth"
    discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = old, old_gateway


def settings_for(emu: DiscordEmulator, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "discord_token": emu.token,
        "discord_api_url": emu.url,
        "discord_guild_id": GUILD,
    }
    return load_settings(**(values | overrides))


@pytest.fixture
def core() -> FakeCore:
    return FakeCore(default_answer=answer())


class Harness:
    """A logged-in client fed gateway payloads by hand (no websocket)."""

    def __init__(self, emu: DiscordEmulator, core: Core, settings: Settings) -> None:
        self.emu, self.core, self.settings = emu, core, settings
        self.client: QuorumClient | None = None
        self.guild_payload = emu.guild(GUILD, {CHANNEL: "general", OTHER_CHANNEL: "random"})

    async def start(self) -> QuorumClient:
        """(Re)start the bot: a new client, as after a process restart."""
        if self.client is not None:
            await self.client.close()
        client = build_discord_client(self.core, self.settings)
        await client.login(self.emu.token)  # REST only; the gateway is these payloads
        client._connection.parse_guild_create(self.guild_payload)
        self.client = client
        return client

    async def send(self, event: str, payload: dict[str, Any]) -> None:
        """Deliver one gateway event, then wait until the bot has finished with it."""
        assert self.client is not None
        self.client._connection.parsers[event](payload)
        await self.settle()

    async def settle(self, limit_s: float = 15.0) -> None:
        """Wait for discord.py's handler tasks, feeding the bot the events its own actions
        cause (its messages, the threads it starts), until nothing is left."""
        assert self.client is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_s
        while loop.time() < deadline:
            for name, data in self.emu.pop_events():
                self.client._connection.parsers[name](data)
            await asyncio.sleep(0)
            busy = [
                t
                for t in asyncio.all_tasks()
                if not t.done()
                and t.get_name().startswith(("discord.py", "discord-ui", "CommandTree", "quorum"))
            ]
            if not busy and not self.emu.events:
                return
            await asyncio.wait(busy or [asyncio.ensure_future(asyncio.sleep(0.01))], timeout=0.1)
        raise AssertionError("the bot did not settle")

    async def close(self) -> None:
        if self.client is not None:
            await self.client.close()


@pytest_asyncio.fixture(loop_scope="session")
async def bot(emu: DiscordEmulator, core: FakeCore) -> AsyncIterator[Harness]:
    settings = settings_for(emu)
    await sync_commands(settings, globally=False)
    harness = Harness(emu, core, settings)
    await harness.start()
    yield harness
    await harness.close()


def callbacks(emu: DiscordEmulator) -> list[Any]:
    return [c.body for c in emu.find("POST", r"/interactions/\d+/[^/]+/callback")]


def final_edit(emu: DiscordEmulator, path: str) -> dict[str, Any]:
    edits = emu.find("PATCH", path)
    assert edits, f"no edit of {path}"
    return edits[-1].body


# --- /ask and /research


async def test_stopping_mid_answer_ends_it_with_one_line(bot: Harness, core: FakeCore) -> None:
    emu = bot.emu
    core.enqueue(answer(), events=[ProgressEvent("Searching the archive…")], delay_s=30)
    bot.client._connection.parsers["INTERACTION_CREATE"](  # type: ignore[union-attr]
        emu.slash("ask", CHANNEL, ALICE, question="Why Cognito?")
    )
    for _ in range(1000):  # until the answer is under way (its events take 30 s)
        if bot.client is not None and bot.client.answering:
            break
        await asyncio.sleep(0.01)
    assert bot.client is not None and bot.client.answering, "no answer started"
    await bot.client.drain(0.2)  # what SIGTERM does before the client closes
    assert not bot.client.answering
    assert emu.find("POST", WEBHOOK)[0].body["content"] == PLACEHOLDER
    assert final_edit(emu, WEBHOOK + r"/messages/\d+")["content"] == RESTARTED


async def test_ask_defers_posts_answer_and_starts_thread(bot: Harness, core: FakeCore) -> None:
    emu = bot.emu
    payload = emu.slash(
        "ask", CHANNEL, ALICE, question="Why Cognito?", speaker="Alice Chen", after="2024-01-01"
    )
    await bot.send("INTERACTION_CREATE", payload)

    first = emu.calls[emu.calls.index(emu.find("POST", r"/interactions/.*")[0])]
    assert first.body == {"type": 5}  # deferred, "thinking", within 3 s
    steps = [(c.method, c.path) for c in emu.calls if c.at >= first.at]
    placeholder = emu.find("POST", WEBHOOK)[0]
    assert placeholder.query["wait"] == "1" and placeholder.body["content"] == PLACEHOLDER
    original = next(i for i in emu.interactions.values() if str(i.id) == payload["id"])
    thread_calls = emu.find("POST", rf"/channels/{CHANNEL}/messages/{original.original_id}/threads")
    assert len(thread_calls) == 1 and thread_calls[0].body["name"] == "Why Cognito?"
    assert steps.index(("POST", thread_calls[0].path)) > steps.index(("POST", placeholder.path))

    (q,) = core.questions
    assert q.text == "Why Cognito?" and q.mode == "quick" and q.user == ALICE["id"]
    assert q.kb == str(GUILD) and q.event_id == payload["id"]
    assert q.filters.speaker == "Alice Chen" and q.filters.after == date(2024, 1, 1)
    assert q.thread == conversation(GUILD, original.original_id or 0)  # the thread's id

    body = final_edit(emu, rf"{WEBHOOK}/messages/{original.original_id}")
    assert body["content"] == "We chose Cognito for SSO [[1]](<https://youtu.be/abc?t=734>)."
    (embed,) = body["embeds"]
    assert embed["title"] == "Sources"
    assert "[Auth deep dive @ 12:14](https://youtu.be/abc?t=734)" in embed["description"]
    buttons = [c["custom_id"] for row in body["components"] for c in row["components"]]
    assert buttons == ["quorum:fb:up:1", "quorum:fb:down:1"]
    assert emu.messages[original.original_id or 0]["flags"] == 0  # no longer "thinking"


async def test_research_is_deep_and_shows_progress(bot: Harness, core: FakeCore) -> None:
    note = f"{STOPPED_EARLY} (it reached its limit of 8 steps); the answer uses what was found."
    emu = bot.emu
    steps: list[Event] = [ProgressEvent(f"searching 'Auth0 Cognito' ({i})") for i in range(3)]
    steps += [PartialAnswer("We chose"), PartialAnswer("We chose Cognito")]
    core.enqueue(
        answer(mode="deep", note=note),
        events=steps,
        delay_s=0.45,
    )
    await bot.send("INTERACTION_CREATE", emu.slash("research", CHANNEL, ALICE, question="Why?"))

    assert core.questions[0].mode == "deep"
    edits = [c.body["content"] for c in emu.find("PATCH", rf"{WEBHOOK}/messages/\d+")]
    assert any("searching 'Auth0 Cognito'" in e for e in edits[:-1])
    assert any(e.startswith("We chose") for e in edits[:-1])
    # 5 events 0.45 s apart, at most one edit a second: fewer edits than events, then the final
    assert 2 <= len(edits) - 1 <= 4
    times = [c.at for c in emu.find("PATCH", rf"{WEBHOOK}/messages/\d+")][:-1]
    assert all(b - a >= 0.9 for a, b in itertools.pairwise(times))
    assert edits[-1].startswith("We chose Cognito for SSO")
    assert f"-# {note}" in edits[-1]


async def test_bad_date_is_one_private_sentence(bot: Harness, core: FakeCore) -> None:
    await bot.send(
        "INTERACTION_CREATE", bot.emu.slash("ask", CHANNEL, ALICE, question="x", after="May")
    )
    (reply,) = callbacks(bot.emu)
    assert reply["type"] == 4 and reply["data"]["flags"] == 64
    assert (
        reply["data"]["content"] == "after: 'May' is not a date; use YYYY-MM-DD, e.g. 2024-01-31."
    )
    assert core.questions == []


async def test_autocomplete_filters_speakers_and_titles(bot: Harness, core: FakeCore) -> None:
    core.speaker_names = ["Alice Chen", "Bob", "alan", "Sal"] + [f"Al {i}" for i in range(40)]
    emu = bot.emu
    await bot.send(
        "INTERACTION_CREATE",
        emu.autocomplete("ask", CHANNEL, ALICE, "speaker", question="q", speaker="al"),
    )
    await bot.send(
        "INTERACTION_CREATE",
        emu.autocomplete("ask", CHANNEL, ALICE, "source", question="q", source="dive"),
    )
    speakers, sources = callbacks(emu)
    assert speakers["type"] == 8 and len(speakers["data"]["choices"]) == 25
    names = [c["name"] for c in speakers["data"]["choices"]]
    assert names[:2] == ["Al 0", "Al 1"] and "Bob" not in names and "Sal" not in names[:24]
    assert sources["data"]["choices"] == [{"name": "Auth deep dive", "value": "Auth deep dive"}]
    assert core.kbs == [str(GUILD), str(GUILD)]


# --- mentions, threads, DMs


async def test_mention_starts_a_thread_and_follow_ups_need_no_mention(
    bot: Harness, core: FakeCore
) -> None:
    emu = bot.emu
    question = emu.post(CHANNEL, ALICE, "what did we decide on auth?", mention_bot=True)
    await bot.send("MESSAGE_CREATE", question)

    (start,) = emu.find("POST", rf"/channels/{CHANNEL}/messages/{question['id']}/threads")
    assert start.body["name"] == "what did we decide on auth?"
    thread_id = int(question["id"])  # a thread started on a message shares its id
    placeholder, *_ = emu.find("POST", rf"/channels/{thread_id}/messages")
    assert placeholder.body["content"] == PLACEHOLDER
    in_thread = emu.channel_messages(thread_id)
    assert in_thread[-1]["content"].startswith("We chose Cognito")
    assert core.questions[0].text == "what did we decide on auth?"
    assert core.questions[0].thread == conversation(GUILD, thread_id)
    assert ("discord", question["id"]) in core.claimed

    core.enqueue(answer("It was decided in March [1]."))
    await bot.send("MESSAGE_CREATE", emu.post(thread_id, ALICE, "when was that?"))
    assert [q.text for q in core.questions] == ["what did we decide on auth?", "when was that?"]
    assert core.questions[1].thread == core.questions[0].thread  # the same session
    assert len(emu.find("POST", r"/channels/\d+/messages/\d+/threads")) == 1
    assert emu.channel_messages(thread_id)[-1]["content"].startswith("It was decided in March")

    # Chatter without a mention outside Quorum's threads, and other bots, are ignored.
    before = len(emu.calls)
    await bot.send("MESSAGE_CREATE", emu.post(CHANNEL, ALICE, "lunch?"))
    await bot.send("MESSAGE_CREATE", emu.post(thread_id, OTHER_BOT, "beep", mention_bot=True))
    assert len(emu.calls) == before and len(core.questions) == 2


async def test_mentions_take_typed_options_like_every_platform(
    bot: Harness, core: FakeCore
) -> None:
    emu = bot.emu
    text = 'what about rollback? speaker:"Alice Chen" after:2024-01-01'
    await bot.send("MESSAGE_CREATE", emu.post(CHANNEL, ALICE, text, mention_bot=True))
    (q,) = core.questions
    assert q.text == "what about rollback?"
    assert q.filters.speaker == "Alice Chen" and q.filters.after == date(2024, 1, 1)

    bad = emu.post(CHANNEL, ALICE, "what changed? after:yesterday", mention_bot=True)
    await bot.send("MESSAGE_CREATE", bad)
    assert len(core.questions) == 1  # never asked
    assert "after:yesterday is not a date" in emu.channel_messages(CHANNEL)[-1]["content"]


async def test_a_redelivered_message_is_answered_once(bot: Harness, core: FakeCore) -> None:
    payload = bot.emu.post(CHANNEL, ALICE, "auth?", mention_bot=True)
    await bot.send("MESSAGE_CREATE", payload)
    await bot.send("MESSAGE_CREATE", dict(payload))
    assert len(core.questions) == 1


async def test_the_bot_role_mention_counts(bot: Harness, core: FakeCore) -> None:
    await bot.send("MESSAGE_CREATE", bot.emu.post(CHANNEL, ALICE, "auth?", mention_role=True))
    assert [q.text for q in core.questions] == ["auth?"]


async def test_direct_messages_are_a_session(emu: DiscordEmulator, core: FakeCore) -> None:
    harness = Harness(emu, core, settings_for(emu, default_kb="team"))
    await harness.start()
    try:
        dm = emu.dm_channel(ALICE)
        await harness.send("MESSAGE_CREATE", emu.post(dm, ALICE, "what is SSO?"))
        await harness.send("MESSAGE_CREATE", emu.post(dm, ALICE, "and MFA?"))
    finally:
        await harness.close()
    assert [q.kb for q in core.questions] == ["team", "team"]
    assert core.questions[0].thread == core.questions[1].thread == conversation(None, dm)
    assert emu.find("POST", r"/channels/\d+/messages/\d+/threads") == []
    assert emu.channel_messages(dm)[-1]["content"].startswith("We chose Cognito")


# --- rendering at length, errors


async def test_a_long_answer_is_split_within_limits(bot: Harness, core: FakeCore) -> None:
    paragraphs = [
        f"Point {i}: "
        + "the team discussed tokens and sessions at length " * 8
        + f"[{i % 30 + 1}]."
        for i in range(30)
    ]
    cites = tuple(citation(n, title=f"Meeting {n} " + "x" * 150, s=60 * n) for n in range(1, 31))
    core.enqueue(answer("\n\n".join(paragraphs), citations=cites))
    await bot.send("INTERACTION_CREATE", bot.emu.slash("ask", CHANNEL, ALICE, question="tokens?"))

    emu = bot.emu
    first = final_edit(emu, rf"{WEBHOOK}/messages/\d+")
    more = [c.body for c in emu.find("POST", WEBHOOK)[1:]]
    bodies = [first, *more]
    assert len(bodies) >= 4
    for body in bodies:
        assert len(body.get("content") or "") <= 2000
        assert (
            sum(
                len(e.get("description", "")) + len(e.get("title", ""))
                for e in body.get("embeds", [])
            )
            <= 6000
        )
    text = "\n\n".join(b["content"] for b in bodies if b.get("content"))
    assert len(re.findall(r"\[\[\d+\]\]\(<https://youtu\.be/abc\?t=\d+>\)", text)) == 30
    assert "Point 29" in text and all(
        p.startswith("Point") for p in (b["content"] for b in bodies if b.get("content"))
    )
    described = "".join(e["description"] for b in bodies for e in b.get("embeds", []))
    assert all(f"`[{n}]`" in described for n in range(1, 31))
    assert [bool(b.get("components")) for b in bodies] == [False] * (len(bodies) - 1) + [True]


async def test_an_error_answer_is_its_sentence(bot: Harness, core: FakeCore) -> None:
    core.enqueue(
        Answer("Search is unavailable right now; try again in a minute.", "error", "quick")
    )
    await bot.send("INTERACTION_CREATE", bot.emu.slash("ask", CHANNEL, ALICE, question="x"))
    body = final_edit(bot.emu, rf"{WEBHOOK}/messages/\d+")
    assert body["content"] == "⚠️ Search is unavailable right now; try again in a minute."
    assert body["embeds"] == [] and body["components"] == []


async def test_an_unexpected_failure_is_an_apology_and_a_logged_traceback(
    bot: Harness, core: FakeCore, caplog: pytest.LogCaptureFixture
) -> None:
    core.enqueue(RuntimeError("weaviate exploded at 0xdeadbeef"))
    with caplog.at_level(logging.ERROR, logger="quorum.discord"):
        await bot.send("MESSAGE_CREATE", bot.emu.post(CHANNEL, ALICE, "x?", mention_bot=True))
    posted = [c.body for c in bot.emu.calls if isinstance(c.body, dict) and "content" in c.body]
    assert posted[-1]["content"] == SORRY
    assert not any("0xdeadbeef" in (b.get("content") or "") for b in posted)
    assert any(r.exc_info and "0xdeadbeef" in str(r.exc_info[1]) for r in caplog.records)


async def test_message_text_stays_out_of_logs(
    bot: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="quorum"):
        await bot.send(
            "MESSAGE_CREATE", bot.emu.post(CHANNEL, ALICE, "secret roadmap?", mention_bot=True)
        )
    assert not any("secret roadmap" in r.getMessage() for r in caplog.records)


# --- permissions and access


async def test_no_thread_permission_answers_inline_and_says_why_once(
    bot: Harness, core: FakeCore
) -> None:
    emu = bot.emu
    emu.fail("POST", r"/channels/\d+/messages/\d+/threads", times=3)
    first = emu.post(CHANNEL, ALICE, "auth?", mention_bot=True)
    await bot.send("MESSAGE_CREATE", first)
    reply = emu.find("POST", rf"/channels/{CHANNEL}/messages")[0]
    assert str(reply.body["message_reference"]["message_id"]) == first["id"]  # inline reply
    assert core.questions[0].thread == ThreadKey("discord", str(GUILD), str(CHANNEL), first["id"])
    answer_msg = emu.channel_messages(CHANNEL)[-1]
    assert answer_msg["content"].startswith("We chose Cognito")
    assert NO_THREAD in answer_msg["content"]

    await bot.send("MESSAGE_CREATE", emu.post(CHANNEL, ALICE, "and sso?", mention_bot=True))
    assert NO_THREAD not in emu.channel_messages(CHANNEL)[-1]["content"]  # said once

    await bot.send("INTERACTION_CREATE", emu.slash("ask", OTHER_CHANNEL, ALICE, question="q"))
    body = final_edit(emu, rf"{WEBHOOK}/messages/\d+")
    assert body["content"].startswith("We chose Cognito") and NO_THREAD in body["content"]


async def test_disallowed_channels_get_a_private_notice_or_silence(
    emu: DiscordEmulator, core: FakeCore, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_for(emu, discord_channels=str(OTHER_CHANNEL))
    await sync_commands(settings, globally=False)
    harness = Harness(emu, core, settings)
    await harness.start()
    try:
        await harness.send("INTERACTION_CREATE", emu.slash("ask", CHANNEL, ALICE, question="q"))
        (reply,) = callbacks(emu)
        assert reply["type"] == 4 and reply["data"]["flags"] == 64  # ephemeral
        assert reply["data"]["content"] == NOT_HERE
        before = len(emu.calls)
        with caplog.at_level(logging.INFO, logger="quorum.discord"):
            await harness.send("MESSAGE_CREATE", emu.post(CHANNEL, ALICE, "q", mention_bot=True))
        assert len(emu.calls) == before  # nothing posted in the channel
        assert any("not allowed" in r.getMessage() for r in caplog.records)
        await harness.send("MESSAGE_CREATE", emu.post(OTHER_CHANNEL, ALICE, "q", mention_bot=True))
    finally:
        await harness.close()
    assert len(core.questions) == 1


async def test_disallowed_guilds_and_their_members_dms(
    emu: DiscordEmulator, core: FakeCore
) -> None:
    harness = Harness(emu, core, settings_for(emu, discord_guilds="123"))
    await harness.start()
    try:
        await harness.send("MESSAGE_CREATE", emu.post(CHANNEL, ALICE, "q", mention_bot=True))
        dm = emu.dm_channel(ALICE)
        await harness.send("MESSAGE_CREATE", emu.post(dm, ALICE, "q"))
        assert core.questions == []
        emu.join(123, ALICE)
        await harness.send("MESSAGE_CREATE", emu.post(dm, ALICE, "q"))
    finally:
        await harness.close()
    assert len(core.questions) == 1


# --- feedback


async def test_feedback_is_stored_and_survives_a_restart(bot: Harness, core: FakeCore) -> None:
    emu = bot.emu
    await bot.send("INTERACTION_CREATE", emu.slash("ask", CHANNEL, ALICE, question="q"))
    answered = next(m for m in emu.messages.values() if m.get("components"))
    await bot.send("INTERACTION_CREATE", emu.click(int(answered["id"]), "quorum:fb:up:1", ALICE))
    thanks = callbacks(emu)[-1]
    assert thanks["type"] == 4 and thanks["data"]["flags"] == 64  # ephemeral
    assert thanks["data"]["content"] == THANKS
    assert core.feedback == [(1, ALICE["id"], 1)]

    await bot.start()  # a new process: only the custom id knows the exchange
    await bot.send("INTERACTION_CREATE", emu.click(int(answered["id"]), "quorum:fb:down:1", ALICE))
    assert callbacks(emu)[-2:] == [thanks, thanks]  # one acknowledgement per click
    assert core.feedback[-1] == (1, ALICE["id"], -1)


# --- set-up: intents, sync, run


def test_only_the_needed_intents() -> None:
    wanted = intents()
    assert wanted == discord.Intents(
        guilds=True, guild_messages=True, dm_messages=True, message_content=True
    )
    assert not wanted.members and not wanted.presences


async def test_sync_registers_commands_on_the_guild_or_globally(emu: DiscordEmulator) -> None:
    names, where = await sync_commands(settings_for(emu), globally=False)
    assert names == ["ask", "research", "ingest", "sources", "forget", "speakers"]
    assert where == f"guild {GUILD}"
    (put,) = emu.find("PUT", rf"/applications/{emu.app_id}/guilds/{GUILD}/commands")
    ask = next(c for c in put.body if c["name"] == "ask")
    options = {o["name"]: o for o in ask["options"]}
    assert list(options) == ["question", "speaker", "source", "after", "before"]
    assert options["question"]["required"] and options["speaker"]["autocomplete"]
    assert put.headers["Authorization"] == f"Bot {emu.token}"

    await sync_commands(settings_for(emu, discord_guild_id=None), globally=True)
    assert len(emu.find("PUT", rf"/applications/{emu.app_id}/commands")) == 1
    with pytest.raises(ConfigError, match="QUORUM_DISCORD_GUILD_ID"):
        await sync_commands(settings_for(emu, discord_guild_id=None), globally=False)
    with pytest.raises(ConfigError, match="rejected DISCORD_TOKEN"):
        await sync_commands(
            load_settings(discord_token="wrong", discord_api_url=emu.url), globally=True
        )


async def test_run_discord_needs_a_token(core: FakeCore) -> None:
    with pytest.raises(ConfigError, match="DISCORD_TOKEN is not set"):
        await run_discord(core, load_settings())


async def eventually(check: Callable[[], bool], limit_s: float = 10.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    while not check():
        assert loop.time() < deadline, "timed out"
        await asyncio.sleep(0.02)


async def test_serve_connects_over_the_gateway_and_answers_until_cancelled(
    emu: DiscordEmulator, core: FakeCore
) -> None:
    settings = settings_for(emu)
    await sync_commands(settings, globally=False)
    emu.guild(GUILD, {CHANNEL: "general"})
    task = asyncio.create_task(run_discord(core, settings))
    try:
        await asyncio.wait_for(emu.ready.wait(), 10)
        (identify,) = emu.identified
        assert identify["token"] == emu.token and identify["intents"] == intents().value

        question = emu.post(CHANNEL, ALICE, "what about auth?", mention_bot=True)
        await emu.dispatch("MESSAGE_CREATE", question)
        thread = int(question["id"])
        await eventually(
            lambda: any(m["content"].startswith("We chose") for m in emu.channel_messages(thread))
        )
        await emu.dispatch("MESSAGE_CREATE", emu.post(thread, ALICE, "and SSO?"))
        await eventually(lambda: len(core.questions) == 2)

        await emu.dispatch("INTERACTION_CREATE", emu.slash("ask", CHANNEL, ALICE, question="q"))
        await eventually(lambda: len(emu.find("PATCH", rf"{WEBHOOK}/messages/\d+")) > 0)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert [q.text for q in core.questions] == ["what about auth?", "and SSO?", "q"]
    assert core.questions[1].thread == conversation(GUILD, thread)


async def test_serve_explains_a_refused_intent_or_token(
    emu: DiscordEmulator, core: FakeCore
) -> None:
    emu.message_content_enabled = False
    with pytest.raises(ConfigError, match="Message Content intent"):
        await asyncio.wait_for(run_discord(core, settings_for(emu)), 10)
    with pytest.raises(ConfigError, match="rejected DISCORD_TOKEN"):
        await run_discord(core, settings_for(emu, discord_token="wrong"))


def test_sync_cli_says_what_is_missing() -> None:
    app = typer.Typer()
    app.add_typer(discord_app)  # as adapters/cli.py registers it
    result = CliRunner().invoke(app, ["discord", "sync"])
    assert result.exit_code == 1
    assert "DISCORD_TOKEN is not set" in result.output
