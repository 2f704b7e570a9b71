"""``quorum mcp --kb KB``: the MCP server over stdio, for desktop clients (Claude Desktop,
Cursor, VS Code) that start it as a child process.

The SDK's stdio transport takes stdout for the protocol first (any stray output goes to
stderr), then the server answers ``initialize`` at once while the core opens beside it:
Weaviate and the model take seconds, and a tool call waits for them. While it runs it
serves the pages its links open (as ``quorum chat`` does), unless a ``quorum serve``
already answers on the port. The client closing stdin ends the server, and with it any
answer still being written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from adapters.http.server import local_pages
from adapters.mcp.server import build_server
from adapters.mcp.tools import Reach
from bot.config import Settings
from bot.errors import ConfigError, QuorumError
from bot.models import Core
from bot.wiring import CoreServices, open_core

log = logging.getLogger("quorum.mcp")


class _Opening:
    """The core, opened in the background for as long as the server runs."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.ready: asyncio.Future[tuple[Core, CoreServices]] | None = None
        self.stop = asyncio.Event()

    async def running(self) -> tuple[Core, CoreServices]:
        """The core, once open; the sentence saying why when it could not open."""
        assert self.ready is not None
        try:
            return await asyncio.shield(self.ready)
        except QuorumError as exc:  # it will not open by itself: the assistant restarts it
            raise ConfigError(
                f"Quorum could not start: {exc} Restart this MCP server in your assistant "
                "once that is fixed."
            ) from exc

    async def _keep_open(self) -> None:
        assert self.ready is not None
        try:
            async with open_core(self.settings) as services, contextlib.AsyncExitStack() as pages:
                # Where its links open (None: the port is taken, a `quorum serve` has them).
                await pages.enter_async_context(local_pages(self.settings, services))
                self.ready.set_result((services.engine, services))
                await self.stop.wait()
        except QuorumError as exc:
            log.error("Quorum could not start: %s", exc)
            if not self.ready.done():
                self.ready.set_exception(exc)

    @contextlib.asynccontextmanager
    async def lifespan(self, _server: Any) -> AsyncIterator[None]:
        """Open the core beside the server; close it when the client goes."""
        self.ready = asyncio.get_running_loop().create_future()
        keeper = asyncio.create_task(self._keep_open())
        try:
            yield
        finally:
            self.stop.set()
            await keeper
            if not self.ready.done():
                self.ready.cancel()
            elif not self.ready.cancelled():
                self.ready.exception()  # read, so an unused failure is not reported as lost


async def serve_stdio(settings: Settings, kb: str) -> None:
    """Serve ``kb`` over stdin/stdout until the client closes them."""
    opening = _Opening(settings)
    server = build_server(Reach(kb, opening.running), lifespan=opening.lifespan)
    await server.run_stdio_async()
