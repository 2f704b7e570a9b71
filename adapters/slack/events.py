"""How Slack's events reach Quorum's Bolt app, and ``run_slack`` (the platform's runner):
Socket Mode when SLACK_APP_TOKEN is set; else HTTP events, signed with
SLACK_SIGNING_SECRET, at ``/slack/events`` on ``quorum serve``'s port (Bolt's aiohttp
adapter behind the port's ``Webhook``), or on a port of their own when QUORUM_SLACK_PORT
is set."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

from adapters.http.problems import Handler
from adapters.http.webhooks import Webhook
from adapters.slack.app import build_slack_app
from adapters.slack.settings import EVENTS_PATH, SlackSettings, slack_settings
from bot.config import Settings
from bot.inflight import InFlight
from bot.models import Core
from retrieval.errors import ConfigError

log = logging.getLogger("quorum.slack")

SHUTDOWN_GRACE_S = 5.0


def events_handler(app: AsyncApp) -> Handler:
    """Slack's events endpoint as an aiohttp handler (Bolt's aiohttp adapter): the request
    goes through the app's own signature check (a wrong or stale signature is Bolt's 401)
    and listeners, and Bolt's response goes back."""

    async def handle(request: web.Request) -> web.StreamResponse:
        response = await app.async_dispatch(await to_bolt_request(request))
        return await to_aiohttp_response(response)

    return handle


async def start_http(app: AsyncApp, port: int, host: str = "0.0.0.0") -> web.AppRunner:
    """Serve the app's HTTP events endpoint (``/slack/events``) on a port of its own
    (QUORUM_SLACK_PORT; 0 picks a free one)."""
    runner = web.AppRunner(
        app.web_app(path=EVENTS_PATH, port=port), access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S
    )
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


@contextlib.asynccontextmanager
async def taking_events(
    app: AsyncApp, settings: SlackSettings, webhook: Webhook | None
) -> AsyncIterator[str]:
    """Events come in while the block runs: by Socket Mode (SLACK_APP_TOKEN), on a port of
    their own (QUORUM_SLACK_PORT), or at ``/slack/events`` on quorum serve's port
    (``webhook``); yields where, for the log."""
    if settings.app_token is not None:
        handler = AsyncSocketModeHandler(app, settings.app_token.get_secret_value())
        await handler.connect_async()  # type: ignore[no-untyped-call]
        try:
            yield "Socket Mode"
        finally:
            await handler.close_async()  # type: ignore[no-untyped-call]
    elif settings.port is not None:
        runner = await start_http(app, settings.port)
        try:
            yield f"HTTP events on port {settings.port}"
        finally:
            await runner.cleanup()
    elif webhook is not None:
        with webhook.answered_by(events_handler(app)):
            yield f"HTTP events at {webhook.path} on Quorum's HTTP port"
    else:
        raise ConfigError(
            "Slack's HTTP events need quorum serve's port (run `quorum serve`) or "
            "QUORUM_SLACK_PORT, or set SLACK_APP_TOKEN for Socket Mode."
        )


async def _forever() -> None:
    await asyncio.get_running_loop().create_future()


async def run_slack(
    core: Core,
    settings: Settings,
    on_ready: Callable[[], None] | None = None,
    webhook: Webhook | None = None,
) -> None:
    """Run Quorum on Slack until cancelled: Socket Mode when SLACK_APP_TOKEN is set, else
    HTTP events at /slack/events on quorum serve's port (``webhook``), or on
    QUORUM_SLACK_PORT when that is set. On cancel it stops taking events, then gives
    answers in flight half of QUORUM_SHUTDOWN_S."""
    background = InFlight(log)
    session = aiohttp.ClientSession()
    try:
        app = build_slack_app(core, settings, background=background, session=session)
        async with taking_events(app, slack_settings(settings), webhook) as where:
            log.warning("Quorum is connected to Slack (%s)", where)
            if on_ready is not None:
                on_ready()
            await _forever()
    finally:
        await background.close(settings.shutdown_s / 2)
        await session.close()
