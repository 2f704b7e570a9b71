"""Paths on ``quorum serve``'s port that a part started later answers: a chat platform's
HTTP events (``Platform.webhook`` names the path, e.g. ``POST /<name>/events``). aiohttp
fixes its routes when the server starts, before the platforms connect, so the server
mounts each path at once (a ``Webhook``) and the platform hands it a handler while it
runs (``answered_by``); before and after, the path answers 503 in one sentence, which a
sender retries. The handler checks what the sender signs; this module only routes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

from aiohttp import web

from adapters.http.problems import Handler, problem


class Webhook:
    """One path of the port, answered by whoever holds it (nobody: 503)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._handler: Handler | None = None

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """The request, answered by the current handler."""
        if self._handler is None:
            return problem(503, f"Nothing answers {self.path} yet; try again shortly.")
        return await self._handler(request)

    @contextlib.contextmanager
    def answered_by(self, handler: Handler) -> Iterator[None]:
        """``handler`` answers the path while the block runs."""
        self._handler = handler
        try:
            yield
        finally:
            self._handler = None


def mount(app: web.Application, paths: Iterable[str]) -> dict[str, Webhook]:
    """A ``Webhook`` at each of ``paths`` (POST), by path."""
    hooks = {path: Webhook(path) for path in paths}
    for path, hook in hooks.items():
        app.router.add_post(path, hook.handle)
    return hooks
