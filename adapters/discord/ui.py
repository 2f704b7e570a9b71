"""Discord message plumbing: the persistent feedback buttons, posting a rendered answer, and
``DiscordReply`` (one answer over its placeholder, progress through the shared
``adapters.chat.live``)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import discord

from adapters.chat.conversation import THANKS, Conversation
from adapters.chat.live import LiveEdits
from adapters.chat.view import wants_feedback
from adapters.discord.render import SORRY, Part, progress_text, render_answer
from bot.models import Answer, Event

log = logging.getLogger("quorum.discord")

EDIT_INTERVAL_S = 1.0  # Discord allows ~5 edits per 5 s per channel; one a second is safe

FEEDBACK_TEMPLATE = r"quorum:fb:(?P<vote>up|down):(?P<exchange>\d+)"


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

        async def say(text: str) -> None:
            await interaction.response.send_message(text, ephemeral=True)

        chat: Conversation = interaction.client.chat
        value = 1 if self.vote == "up" else -1
        user = str(interaction.user.id)
        await chat.feedback(self.exchange_id, user, value, lambda: say(THANKS), say)


def feedback_view(answer: Answer) -> discord.ui.View | None:
    """Feedback buttons for an answer worth rating, or None."""
    if not wants_feedback(answer) or answer.exchange_id is None:
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


class DiscordReply:
    """One answer in Discord: the placeholder already posted (a thread may be started on
    it) shows progress, then the answer replaces it; buttons go on the last message."""

    def __init__(self, placeholder: Any, more: Sender, note: str | None = None) -> None:
        self.placeholder, self.more, self.note = placeholder, more, note
        self.live = LiveEdits(
            lambda text: placeholder.edit(content=text), progress_text, EDIT_INTERVAL_S
        )

    async def start(self, placeholder: str) -> None:
        """The placeholder is posted before the thread is started, so nothing to do."""

    async def on_event(self, event: Event) -> None:
        """The core's event sink."""
        await self.live.on_event(event)

    async def finish(self, answer: Answer) -> None:
        """Post the answer over the placeholder."""
        await self.live.close()
        await deliver(
            render_answer(answer, self.note), self.placeholder, self.more, feedback_view(answer)
        )

    async def fail(self, text: str) -> None:
        """One sentence over the placeholder; never raises."""
        await self.live.close()
        await deliver([Part(text)], self.placeholder, self.more, None)
