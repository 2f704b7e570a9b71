"""The Discord adapter: ``/ask`` and ``/research`` app commands, @mentions answered in a
thread started on the question, follow-ups in that thread without a mention, DMs, and
feedback buttons that keep working across restarts.

Each handler turns the event into a frozen ``Question``, calls the core and renders the
``Answer`` (``adapters.discord.render``); nothing else lives here. Slash commands are
synced by ``quorum discord sync`` (to ``QUORUM_DISCORD_GUILD_ID``, or ``--global``), never
on start. ``QUORUM_DISCORD_API_URL`` points discord.py's REST client elsewhere (an
emulator in tests) by setting ``discord.http.Route.BASE`` before the client connects.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import aiohttp
import discord
import yarl
from discord import app_commands
from discord.gateway import DiscordWebSocket

from adapters.chat.conversation import Conversation, Incoming
from adapters.chat.uploads import NOT_ADMIN, Uploads, speakers_said
from adapters.discord.channels import conversation, home_channel_id, is_thread
from adapters.discord.commands import add_commands, slash_filters
from adapters.discord.render import (
    PLACEHOLDER,
    RESEARCH_PLACEHOLDER,
    SORRY,
    thread_name,
)
from adapters.discord.settings import discord_settings
from adapters.discord.ui import DiscordReply, FeedbackButton, PostedMessage, reply_quietly
from adapters.discord.uploads import ForgetButton, MessageReply, as_upload, is_admin
from bot.config import Settings
from bot.inflight import InFlight
from bot.models import Actor, Core, Mode, Question, ThreadKey
from retrieval.errors import ConfigError, QuorumError

log = logging.getLogger("quorum.discord")

NOT_HERE = "Quorum isn't enabled in this channel. Ask an admin, or try one where it is."
NO_THREAD = (
    "I couldn't start a thread here (I need the Create Public Threads permission), "
    "so I'm answering inline; follow-ups need a new mention."
)
REJECTED = "Discord rejected DISCORD_TOKEN: reset it in the Developer Portal (Bot > Reset Token)."


def intents() -> discord.Intents:
    """Only the gateway intents Quorum needs (docs/discord.md explains each)."""
    wanted = discord.Intents.none()
    wanted.guilds = True  # channels and threads, to know where a message was posted
    wanted.guild_messages = True  # messages in servers: @mentions and thread follow-ups
    wanted.dm_messages = True  # questions sent as direct messages
    # Privileged: the text of follow-ups in Quorum's threads, which do not mention the
    # bot (Discord blanks the content of other messages without it).
    wanted.message_content = True
    return wanted


def configure_api(settings: Settings) -> None:
    """Point discord.py's REST routes at QUORUM_DISCORD_API_URL (e.g. an emulator)."""
    api_url = discord_settings(settings).api_url
    if api_url:
        discord.http.Route.BASE = api_url.rstrip("/")


def bot_token(settings: Settings) -> str:
    """The bot token, or a ConfigError saying where to get one."""
    token = discord_settings(settings).token
    if token is None or not token.get_secret_value().strip():
        raise ConfigError(
            "DISCORD_TOKEN is not set: copy the bot token from the Discord Developer Portal "
            "(Applications > your app > Bot > Reset Token); see docs/discord.md."
        )
    return token.get_secret_value().strip()


# --- the client


class QuorumTree(app_commands.CommandTree["QuorumClient"]):
    """A command tree whose failures end in an apology, never a traceback in chat."""

    async def on_error(
        self, interaction: discord.Interaction[QuorumClient], error: app_commands.AppCommandError
    ) -> None:
        """Log the traceback; tell the user in one sentence."""
        name = interaction.command.name if interaction.command else "?"
        log.error("/%s failed", name, exc_info=error)
        try:
            if interaction.response.is_done():
                await interaction.followup.send(SORRY, ephemeral=True)
            else:
                await interaction.response.send_message(SORRY, ephemeral=True)
        except discord.HTTPException:
            pass


