"""Slack's HTTP events on ``quorum serve``'s own port: the server mounts ``/slack/events``
as the registry says (``Platform.webhook``), the real Bolt app answers it once Slack's
runner attaches (Bolt's aiohttp adapter), and what Slack signs is checked there: a
signed mention is answered in its thread, a wrongly signed or stale request is refused
before any question reaches the core, and the port's own routes answer beside it."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.http.server import OpsServer
from adapters.platform import by_name
from bot.config import Settings
from tests.emulators.slack import BOT_USER, SlackEmulator
from tests.fakes import FakeCore
from tests.test_slack import GENERAL, bot_replies, has_buttons, make_settings

EVENTS = "/slack/events"


@contextlib.asynccontextmanager
async def serving(
    core: FakeCore, settings: Settings, slack: SlackEmulator
) -> AsyncIterator[tuple[OpsServer, asyncio.Event]]:
    """The port with Slack's path mounted as ``quorum serve`` mounts it, and Slack's runner
    (from the registry) answering there; yields the server and "connected"."""
    platform = by_name()["slack"]
    path = platform.webhook_path(settings)
    assert path == EVENTS
    server = OpsServer(settings, [path])
    port = await server.start(0, "127.0.0.1")
    slack.target = f"http://127.0.0.1:{port}{EVENTS}"
    connected = asyncio.Event()
    runner = asyncio.create_task(platform.run(core, settings, connected.set, server.webhooks[path]))
    try:
        await asyncio.wait_for(connected.wait(), 10)
        yield server, connected
    finally:
        runner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await runner
        await server.stop()


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[FakeCore]:
    fake = FakeCore(tmp_path / "claims.sqlite3")
    yield fake
    await fake.close()


async def test_a_signed_mention_on_serves_port_is_answered_in_its_thread(
    slack: SlackEmulator, core: FakeCore
) -> None:
    async with serving(core, make_settings(slack), slack) as (server, _):
        msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> who chose Cognito?")
        delivery = await slack.deliver_event(slack.event(msg, "app_mention"))
        assert delivery.status == 200
        await slack.wait_for(
            lambda: any(has_buttons(m) for m in bot_replies(slack, GENERAL, msg.ts))
        )
        assert [q.text for q in core.questions] == ["who chose Cognito?"]
        # the port's own routes answer beside Slack's
        async with aiohttp.ClientSession() as http:
            async with http.get(f"http://127.0.0.1:{server.port}/healthz") as r:
                assert r.status == 200


@pytest.mark.parametrize(
    "forged",
    [
        {"secret": "not-the-signing-secret"},
        {"timestamp": int(time.time()) - 3600},  # a replay of an old request
    ],
)
async def test_a_wrongly_signed_or_stale_request_is_refused(
    slack: SlackEmulator, core: FakeCore, forged: dict[str, Any]
) -> None:
    async with serving(core, make_settings(slack), slack):
        msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> who chose Cognito?")
        delivery = await slack.deliver_event(slack.event(msg, "app_mention"), **forged)
        assert delivery.status == 401
        command = slack.command("/ask", "who chose Cognito?")
        assert (await slack.deliver_command(command, **forged)).status == 401
        await asyncio.sleep(0.2)
        assert core.questions == [] and bot_replies(slack, GENERAL, msg.ts) == []


async def test_before_slack_attaches_the_path_says_503(
    slack: SlackEmulator, core: FakeCore
) -> None:
    settings = make_settings(slack)
    server = OpsServer(settings, [EVENTS])
    port = await server.start(0, "127.0.0.1")
    slack.target = f"http://127.0.0.1:{port}{EVENTS}"
    try:
        msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> anyone?")
        early = await slack.deliver_event(slack.event(msg, "app_mention"))
        assert early.status == 503 and "try again" in early.body  # Slack retries a 5xx
    finally:
        await server.stop()


def test_the_path_is_mounted_only_when_slack_takes_events_there(slack: SlackEmulator) -> None:
    slack_platform = by_name()["slack"]
    assert slack_platform.webhook_path(make_settings(slack)) == EVENTS
    assert slack_platform.webhook_path(make_settings(slack, slack_port=3000)) is None
    socket_mode = make_settings(slack, slack_app_token="xapp-1")
    assert slack_platform.webhook_path(socket_mode) is None
