"""Slack's row of ``quorum doctor``: the bot token (``auth.test``), its scopes against
``manifest.yml``, and the app token, each failure with its fix."""

from __future__ import annotations

from pathlib import Path

import yaml
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.platform import Check
from adapters.slack.settings import slack_settings
from bot.config import Settings

MANIFEST = Path(__file__).resolve().parent.parent.parent / "manifest.yml"
FOR = {"assistant:write": "the assistant panel (its status line and suggested prompts)"}


def bot_scopes(manifest: Path | None = None) -> set[str] | None:
    """The bot scopes ``manifest.yml`` asks Slack for (the repo's, else the working
    directory's, as in the Docker image); None when there is none."""
    for path in (manifest,) if manifest else (MANIFEST, Path.cwd() / "manifest.yml"):
        if path.is_file():
            data = yaml.safe_load(path.read_text())
            return set(data["oauth_config"]["scopes"]["bot"])
    return None


async def check_slack(settings: Settings) -> Check | None:
    """``auth.test`` with the bot token, its scopes against manifest.yml, and the app token."""
    own = slack_settings(settings)
    if own.bot_token is None:
        return None
    if own.app_token is None and own.signing_secret is None:
        return Check(
            "slack",
            "FAIL",
            "SLACK_BOT_TOKEN is set, but Slack has no way to reach Quorum.",
            "Set SLACK_APP_TOKEN (xapp-, Socket Mode) or SLACK_SIGNING_SECRET (HTTP events).",
        )
    base = own.api_url if own.api_url.endswith("/") else own.api_url + "/"
    client = AsyncWebClient(token=own.bot_token.get_secret_value(), base_url=base, timeout=15)
    try:
        auth = await client.auth_test()
    except SlackApiError as exc:
        error = exc.response.get("error")
        return Check(
            "slack",
            "FAIL",
            f"Slack rejected SLACK_BOT_TOKEN ({error}).",
            "Copy the Bot User OAuth Token (xoxb-) from the app's OAuth & Permissions page.",
        )
    except Exception as exc:
        return Check(
            "slack", "FAIL", f"Cannot reach Slack ({type(exc).__name__}).", "Check the network."
        )
    granted = {s.strip() for s in auth.headers.get("x-oauth-scopes", "").split(",") if s.strip()}
    wanted = bot_scopes()
    if wanted is None:
        return Check(
            "slack",
            "warn",
            f"{auth.get('team')} as {auth.get('user')}; no manifest.yml to compare scopes with.",
            "Run doctor from the repository (or a folder holding manifest.yml).",
        )
    missing = sorted(wanted - granted)
    if missing:
        uses = "".join(f" {s} is for {FOR[s]}." for s in missing if s in FOR)
        return Check(
            "slack",
            "FAIL",
            f"The bot token lacks scopes: {', '.join(missing)}.{uses}",
            "Update the app from manifest.yml (App Manifest → paste → Save), then reinstall "
            "it to the workspace (OAuth & Permissions → Reinstall).",
        )
    if own.app_token is not None:
        app = AsyncWebClient(base_url=base, timeout=15)
        try:
            await app.apps_connections_open(app_token=own.app_token.get_secret_value())
        except SlackApiError as exc:
            return Check(
                "slack",
                "FAIL",
                f"Slack rejected SLACK_APP_TOKEN ({exc.response.get('error')}).",
                "Create an app-level token (xapp-) with connections:write; enable Socket Mode.",
            )
    return Check(
        "slack", "ok", f"{auth.get('team')} as {auth.get('user')}, scopes match manifest.yml"
    )
