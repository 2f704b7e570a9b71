"""Slack's side of chat uploads (``adapters.chat.uploads`` decides everything): files on
a message for Quorum, downloaded from ``url_private_download`` with the bot token;
``/sources``; ``/forget SOURCE`` with a confirm button; ``/speakers``. Admins are
``QUORUM_SLACK_ADMINS``."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import aiohttp
from slack_bolt.async_app import AsyncRespond

from adapters.chat.speakers import answer as speakers_answer
from adapters.chat.speakers import parse as speakers_asked
from adapters.chat.uploads import (
    NOT_ADMIN,
    TooLarge,
    Upload,
    Uploads,
    may_manage,
    write_capped,
)
from adapters.slack.render import Block, SlackMessage, escape, notice, section
from bot.models import Actor

log = logging.getLogger("quorum.slack")

ACTION_FORGET = "quorum_forget"
ACTION_KEEP = "quorum_forget_cancel"
DOWNLOAD_TIMEOUT_S = 600.0


class NotAFile(Exception):
    """Slack answered a download with something other than the file (a login page)."""


def fetcher(url: str, token: str) -> Any:
    """Download ``url`` to a path with ``Authorization: Bearer`` (how Slack serves private
    files to apps with ``files:read``)."""

    async def fetch(to: Path, limit: int) -> None:
        timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S)
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(url, headers=headers) as resp,
        ):
            # Without a valid token Slack redirects to its sign-in page: HTML, not the file.
            if resp.status != 200 or resp.content_type == "text/html":
                raise NotAFile(f"HTTP {resp.status} {resp.content_type}")
            if (resp.content_length or 0) > limit:
                raise TooLarge(f"{resp.content_length} bytes")
            await write_capped(resp.content.iter_chunked(1 << 16), to, limit)

    return fetch


def uploads_in(event: dict[str, Any], token: str) -> list[Upload]:
    """The files on a message event, as uploads (name and size as Slack reports them)."""
    found: list[Upload] = []
    for f in event.get("files") or []:
        url = f.get("url_private_download") or f.get("url_private")
        if not url:
            continue
        found.append(
            Upload(str(f.get("name") or "upload"), int(f.get("size") or 0), fetcher(url, token))
        )
    return found


def confirm_message(text: str, source_id: str) -> SlackMessage:
    """``/forget``'s question with Remove and Cancel buttons."""
    buttons: Block = {
        "type": "actions",
        "block_id": "quorum_forget",
        "elements": [
            {
                "type": "button",
                "action_id": ACTION_FORGET,
                "style": "danger",
                "text": {"type": "plain_text", "text": "Remove"},
                "value": source_id[:2000],
            },
            {
                "type": "button",
                "action_id": ACTION_KEEP,
                "text": {"type": "plain_text", "text": "Cancel"},
                "value": "cancel",
            },
        ],
    }
    return SlackMessage(text, [section(escape(text)), buttons])


class SlackSources:
    """``/sources``, ``/forget`` and its buttons, over the shared ``Uploads``."""

    def __init__(self, uploads: Uploads, admins: list[str], kb_for: Any) -> None:
        self.uploads, self.admins, self.kb_for = uploads, admins, kb_for

    def may_manage(self, user: str) -> bool:
        """A user listed in QUORUM_SLACK_ADMINS."""
        return may_manage(user, self.admins)

    async def on_sources(self, command: dict[str, Any], respond: AsyncRespond) -> None:
        """``/sources``: what this workspace's knowledge base holds (only to the asker)."""
        text = await self.uploads.sources(self.kb_for(command["team_id"]))
        m = notice(text)
        await respond(text=m.text, blocks=m.blocks, response_type="ephemeral")

    async def on_forget(self, command: dict[str, Any], respond: AsyncRespond) -> None:
        """``/forget SOURCE``: admins get a confirm button; others a refusal."""
        if not self.may_manage(command["user_id"]):
            await respond(NOT_ADMIN, response_type="ephemeral")
            return
        wanted = str(command.get("text") or "").strip()
        if not wanted:
            await respond("Usage: `/forget SOURCE` (see /sources).", response_type="ephemeral")
            return
        info, text = await self.uploads.to_forget(self.kb_for(command["team_id"]), wanted)
        if info is None:
            await respond(text, response_type="ephemeral")
            return
        m = confirm_message(text, info.source.id)
        await respond(text=m.text, blocks=m.blocks, response_type="ephemeral")

    async def on_speakers(self, command: dict[str, Any], respond: AsyncRespond) -> None:
        """``/speakers``: a recording's speakers listed, renamed or merged (the rule of
        ``/forget``: admins only); the answer to the asker only."""
        if not self.may_manage(command["user_id"]):
            await respond(NOT_ADMIN, response_type="ephemeral")
            return
        by = Actor("slack", command["user_id"])
        kb = self.kb_for(command["team_id"])
        asked = speakers_asked(str(command.get("text") or "").strip())
        text = await speakers_answer(self.uploads.library, kb, asked, by)
        m = notice(text)
        await respond(text=m.text, blocks=m.blocks, response_type="ephemeral")

    async def on_click(
        self, body: dict[str, Any], action: dict[str, Any], respond: AsyncRespond
    ) -> None:
        """Remove or Cancel under ``/forget``'s question: the answer replaces it."""
        if action.get("action_id") == ACTION_KEEP:
            await respond("Kept it.", replace_original=True)
            return
        if not self.may_manage(body["user"]["id"]):
            await respond(NOT_ADMIN, replace_original=True)
            return
        team = (body.get("team") or {}).get("id") or body["user"].get("team_id") or ""
        by = Actor("slack", body["user"]["id"])
        source_id = str(action.get("value") or "")
        text = await self.uploads.forget(self.kb_for(team), source_id, by)
        await respond(text, replace_original=True)
