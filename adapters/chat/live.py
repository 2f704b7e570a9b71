"""The placeholder that shows an answer's progress, on any platform: the core's events
and partial answers edit it at most once per interval, without making the core wait on
the platform, and ``close`` waits for an edit in flight, so the final answer is never
overwritten by a late partial one."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from bot.models import Event

log = logging.getLogger("quorum.chat")

M = TypeVar("M")


class LiveEdits(Generic[M]):
    """Edits one message to show the latest event: ``render`` turns an event into the
    platform's message, ``edit`` sends it. A failed edit is logged and skipped (a lost
    progress update is not fatal)."""

    def __init__(
        self,
        edit: Callable[[M], Awaitable[object]],
        render: Callable[[Event], M],
        interval_s: float,
    ) -> None:
        self._edit, self._render, self._interval = edit, render, interval_s
        self._pending: M | None = None
        self._last = time.monotonic()  # the placeholder was just posted
        self._task: asyncio.Task[None] | None = None
        self._editing = False
        self._closed = False

    async def on_event(self, event: Event) -> None:
        """The core's event sink: remember the latest state; the pump sends it."""
        if self._closed:
            return
        self._pending = self._render(event)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="quorum-live-edit")

    async def _run(self) -> None:
        while self._pending is not None and not self._closed:
            await asyncio.sleep(max(0.0, self._last + self._interval - time.monotonic()))
            message, self._pending = self._pending, None
            if message is None or self._closed:
                break
            self._editing = True
            try:
                await self._edit(message)
            except Exception as exc:
                log.warning("progress edit failed: %s", exc)
            finally:
                self._editing = False
                self._last = time.monotonic()
        self._task = None

    async def close(self) -> None:
        """Stop editing; return once no edit is in flight."""
        self._closed = True
        task = self._task
        if task is None:
            return
        if not self._editing:
            task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            if not task.cancelled():
                raise