class QuorumClient(discord.Client):
    """Quorum on Discord: slash commands, mentions, thread follow-ups, DMs, feedback."""

    def __init__(self, core: Core, settings: Settings) -> None:
        # Answers quote meetings; never let a quoted "@everyone" or name ping anyone.
        super().__init__(intents=intents(), allowed_mentions=discord.AllowedMentions.none())
        self.core = core
        self.settings = settings
        self.own = discord_settings(settings)
        self.chat = Conversation(core, "discord", self._kb_of_workspace)
        self.uploads = Uploads(core.library, settings.upload_max_mb)
        self.tree = QuorumTree(self)
        add_commands(self.tree)
        self._told_no_thread: set[int] = set()
        self.answering = InFlight(log)  # answers in flight (drained on stop)

    async def setup_hook(self) -> None:
        """Make feedback buttons on old answers clickable again (no command sync here)."""
        self.add_dynamic_items(FeedbackButton, ForgetButton)
        if self.own.api_url:
            # discord.py's Client dials a fixed gateway; behind another API base, ask it
            # which gateway to use (Discord's documented GET /gateway/bot).
            _, url, _ = await self.http.get_bot_gateway()
            DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(url)

    # access

    def kb_for(self, guild_id: int | None) -> str:
        """The knowledge base a guild (or a DM) asks."""
        if guild_id is None:
            return self.own.kb or self.settings.default_kb
        return self.own.kb or str(guild_id)

    def _kb_of_workspace(self, workspace: str) -> str:
        return self.kb_for(int(workspace) if workspace.isdigit() else None)

    async def allowed(self, guild_id: int | None, channel: object, user_id: int) -> bool:
        """The guild and channel allow-lists; in DMs, membership of an allowed guild."""
        s = self.own
        if guild_id is None:
            return not s.guilds or await self._member_of_allowed(user_id)
        if s.guilds and guild_id not in s.guilds:
            return False
        return not s.channels or home_channel_id(channel) in s.channels

    async def _member_of_allowed(self, user_id: int) -> bool:
        for guild_id in self.own.guilds:
            try:
                await self.http.get_member(guild_id, user_id)
                return True
            except discord.HTTPException:
                continue
        return False

    # slash commands

    async def on_slash(
        self, interaction: discord.Interaction[QuorumClient], text: str, mode: Mode, **opts: Any
    ) -> None:
        """/ask and /research: defer, post a placeholder, start a thread on it, answer."""
        if not await self.allowed(interaction.guild_id, interaction.channel, interaction.user.id):
            await interaction.response.send_message(NOT_HERE, ephemeral=True)
            return
        try:
            filters = slash_filters(**opts)
        except QuorumError as exc:
            await interaction.response.send_message(str(exc), ephemeral=True)
            return
        await interaction.response.defer(thinking=True)
        first = RESEARCH_PLACEHOLDER if mode == "deep" else PLACEHOLDER
        placeholder = await interaction.followup.send(first, wait=True)
        channel = interaction.channel
        key, note = await self._thread_for(channel, interaction.guild_id, placeholder, text)
        msg = Incoming(key, str(interaction.id), str(interaction.user.id), text)
        question = self.chat.question(msg, mode, filters)

        async def more(
            content: str, embeds: Sequence[discord.Embed], view: discord.ui.View | None
        ) -> object:
            if view is None:
                return await interaction.followup.send(content, embeds=embeds, wait=True)
            return await interaction.followup.send(content, embeds=embeds, view=view, wait=True)

        await self._answer(question, DiscordReply(placeholder, more, note))

    async def _thread_for(
        self, channel: object, guild_id: int | None, message: discord.abc.Snowflake, text: str
    ) -> tuple[ThreadKey, str | None]:
        """Start a thread on ``message`` where threads can be started; the session key."""
        channel_id = getattr(channel, "id", 0)
        if is_thread(channel) or isinstance(channel, discord.DMChannel):
            return conversation(guild_id, channel_id), None  # already a conversation
        inline = ThreadKey("discord", str(guild_id or "dm"), str(channel_id), str(message.id))
        if not isinstance(channel, discord.TextChannel):
            return inline, None
        try:
            thread = await channel.create_thread(
                name=thread_name(text), message=message, auto_archive_duration=1440
            )
        except discord.HTTPException as exc:
            log.warning("no thread in channel %s: %s %s", channel_id, exc.status, exc.code)
            return inline, self._no_thread_note(channel_id, exc)
        return conversation(guild_id, thread.id), None

    def _no_thread_note(self, channel_id: int, exc: discord.HTTPException) -> str | None:
        """Why the answer is inline: said once per channel, not on every answer."""
        if not isinstance(exc, discord.Forbidden) or channel_id in self._told_no_thread:
            return None
        self._told_no_thread.add(channel_id)
        return NO_THREAD

    # messages: mentions, thread follow-ups, DMs

    async def on_message(self, message: discord.Message) -> None:
        """Answer a mention (in a new thread), a follow-up in a Quorum thread, or a DM."""
        if message.author.bot or self.user is None:
            return
        if message.type not in (discord.MessageType.default, discord.MessageType.reply):
            return
        channel = message.channel
        guild_id = message.guild.id if message.guild else None
        if guild_id is None and not isinstance(channel, discord.DMChannel):
            return
        mentioned = self.mentioned_in(message)
        msg = Incoming(
            key=conversation(guild_id, channel.id),
            message_id=str(message.id),
            user=str(message.author.id),
            text=self.strip_mentions(message),
            direct=guild_id is None,
            mentioned=mentioned,
            follow_up=is_thread(channel),
            addressed_elsewhere=not mentioned and message.content.lstrip().startswith("<@"),
            files=bool(message.attachments),
        )
        await self.chat.receive(msg, PostedMessage(self, message))

    async def add_attachments(self, message: discord.Message) -> None:
        """Files shared with a mention: an admin's are ingested, each reported in a reply."""
        if not is_admin(message.author, self.own.admin_role):
            await reply_quietly(message, NOT_ADMIN)
            return
        speakers = speakers_said(message.content)
        if isinstance(speakers, str):
            await reply_quietly(message, speakers)
            return
        kb = self.kb_for(message.guild.id if message.guild else None)
        for attachment in message.attachments:
            by = Actor("discord", str(message.author.id))
            reply = MessageReply(message.reply)
            await self.uploads.add(kb, as_upload(attachment), reply, by, speakers)

    async def reply_to(
        self, message: discord.Message, question: Question
    ) -> tuple[Question, DiscordReply]:
        """Start a thread on the question where one can be started, and the placeholder in
        it; the answer is known to ``drain`` from here on."""
        if (task := asyncio.current_task()) is not None:
            self.answering.hold(task)
        channel = message.channel
        note: str | None = None
        target: discord.abc.Messageable = channel
        if not is_thread(channel) and message.guild is not None:  # inline until a thread
            inline = ThreadKey(
                "discord", question.thread.workspace, str(channel.id), str(message.id)
            )
            question = replace(question, thread=inline)
        if isinstance(channel, discord.TextChannel):
            try:
                target = await message.create_thread(
                    name=thread_name(question.text), auto_archive_duration=1440
                )
                key = conversation(message.guild.id if message.guild else None, target.id)
                question = replace(question, thread=key)
            except discord.HTTPException as exc:
                log.warning("no thread in channel %s: %s %s", channel.id, exc.status, exc.code)
                note = self._no_thread_note(channel.id, exc)
        first = RESEARCH_PLACEHOLDER if question.mode == "deep" else PLACEHOLDER
        if isinstance(target, discord.TextChannel):  # inline: reply so it is clear to whom
            placeholder = await message.reply(first)
        else:
            placeholder = await target.send(first)

        async def more(
            content: str, embeds: Sequence[discord.Embed], view: discord.ui.View | None
        ) -> object:
            if view is None:
                return await target.send(content, embeds=embeds)
            return await target.send(content, embeds=embeds, view=view)

        return question, DiscordReply(placeholder, more, note)

    def mentioned_in(self, message: discord.Message) -> bool:
        """The bot itself, or its managed role, is mentioned (not @everyone)."""
        return self.user is not None and (
            any(u.id == self.user.id for u in message.mentions) or bool(self._my_roles(message))
        )

    def _my_roles(self, message: discord.Message) -> list[int]:
        me = self.user.id if self.user else None
        return [r.id for r in message.role_mentions if r.tags is not None and r.tags.bot_id == me]

    def strip_mentions(self, message: discord.Message) -> str:
        """The question without the bot's mention (or its role's)."""
        text = message.content
        if self.user is not None:
            text = re.sub(rf"<@!?{self.user.id}>", " ", text)
        for role_id in self._my_roles(message):
            text = text.replace(f"<@&{role_id}>", " ")
        return "\n".join(" ".join(line.split()) for line in text.strip().splitlines()).strip()

    async def _answer(self, question: Question, reply: DiscordReply) -> None:
        """The conversation's answer, known to ``drain`` while it runs."""
        if (task := asyncio.current_task()) is not None:
            self.answering.hold(task)
        await self.chat.answer(question, reply)

    async def drain(self, grace_s: float) -> None:
        """Give answers in flight ``grace_s`` to finish, then end the rest with a line."""
        await self.answering.close(grace_s)


