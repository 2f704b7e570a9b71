"""Posting one message to a Slack channel outside any conversation (summaries of newly
ingested recordings, ``adapters.chat.announce``)."""

from __future__ import annotations

import aiohttp
from slack_sdk.errors import SlackApiError

from adapters.slack.app import web_client
from adapters.slack.render import section, split_mrkdwn, to_mrkdwn
from bot.config import Settings
from retrieval.errors import QuorumError


async def post_to_slack(settings: Settings, channel: str, markdown: str) -> None:
    """Post ``markdown`` (rendered as mrkdwn, links live) to ``channel`` as the bot."""
    body = to_mrkdwn(markdown)
    async with aiohttp.ClientSession() as session:
        client = web_client(settings, session)
        try:
            await client.chat_postMessage(
                channel=channel,
                text=body.split("\n", 1)[0][:300],
                blocks=[section(chunk) for chunk in split_mrkdwn(body)][:50],
            )
        except SlackApiError as exc:
            raise QuorumError(f"Slack said {exc.response.get('error')}") from exc
