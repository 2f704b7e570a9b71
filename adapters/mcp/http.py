"""``/mcp`` on ``quorum serve``'s port: the MCP server over Streamable HTTP, behind the
API's bearer tokens (``QUORUM_API_TOKENS``).

Each knowledge base a token opens has its own server (``server.build_server``), so a
token reaches its own sources and nothing else, by construction rather than by a check
in every tool. The SDK's transport is an ASGI app; ``bridge`` hands it one aiohttp
request as an ASGI scope, a ``receive`` that yields the body, and a ``send`` that writes
the response, streamed (server-sent events carry progress). The transport is stateless:
each request stands alone, so any replica answers it, and a follow-up question names its
``session_id``, kept in Quorum's own session store.

A client that hangs up cancels its aiohttp handler (``handler_cancellation``), and with
it the tool call it was waiting for.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

from aiohttp import web

from adapters.http.auth import Scopes
from adapters.http.problems import STARTING_TEXT, STOPPING, Reject, problem
from adapters.http.served import Served
from adapters.mcp.tools import Reach
from bot.errors import InvalidInput
from bot.models import Core
from bot.wiring import CoreServices

if TYPE_CHECKING:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

log = logging.getLogger("quorum.mcp")

PATH = "/mcp"
MAX_BODY = 256 * 1024  # as the rest of the port: a tool call's arguments are small
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
Asgi = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]
# The SDK's transport names these itself or they describe the connection, which aiohttp owns.
_HOP = {"content-length", "transfer-encoding", "connection", "keep-alive"}


async def bridge(app: Asgi, request: web.Request) -> web.StreamResponse:
    """Serve one aiohttp request with an ASGI app, streaming its response."""
    peer = request.transport.get_extra_info("peername") if request.transport else None
    scope: dict[str, Any] = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": f"{request.version.major}.{request.version.minor}",
        "method": request.method,
        "scheme": request.scheme,
        "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("latin-1", "replace"),
        "root_path": "",
        "query_string": request.query_string.encode("latin-1", "replace"),
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
        "client": tuple(peer[:2]) if isinstance(peer, tuple) else None,
        "server": None,
        "state": {},
    }
    done = False

    async def receive() -> Message:
        nonlocal done
        if not done:
            chunk = await request.content.read(64 * 1024)
            done = request.content.at_eof()
            return {"type": "http.request", "body": chunk, "more_body": not done}
        # The body is read: what is left is the client hanging up, which aiohttp says by
        # cancelling this handler (and so this wait).
        await asyncio.Future()
        return {"type": "http.disconnect"}  # pragma: no cover

    response: web.StreamResponse | None = None

    async def send(message: Message) -> None:
        nonlocal response
        if message["type"] == "http.response.start":
            response = web.StreamResponse(status=message["status"])
            for key, value in message.get("headers", ()):
                name = key.decode("latin-1")
                if name.lower() not in _HOP:
                    response.headers.add(name, value.decode("latin-1"))
            await response.prepare(request)
        elif message["type"] == "http.response.body" and response is not None:
            if body := message.get("body", b""):
                await response.write(body)
            if not message.get("more_body", False):
                await response.write_eof()

    await app(scope, receive, send)
    if response is None:
        log.error("MCP transport sent no response to a %s", request.method)
        return problem(500, "The MCP transport sent no response.")
    return response


class McpRoute:
    """``/mcp``: a token's knowledge base, its MCP server, and the bridge to it.

    The SDK takes a second or more to import on a busy machine, so the servers are built
    on the first MCP request, not when ``quorum serve`` (or ``quorum chat``'s pages) start.
    """

    def __init__(self, server: Served, scopes: Scopes) -> None:
        self.server = server
        self.scopes = scopes
        self.managers: dict[str, StreamableHTTPSessionManager] = {}
        self._starting = asyncio.Lock()
        self._stop = asyncio.Event()
        self._hub: asyncio.Task[None] | None = None

    async def running(self) -> tuple[Core, CoreServices]:
        """The attached core; a sentence while Quorum starts or stops."""
        if self.server.services is None or self.server.core is None:
            raise InvalidInput(STARTING_TEXT)
        if self.server.readiness.stopping:
            raise InvalidInput(STOPPING)
        return self.server.core, self.server.services

    def _build(self) -> dict[str, StreamableHTTPSessionManager]:
        from mcp.server.transport_security import TransportSecuritySettings

        from adapters.mcp.server import build_server

        managers = {}
        for kb in sorted(set(self.scopes.api.values())):
            mcp = build_server(Reach(kb, self.running))
            mcp.streamable_http_app(
                stateless_http=True,
                max_request_body_size=MAX_BODY,
                # Every request carries a bearer token, which a page that rebinds DNS to
                # this host cannot have; Host checks would only refuse the public address.
                transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            )
            managers[kb] = mcp.session_manager
        return managers

    async def _run(self, up: asyncio.Event) -> None:
        async with contextlib.AsyncExitStack() as stack:
            for manager in self.managers.values():
                await stack.enter_async_context(manager.run())
            up.set()
            await self._stop.wait()

    async def _started(self) -> dict[str, StreamableHTTPSessionManager]:
        """The session managers, their task groups running (built on first use)."""
        async with self._starting:
            if self._hub is None:
                # Imported off the loop, so /healthz and the API answer meanwhile.
                await asyncio.to_thread(importlib.import_module, "adapters.mcp.server")
                self.managers = self._build()
                up = asyncio.Event()
                hub = asyncio.create_task(self._run(up))
                waiting = asyncio.create_task(up.wait())
                await asyncio.wait({hub, waiting}, return_when=asyncio.FIRST_COMPLETED)
                waiting.cancel()
                if hub.done():
                    hub.result()  # it failed to start: say why, and try again next time
                self._hub = hub
        return self.managers

    async def close(self, app: web.Application) -> None:
        """Stop the session managers, ending any call still in flight."""
        self._stop.set()
        if self._hub is not None:
            await self._hub

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """One MCP request, from a client holding a knowledge base's token."""
        try:
            kb = self.scopes.api_kb(request)
        except Reject as refusal:
            return refusal.response
        if request.method != "POST":
            # Stateless: the server never speaks first, so a GET stream would only hold a
            # connection open; the spec's answer for a server without one is 405.
            return web.json_response(
                {"error": "POST a JSON-RPC message to /mcp."}, status=405, headers={"Allow": "POST"}
            )
        managers = await self._started()
        return await bridge(managers[kb].handle_request, request)


def add_route(app: web.Application, server: Served, scopes: Scopes) -> McpRoute:
    """Mount ``/mcp`` on ``app``; its session managers stop with the app."""
    route = McpRoute(server, scopes)
    app.router.add_route("*", PATH, route.handle)
    app.on_cleanup.append(route.close)
    return route
