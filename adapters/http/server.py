"""The one HTTP port of a running Quorum (``QUORUM_HTTP_PORT``, default 8088):

    /healthz   200 while the process is alive
    /readyz    200 once the model, Weaviate, the database and every platform are ready,
               else 503 with what is still missing
    /metrics   Prometheus text (``bot.metrics``)
    /api/...   the JSON API (``adapters.http.api``), answered once the core is up
    /v/...     a source's page, opened by a signed link (``adapters.http.pages``)
    /insights  insights for admins (``adapters.http.insights``)
    /mcp       the MCP server over Streamable HTTP, same tokens (``adapters.mcp.http``)
    POST ...   a chat platform's HTTP events at its own path (``adapters.http.webhooks``)

The server starts before the core, so an orchestrator sees the process alive (and not
yet ready) while Weaviate starts and the model loads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Iterable

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError, LineTooLong
from aiohttp.web_protocol import RequestHandler

from adapters.http import api
from adapters.http.auth import Scopes
from adapters.http.insights import InsightsRoutes
from adapters.http.openapi import openapi_document
from adapters.http.pages import Pages
from adapters.http.served import Readiness
from adapters.http.webhooks import mount as mount_webhooks
from adapters.mcp.http import add_route as add_mcp_route
from bot.config import Settings
from bot.metrics import Metrics
from bot.models import Core
from bot.wiring import CoreServices
from retrieval.errors import ConfigError

log = logging.getLogger("quorum.http")

READY_CHECK_S = 2.0  # how long /readyz waits for Weaviate before calling it down


# aiohttp's limits (its defaults, 8190 for both, one apart): which one an over-long line
# broke says whether it was the request line (414) or a header (431).
MAX_LINE = 8190
MAX_FIELD = 8191


def malformed_status(exc: BaseException | None, status: int) -> int:
    """The status a request aiohttp could not parse gets: 414 for an over-long request
    line, 431 for an over-long header or too many headers, else aiohttp's own."""
    if isinstance(exc, LineTooLong):
        return 414 if str(exc.args[1]) == str(MAX_LINE) else 431
    if isinstance(exc, HttpProcessingError) and "too many headers" in str(exc.message).lower():
        return 431
    return status


class _Handler(RequestHandler):
    """aiohttp's connection handler, answering a malformed request its own status."""

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        return super().handle_error(request, malformed_status(exc, status), exc, message)


class _Server(web.Server):
    """aiohttp's server, with ``_Handler`` for each connection."""

    def __call__(self) -> RequestHandler:
        return _Handler(self, loop=self._loop, **self._kwargs)


