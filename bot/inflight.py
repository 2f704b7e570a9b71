"""Work in flight, held in one place: each task referenced until it ends (so it is not
garbage-collected), awaitable until none is left (tests, benchmarks), and at shutdown
given a grace period and then cancelled. A platform's answers after each ack, the API's
answers and the sentence vectors prefetched while a model writes are all held here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any

log = logging.getLogger("quorum")


class InFlight:
    """Tasks started (``spawn``) or followed (``hold``) until they end."""

    def __init__(self, logger: logging.Logger = log) -> None:
        self._held: set[asyncio.Future[Any]] = set()
        self.log = logger  # where an exception spawned work lets out is logged

    def spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        """Run ``coro`` on a task of its own; an exception it lets out is logged."""
        task = asyncio.create_task(self._logged(coro))
        self.hold(task)
        return task

    def hold(self, work: asyncio.Future[Any]) -> None:
        """Follow ``work`` (a task or future) until it ends."""
        self._held.add(work)
        work.add_done_callback(self._held.discard)

    async def _logged(self, coro: Coroutine[Any, Any, None]) -> None:
        try:
            await coro
        except Exception:
            self.log.exception("background work failed")

    def __len__(self) -> int:
        return len(self._held)

    async def drain(self) -> None:
        """Wait until nothing is left in flight (including work it started meanwhile)."""
        while self._held:
            await asyncio.gather(*self._held, return_exceptions=True)

    async def close(self, grace_s: float) -> None:
        """Give what is in flight ``grace_s`` to finish, then cancel the rest and wait for it
        to end."""
        pending = set(self._held)
        if pending:
            await asyncio.wait(pending, timeout=grace_s)
        for work in pending:
            work.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
