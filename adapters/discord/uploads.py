"""Discord's side of chat uploads (``adapters.chat.uploads`` decides everything):
attachments on a message that mentions Quorum, the ``/ingest``, ``/sources``, ``/forget``
and ``/speakers`` app commands, and ``/forget``'s confirm button. Attachments are downloaded
through discord.py (``Attachment.save``: Discord's CDN serves them by their signed URL).
Admins: members of ``QUORUM_DISCORD_ADMIN_ROLE`` (id or name) or with Manage Server."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Literal

import aiohttp
import discord
from discord import app_commands

from adapters.chat.live import LiveEdits
from adapters.chat.speakers import answer as speakers_answer
from adapters.chat.speakers import options as speakers_asked
from adapters.chat.uploads import (
    NOT_ADMIN,
    TooLarge,
    Upload,
    Uploads,
    may_manage,
    write_capped,
)
from adapters.discord.render import progress_text
from bot.models import Actor, Event

log = logging.getLogger("quorum.discord")

FORGET_TEMPLATE = r"quorum:forget:(?P<source>.+)"
EDIT_INTERVAL_S = 1.0
DOWNLOAD_TIMEOUT_S = 600.0
LONG_ID = "That source's id is too long to confirm here; remove it with `quorum remove`."


def is_admin(user: object, admin_role: str | None) -> bool:
    """A guild member with the admin role (by id or name) or the Manage Server permission."""
    if not isinstance(user, discord.Member):
        return False  # in a DM nobody manages a guild's sources
    roles = [str(r.id) for r in user.roles] + [r.name for r in user.roles]
    return may_manage(
        str(user.id),
        roles=roles,
        admin_role=admin_role,
        manages_server=user.guild_permissions.manage_guild,
    )


def as_upload(attachment: discord.Attachment) -> Upload:
    """An attachment, streamed from its signed CDN link when the
    upload is accepted and stopped at the size limit (discord.py's ``save`` would read it
    whole into memory first, whatever its real size)."""

    async def fetch(to: Path, limit: int) -> None:
        timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S)
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(attachment.url) as resp,
        ):
            if resp.status != 200:
                raise OSError(f"Discord's CDN answered HTTP {resp.status}")
            if (resp.content_length or 0) > limit:
                raise TooLarge(f"{resp.content_length} bytes")
            await write_capped(resp.content.iter_chunked(1 << 16), to, limit)

    return Upload(attachment.filename, attachment.size, fetch)


class MessageReply:
    """An upload's progress and result in a reply to the message it came with (or a
    follow-up of an interaction), edited in place."""

    def __init__(self, send: Any) -> None:
        self.send = send  # posts one message and returns it (editable)
        self.message: Any = None
        self.live: LiveEdits[str] | None = None

    async def start(self, placeholder: str) -> None:
        """Post the placeholder."""
        self.message = await self.send(placeholder)
        message = self.message
        self.live = LiveEdits(
            lambda text: message.edit(content=text), progress_text, EDIT_INTERVAL_S
        )

    async def on_event(self, event: Event) -> None:
        """Show progress, at most once an interval."""
        if self.live is not None:
            await self.live.on_event(event)

    async def done(self, text: str) -> None:
        """The result over the placeholder (or as a message); never raises."""
        try:
            if self.live is not None:
                await self.live.close()
            if self.message is None:
                await self.send(text)
            else:
                await self.message.edit(content=text)
        except discord.HTTPException as exc:
            log.warning("could not post an upload's result: %s %s", exc.status, exc.code)


class ForgetButton(
    discord.ui.DynamicItem[discord.ui.Button[discord.ui.View]], template=FORGET_TEMPLATE
):
    """``/forget``'s Remove button; the source id lives in the custom id."""

    def __init__(self, source_id: str) -> None:
        super().__init__(
            discord.ui.Button(
                style=discord.ButtonStyle.danger,
                label="Remove",
                custom_id=f"quorum:forget:{source_id}",
            )
        )
        self.source_id = source_id

    @classmethod
    async def from_custom_id(
        cls,
        interaction: discord.Interaction[Any],
        item: discord.ui.Item[Any],
        match: re.Match[str],
        /,
    ) -> ForgetButton:
        """Rebuild the button from a clicked custom id."""
        return cls(match["source"])

    async def callback(self, interaction: discord.Interaction[Any]) -> None:
        """An admin's click removes the source; the answer replaces the question."""
        client = interaction.client
        if not is_admin(interaction.user, client.own.admin_role):
            await interaction.response.send_message(NOT_ADMIN, ephemeral=True)
            return
        await interaction.response.defer()
        uploads: Uploads = client.uploads
        by = Actor("discord", str(interaction.user.id))
        text = await uploads.forget(client.kb_for(interaction.guild_id), self.source_id, by)
        await interaction.edit_original_response(content=text, view=None)


def forget_view(source_id: str) -> discord.ui.View | None:
    """The Remove button, or None when the id does not fit in a custom id."""
    if len(f"quorum:forget:{source_id}") > 100:
        return None
    view = discord.ui.View(timeout=None)
    view.add_item(ForgetButton(source_id))
    return view


