"""Discord message plumbing shared by the handlers: the placeholder that shows progress
(throttled edits), the persistent feedback buttons, and posting a rendered answer."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol

import discord

from adapters.discord_render import SORRY, Part, progress_text
from bot.errors import InvalidInput
from bot.models import Answer, Event

log = logging.getLogger("quorum.discord")

FEEDBACK_TEMPLATE = r"quorum:fb:(?P<vote>up|down):(?P<exchange>\d+)"
THANKS = "Thanks, feedback recorded."


class LiveMessage:
    """Shows the latest progress in the placeholder, at most one edit per interval, without
    making the core wait on Discord; ``close`` waits for an edit in flight, so the final
    answer is never overwritten by a late partial one."""

    def __init__(self, edit: Callable[[str], Awaitable[object]], interval: float) -> None:
        self._edit = edit
        self._interval = interval
        self._pending: str | None = None
        self._last = time.monotonic()  # the placeholder was just posted
        self._task: asyncio.Task[None] | None = None
        self._editing = False
        self._closed = False

    async def on_event(self, event: Event) -> None:
        """The core's event sink."""
        if self._closed:
            return
        self._pending = progress_text(event)
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="quorum-discord-live-edit")

    async def _run(self) -> None:
        while self._pending is not None and not self._closed:
            await asyncio.sleep(max(0.0, self._last + self._interval - time.monotonic()))
            text, self._pending = self._pending, None
            if text is None or self._closed:
                break
            self._editing = True
            try:
                await self._edit(text)
            except discord.HTTPException as exc:
                log.warning("progress edit failed: %s %s", exc.status, exc.code)
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


# --- feedback buttons


class FeedbackButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=FEEDBACK_TEMPLATE
):
    """👍/👎 under an answer. The exchange id lives in the custom id, so a click still
    lands after a restart (registered with ``add_dynamic_items`` in ``setup_hook``)."""

    def __init__(self, exchange_id: int, vote: Literal["up", "down"]) -> None:
        super().__init__(
            discord.ui.Button(
                style=discord.ButtonStyle.secondary,
                emoji="👍" if vote == "up" else "👎",
                label="Helpful" if vote == "up" else "Not helpful",
                custom_id=f"quorum:fb:{vote}:{exchange_id}",
            )
        )
        self.exchange_id = exchange_id
        self.vote: Literal["up", "down"] = vote

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> FeedbackButton:
        """Rebuild the button from a clicked custom id."""
        return cls(int(match["exchange"]), "up" if match["vote"] == "up" else "down")

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """Store the vote and thank the user privately."""
        value = 1 if self.vote == "up" else -1
        try:
            await interaction.client.core.record_feedback(
                self.exchange_id, str(interaction.user.id), value
            )
        except InvalidInput as exc:  # an answer the store no longer knows: no traceback
            log.info("feedback for exchange %s not recorded: %s", self.exchange_id, exc)
            await interaction.response.send_message(str(exc), ephemeral=True)
            return
        except Exception:
            log.exception("recording feedback for exchange %s failed", self.exchange_id)
            await interaction.response.send_message(SORRY, ephemeral=True)
            return
        await interaction.response.send_message(THANKS, ephemeral=True)


def feedback_view(answer: Answer) -> discord.ui.View | None:
    """Feedback buttons for an answer worth rating, or None."""
    if answer.exchange_id is None or answer.kind not in ("answer", "extractive"):
        return None
    view = discord.ui.View(timeout=None)
    view.add_item(FeedbackButton(answer.exchange_id, "up"))
    view.add_item(FeedbackButton(answer.exchange_id, "down"))
    return view


class Sender(Protocol):
    """Posts one more message (``channel.send`` or ``interaction.followup.send``)."""

    async def __call__(
        self, content: str, embeds: Sequence[discord.Embed], view: discord.ui.View | None
    ) -> object: ...


async def deliver(
    parts: list[Part], first: Any, more: Sender, view: discord.ui.View | None
) -> None:
    """Replace the placeholder with the first part, post the rest; buttons on the last."""
    try:
        for i, part in enumerate(parts):
            buttons = view if i == len(parts) - 1 else None
            if i == 0:
                await first.edit(content=part.content, embeds=list(part.embeds), view=buttons)
            else:
                await more(part.content, list(part.embeds), buttons)
    except discord.HTTPException as exc:
        log.error("posting an answer failed: %s %s", exc.status, exc.code, exc_info=exc)
        try:
            await first.edit(content=SORRY, embeds=[], view=None)
        except discord.HTTPException:
            pass