def build_discord_client(core: Core, settings: Settings) -> QuorumClient:
    """A ready-to-start client (REST routes pointed at QUORUM_DISCORD_API_URL)."""
    configure_api(settings)
    return QuorumClient(core, settings)


async def run_discord(
    core: Core, settings: Settings, on_ready: Callable[[], None] | None = None
) -> None:
    """Connect to Discord and answer until cancelled; ``on_ready`` once connected."""
    token = bot_token(settings)
    client = build_discord_client(core, settings)
    # discord.py's DEBUG lines carry request bodies, i.e. message text: keep them out.
    for name in ("discord.http", "discord.webhook.async_", "discord.gateway"):
        logging.getLogger(name).setLevel(max(logging.INFO, logging.getLogger(name).level))
    try:
        async with client:
            ready = asyncio.create_task(_when_ready(client, on_ready)) if on_ready else None
            try:
                await client.start(token)
            finally:
                if ready is not None:
                    ready.cancel()
                await client.drain(settings.shutdown_s / 2)  # before the HTTP session closes
    except discord.LoginFailure as exc:
        raise ConfigError(REJECTED) from exc
    except (aiohttp.ClientError, OSError, discord.GatewayNotFound) as exc:
        api_url = discord_settings(settings).api_url
        raise ConfigError(
            f"Discord at {api_url or 'discord.com'} is not reachable ({type(exc).__name__}): "
            "check the network" + (", or QUORUM_DISCORD_API_URL." if api_url else ".")
        ) from exc
    except discord.PrivilegedIntentsRequired as exc:
        raise ConfigError(
            "Discord refused the Message Content intent: enable it under Developer Portal > "
            "Bot > Privileged Gateway Intents (see docs/discord.md)."
        ) from exc


async def _when_ready(client: discord.Client, on_ready: Callable[[], None]) -> None:
    await client.wait_until_ready()
    on_ready()