async def on_sources(interaction: discord.Interaction[Any]) -> None:
    """``/sources``: what this guild's knowledge base holds, to the asker only."""
    client = interaction.client
    uploads: Uploads = client.uploads
    await interaction.response.defer(ephemeral=True, thinking=True)
    await interaction.followup.send(await uploads.sources(client.kb_for(interaction.guild_id)))


async def on_forget(interaction: discord.Interaction[Any], source: str) -> None:
    """``/forget SOURCE``: admins get a Remove button under the question; others a no."""
    client = interaction.client
    if not is_admin(interaction.user, client.own.admin_role):
        await interaction.response.send_message(NOT_ADMIN, ephemeral=True)
        return
    uploads: Uploads = client.uploads
    info, text = await uploads.to_forget(client.kb_for(interaction.guild_id), source)
    view = forget_view(info.source.id) if info else None
    if info is None or view is None:
        await interaction.response.send_message(text if info is None else LONG_ID, ephemeral=True)
        return
    await interaction.response.send_message(text, view=view, ephemeral=True)


async def on_ingest(
    interaction: discord.Interaction[Any], file: discord.Attachment, speakers: int | None = None
) -> None:
    """``/ingest FILE [speakers]``: an admin's file added (``speakers``: how many people
    speak in a recording), progress and result in the channel."""
    client = interaction.client
    if not is_admin(interaction.user, client.own.admin_role):
        await interaction.response.send_message(NOT_ADMIN, ephemeral=True)
        return
    await interaction.response.defer(thinking=True)

    async def send(text: str) -> Any:
        return await interaction.followup.send(text, wait=True)

    uploads: Uploads = client.uploads
    by = Actor("discord", str(interaction.user.id))
    kb = client.kb_for(interaction.guild_id)
    await uploads.add(kb, as_upload(file), MessageReply(send), by, speakers)


@app_commands.command(name="ingest", description="Add a recording or document (admins).")
@app_commands.describe(
    file="A recording, transcript, PDF or Markdown file",
    speakers="How many people speak in the recording (Quorum counts them if left out)",
)
async def ingest_command(
    interaction: discord.Interaction[Any],
    file: discord.Attachment,
    speakers: app_commands.Range[int, 1, 20] | None = None,
) -> None:
    """/ingest: add the attached file to the knowledge base."""
    await on_ingest(interaction, file, speakers)


@app_commands.command(name="sources", description="List what Quorum answers from.")
async def sources_command(interaction: discord.Interaction[Any]) -> None:
    """/sources: list the knowledge base."""
    await on_sources(interaction)


@app_commands.command(name="forget", description="Remove a source from Quorum (admins).")
@app_commands.describe(source="The source's id or title (see /sources)")
async def forget_command(
    interaction: discord.Interaction[Any], source: app_commands.Range[str, 1, 200]
) -> None:
    """/forget: remove a source after a confirm button."""
    await on_forget(interaction, source)


async def on_speakers(
    interaction: discord.Interaction[Any],
    source: str,
    action: str,
    speaker: str | None,
    name: str | None,
) -> None:
    """``/speakers``: a recording's speakers listed, renamed or merged (admins, as
    ``/forget``); the answer to the asker only."""
    client = interaction.client
    if not is_admin(interaction.user, client.own.admin_role):
        await interaction.response.send_message(NOT_ADMIN, ephemeral=True)
        return
    await interaction.response.defer(ephemeral=True, thinking=True)
    uploads: Uploads = client.uploads
    by = Actor("discord", str(interaction.user.id))
    asked = speakers_asked(source, action, speaker, name)
    text = await speakers_answer(uploads.library, client.kb_for(interaction.guild_id), asked, by)
    await interaction.followup.send(text[:2000])


@app_commands.command(
    name="speakers", description="A recording's speakers; rename or merge them (admins)."
)
@app_commands.describe(
    source="The recording's id or title (see /sources)",
    action="list (the default), rename, or merge two labels that are one person",
    speaker='The speaker to rename or merge, e.g. "Speaker 2"',
    to='The new name, or the speaker to merge into, e.g. "Amara Osei"',
)
async def speakers_command(
    interaction: discord.Interaction[Any],
    source: app_commands.Range[str, 1, 200],
    action: Literal["list", "rename", "merge"] = "list",
    speaker: app_commands.Range[str, 1, 100] | None = None,
    to: app_commands.Range[str, 1, 100] | None = None,
) -> None:
    """/speakers: list, rename or merge a recording's speakers."""
    await on_speakers(interaction, source, action, speaker, to)


def add_upload_commands(tree: app_commands.CommandTree[Any]) -> None:
    """Register /ingest, /sources, /forget and /speakers on a tree."""
    tree.add_command(ingest_command)
    tree.add_command(sources_command)
    tree.add_command(forget_command)
    tree.add_command(speakers_command)