class _MalformedRequests(logging.Filter):
    """A request aiohttp could not parse (a bad request line, an over-long line or
    header, too many headers) is answered 400, 414 or 431 (``malformed_status``) and
    logged here as one line without a traceback: anyone can send one, and a log of
    tracebacks for each hides the errors that matter. Quorum's own failures keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, HttpProcessingError):
            record.msg = "refused a malformed request (HTTP %d): %s"
            # what a client sent, cut
            record.args = (malformed_status(exc, exc.code), str(exc.message)[:200])
            record.exc_info = record.exc_text = None
            if record.levelno > logging.WARNING:  # aiohttp's debug lines stay debug
                record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


protocol_log = logging.getLogger("quorum.http.protocol")
protocol_log.addFilter(_MalformedRequests())


class OpsServer:
    """Every route of the port on one aiohttp server: health, readiness, metrics, the
    API, the pages, insights, ``/mcp``, and the ``webhooks`` paths platforms answer."""

    def __init__(self, settings: Settings, webhooks: Iterable[str] = ()) -> None:
        self.settings = settings
        self.readiness = Readiness()
        self.metrics: Metrics | None = None
        self.core: Core | None = None
        self.services: CoreServices | None = None
        self.app = web.Application(client_max_size=256 * 1024)
        self.app.router.add_get("/healthz", self._healthz)
        self.app.router.add_get("/readyz", self._readyz)
        self.app.router.add_get("/metrics", self._metrics)
        self.app.router.add_get("/api/openapi.json", self._openapi)  # no token: it reveals nothing
        scopes = Scopes.from_settings(settings)
        self.api = api.add_routes(self.app, self, scopes)
        Pages(self).add_routes(self.app)  # /v/...: signed pages of recordings and documents
        InsightsRoutes(self, scopes).add_routes(self.app)  # /insights: admins only
        add_mcp_route(self.app, self, scopes)  # /mcp: the MCP server, the API's tokens
        self.webhooks = mount_webhooks(self.app, webhooks)  # a platform's events, signed
        self._runner: web.AppRunner | None = None
        self.port = 0

    def attach(self, services: CoreServices, core: Core, metrics: Metrics) -> None:
        """The core is up: serve the API and metrics from it."""
        self.services, self.core, self.metrics = services, core, metrics
        self.readiness.set("weaviate", None)
        self.readiness.set("database", None)

    async def start(self, port: int | None = None, host: str | None = None) -> int:
        """Listen (port 0: a free one); returns the port."""
        # A client that hangs up cancels its handler, and so the answer it was waiting for.
        self._runner = web.AppRunner(
            self.app,
            access_log=None,
            shutdown_timeout=self.settings.shutdown_s / 2,
            handler_cancellation=True,
            logger=protocol_log,
            max_line_size=MAX_LINE,
            max_field_size=MAX_FIELD,
        )
        await self._runner.setup()
        server = self._runner.server
        if server is not None:
            server.__class__ = _Server  # its connections answer 414/431 (``_Handler``)
        port = self.settings.http_port if port is None else port
        host = host or self.settings.http_host
        site = web.TCPSite(self._runner, host, port)
        try:
            await site.start()
        except OSError as exc:  # in use, or an address this machine does not have
            await self.stop()
            why = os.strerror(exc.errno) if exc.errno else str(exc)
            raise ConfigError(
                f"QUORUM_HTTP_PORT: cannot listen on {host}:{port} ({why}); "
                "stop what uses it or choose another port."
            ) from None
        self.port = int(self._runner.addresses[0][1])
        return self.port

    async def stop(self) -> None:
        """Stop: API answers in flight get half of QUORUM_SHUTDOWN_S, then are ended with
        "ask again" to their clients, and the server closes (idempotent)."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await self.api.drain(self.settings.shutdown_s / 2)
            await runner.cleanup()

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def _readyz(self, request: web.Request) -> web.Response:
        parts = dict(self.readiness.parts)
        if self.services is not None:
            parts["weaviate"] = parts["weaviate"] or await self._store_problem()
            parts["database"] = parts["database"] or await self._database_problem()
        ready = not self.readiness.stopping and all(p is None for p in parts.values())
        body = {
            "status": "ready" if ready else ("stopping" if self.readiness.stopping else "waiting"),
            "checks": {k: "ok" if v is None else v for k, v in parts.items()},
        }
        return web.json_response(body, status=200 if ready else 503)

    async def _store_problem(self) -> str | None:
        assert self.services is not None
        try:
            async with asyncio.timeout(READY_CHECK_S):
                up = await self.services.retrieval.store.ready()
        except Exception:
            up = False
        return None if up else "not reachable"

    async def _database_problem(self) -> str | None:
        """None when the session store answers a query (a PostgreSQL server can go away)."""
        assert self.services is not None
        try:
            async with asyncio.timeout(READY_CHECK_S):
                await self.services.sessions.ping()
        except Exception:
            return "not reachable"
        return None

    async def _openapi(self, request: web.Request) -> web.Response:
        return web.json_response(openapi_document())

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.metrics is None:
            return web.Response(status=503, text="starting\n")
        body, content_type = self.metrics.render()
        # aiohttp wants the charset apart from the content type.
        return web.Response(body=body, headers={"Content-Type": content_type})


@contextlib.asynccontextmanager
async def local_pages(settings: Settings, services: CoreServices) -> AsyncIterator[str | None]:
    """Serve the pages (and the rest of the HTTP server) while a terminal chat runs, so its
    links open; yields their address, or None when the port is taken (a ``quorum serve``
    already answers there)."""
    server = OpsServer(settings)
    try:
        # Local only unless the pages have a public address.
        await server.start(host=settings.http_host if settings.public_url else "127.0.0.1")
    except ConfigError:  # start says "cannot listen": the port is taken
        yield None
        return
    metrics = Metrics(services.llm)
    server.attach(services, services.engine, metrics)
    server.readiness.set("model", None)
    try:
        yield settings.page_url
    finally:
        await server.stop()
