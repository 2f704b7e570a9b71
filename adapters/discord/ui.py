"""Discord message plumbing: the persistent feedback buttons, posting a rendered answer,
``DiscordReply`` (one answer over its placeholder, progress through the shared
``adapters.chat.live``), and ``PostedMessage``, a message at the conversation's steps."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol

import discord

from adapters.chat.conversation import THANKS, Conversation, Incoming
from adapters.chat.live import LiveEdits
from adapters.chat.view import wants_feedback
from adapters.discord.render import SORRY, Part, progress_text, render_answer
from bot.models import Answer, Event, Question

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


# --- a message at the conversation's steps


class Asked(Protocol):
    """What a posted message needs of the client it came to (``client.QuorumClient``)."""

    async def allowed(self, guild_id: int | None, channel: object, user_id: int) -> bool:
        """The guild and channel allow-lists."""
        ...

    async def add_attachments(self, message: discord.Message) -> None:
        """Ingest a message's files."""
        ...

    async def reply_to(
        self, message: discord.Message, question: Question
    ) -> tuple[Question, DiscordReply]:
        """Where the answer to ``message`` goes, and its placeholder."""
        ...


class PostedMessage:
    """One Discord message at the conversation's steps (``Surface``): a message outside
    the allow-lists is only logged; notes and apologies are replies to it."""

    def __init__(self, client: Asked, message: discord.Message) -> None:
        self.client, self.message = client, message
        self.guild_id = message.guild.id if message.guild else None

    async def allowed(self, msg: Incoming) -> bool:
        m = self.message
        return await self.client.allowed(self.guild_id, m.channel, m.author.id)

    async def refuse(self, msg: Incoming) -> None:
        log.info("ignoring message %s: channel %s is not allowed", msg.message_id, msg.key.channel)

    async def add_files(self, msg: Incoming) -> None:
        await self.client.add_attachments(self.message)

    async def tell(self, msg: Incoming, text: str) -> None:
        await reply_quietly(self.message, text)

    async def fail(self, msg: Incoming, text: str) -> None:
        await reply_quietly(self.message, text)

    async def reply(self, question: Question) -> tuple[Question, DiscordReply]:
        return await self.client.reply_to(self.message, question)


async def reply_quietly(message: discord.Message, text: str) -> None:
    """Reply with one line; a reply that cannot be posted is dropped."""
    try:
        await message.reply(text)
    except discord.HTTPException:
        pass
