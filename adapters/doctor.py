"""``quorum doctor``: is this Quorum ready to run for a team? One row per check (settings,
what it would serve, Claude, Weaviate, the model, the database, disk, the HTTP port, Slack,
Discord), each failure with the fix, exit 1 when anything fails.

It lives with the adapters because it asks Slack and Discord through their SDKs; every
network check has a deadline, so a dead host costs seconds, not a hang.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anthropic
import discord
import typer
import yaml
from discord import app_commands
from rich.markup import escape
from rich.table import Table
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.cli.app import out
from adapters.discord.client import bot_token, configure_api
from adapters.discord.commands import add_commands
from adapters.http.api import parse_tokens
from adapters.serve import configured
from bot.config import Settings, load_settings
from bot.holdings import data_sizes
from bot.sessions import MIGRATIONS
from bot.wiring import open_retrieval, open_session_store
from retrieval.embed import packaged_model_path
from retrieval.errors import QuorumError
from retrieval.links import redact_url

Status = Literal["ok", "warn", "FAIL"]
MANIFEST = Path(__file__).resolve().parent.parent / "manifest.yml"
CHECK_TIMEOUT_S = 30.0  # Weaviate may start from cold
MIN_FREE_BYTES = 1 << 30
LOW_FREE_BYTES = 5 << 30


@dataclass(frozen=True)
class Check:
    """One row of the report."""

    name: str
    status: Status
    detail: str
    fix: str = ""


def _ok(name: str, detail: str) -> Check:
    return Check(name, "ok", detail)


def bot_scopes(manifest: Path | None = None) -> set[str] | None:
    """The bot scopes ``manifest.yml`` asks Slack for (the repo's, else the working
    directory's, as in the Docker image); None when there is none."""
    for path in (manifest,) if manifest else (MANIFEST, Path.cwd() / "manifest.yml"):
        if path.is_file():
            data = yaml.safe_load(path.read_text())
            return set(data["oauth_config"]["scopes"]["bot"])
    return None


def check_front_ends(settings: Settings) -> Check:
    """Something to serve: Slack, Discord or the JSON API."""
    try:
        tokens = parse_tokens(settings.api_tokens)
    except QuorumError as exc:
        return Check("serves", "FAIL", str(exc), "Fix QUORUM_API_TOKENS (token1:kb1,token2:kb2).")
    served = configured(settings) + (["the JSON API"] if tokens else [])
    if not served:
        return Check(
            "serves",
            "FAIL",
            "Nothing to serve: no Slack, Discord or API token is set.",
            "Set SLACK_BOT_TOKEN with SLACK_APP_TOKEN (Socket Mode) or SLACK_SIGNING_SECRET "
            "(HTTP events), and/or DISCORD_TOKEN, and/or QUORUM_API_TOKENS=token:kb.",
        )
    if "slack" in served and not (settings.slack_app_token or settings.slack_signing_secret):
        return Check(
            "serves",
            "FAIL",
            "SLACK_BOT_TOKEN is set, but Slack has no way to reach Quorum.",
            "Set SLACK_APP_TOKEN (xapp-, Socket Mode) or SLACK_SIGNING_SECRET (HTTP events).",
        )
    return _ok("serves", ", ".join(served))


async def check_claude(settings: Settings) -> Check:
    """The key and the model, with one request of one output token."""
    if settings.anthropic_api_key is None or not settings.anthropic_api_key.get_secret_value():
        return Check(
            "claude",
            "warn",
            "No ANTHROPIC_API_KEY: answers quote passages instead of being written.",
            "Set ANTHROPIC_API_KEY (console.anthropic.com > API keys).",
        )
    client = anthropic.AsyncAnthropic(
        api_key=settings.anthropic_api_key.get_secret_value(),
        base_url=settings.anthropic_base_url,
        timeout=15.0,
        max_retries=0,
    )
    try:
        reply = await client.messages.create(
            model=settings.model, max_tokens=1, messages=[{"role": "user", "content": "ping"}]
        )
    except anthropic.AuthenticationError:
        return Check(
            "claude", "FAIL", "Claude rejected ANTHROPIC_API_KEY.", "Create a new key and set it."
        )
    except anthropic.NotFoundError:
        return Check(
            "claude",
            "FAIL",
            f"Claude does not know the model {settings.model!r}.",
            "Set QUORUM_MODEL to a current model name.",
        )
    except anthropic.APIStatusError as exc:
        return Check("claude", "warn", f"Claude answered {exc.status_code}.", "Try again shortly.")
    except anthropic.APIConnectionError:
        where = settings.anthropic_base_url or "api.anthropic.com"
        return Check(
            "claude",
            "FAIL",
            f"Cannot reach {redact_url(where)}.",
            "Check the network (or ANTHROPIC_BASE_URL).",
        )
    finally:
        await client.close()
    return _ok("claude", f"key accepted, {reply.model} answers")


async def check_store(settings: Settings) -> Check:
    """Connect (starting the embedded server if that is the mode), report the version."""
    try:
        async with open_retrieval(settings) as r:
            info = await r.store.server_info()
            where = "embedded" if settings.weaviate_mode == "embedded" else info.url
    except QuorumError as exc:
        fix = (
            "Run `make install` (it builds weaviate-server) or set QUORUM_WEAVIATE_BINARY."
            if settings.weaviate_mode == "embedded"
            else "Check QUORUM_WEAVIATE_URL (and QUORUM_WEAVIATE_API_KEY) and that it runs."
        )
        return Check("weaviate", "FAIL", str(exc), fix)
    return _ok("weaviate", f"{where}, version {info.version}")


def check_model(settings: Settings) -> Check:
    """The embedding model's files are where settings say (loading is left to serve)."""
    try:
        path = settings.embed_model_path or packaged_model_path()
    except ImportError:
        return Check(
            "model", "FAIL", "The packaged MiniLM is not installed.", "Run `make install`."
        )
    if not (path / "modules.json").exists() and not (path / "config.json").exists():
        return Check(
            "model",
            "FAIL",
            f"No sentence-transformers model at {path}.",
            "Point QUORUM_EMBED_MODEL_PATH at a model folder, or unset it.",
        )
    return _ok("model", str(path))


async def check_database(settings: Settings) -> Check:
    """The session store (PostgreSQL when QUORUM_DATABASE_URL is set, else SQLite) opens,
    answers, and is migrated to the latest migration."""
    try:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        async with open_session_store(settings) as store:
            await store.ping()
            applied = await store.applied_migrations()
            where = store.where
    except (QuorumError, OSError) as exc:
        fix = (
            "Check QUORUM_DATABASE_URL (postgresql://user:password@host:5432/database) and "
            "that PostgreSQL is up, or unset it to use SQLite."
            if settings.database_url
            else "Make QUORUM_DATA_DIR a writable folder on a local disk."
        )
        return Check("database", "FAIL", str(exc), fix)
    done = f"{len(applied)} of {len(MIGRATIONS)} migrations applied"
    return _ok("database", f"{where}, {done} (latest {applied[-1] if applied else 'none'})")


def check_disk(settings: Settings) -> Check:
    """Free space where the data lives."""
    where = settings.data_dir
    while not where.exists() and where != where.parent:
        where = where.parent
    free = shutil.disk_usage(where).free
    detail = f"{free / (1 << 30):.1f} GB free at {where}"
    if free < MIN_FREE_BYTES:
        return Check("disk", "FAIL", detail, "Free space or move QUORUM_DATA_DIR.")
    if free < LOW_FREE_BYTES:
        return Check("disk", "warn", detail, "Weaviate needs room to grow.")
    return _ok("disk", detail)


def _bytes(n: int) -> str:
    """``512 B``, ``1.5 MB``."""
    size = float(n)
    for unit in ("B", "KB", "MB"):
        if size < 1024:
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def check_data(settings: Settings) -> Check:
    """What the data dir holds, by kind (the index, kept transcripts, uploads, sessions)."""
    sizes = data_sizes(settings.data_dir)
    return _ok("data", ", ".join(f"{kind} {_bytes(n)}" for kind, n in sizes.items()))


def check_port(settings: Settings) -> Check:
    """QUORUM_HTTP_PORT can be listened on."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((settings.http_host, settings.http_port))
        except OSError:
            return Check(
                "http port",
                "warn",
                f"Port {settings.http_port} is in use (a running Quorum?).",
                "Set QUORUM_HTTP_PORT to a free port.",
            )
    return _ok("http port", f"{settings.http_host}:{settings.http_port} is free")


async def check_slack(settings: Settings) -> Check | None:
    """``auth.test`` with the bot token, its scopes against manifest.yml, and the app token."""
    if settings.slack_bot_token is None:
        return None
    url = settings.slack_api_url
    base = url if url.endswith("/") else url + "/"
    client = AsyncWebClient(
        token=settings.slack_bot_token.get_secret_value(), base_url=base, timeout=15
    )
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
        return Check(
            "slack",
            "FAIL",
            f"The bot token lacks scopes: {', '.join(missing)}.",
            "Update the app from manifest.yml, then reinstall it to the workspace.",
        )
    if settings.slack_app_token is not None:
        app = AsyncWebClient(base_url=base, timeout=15)
        try:
            await app.apps_connections_open(app_token=settings.slack_app_token.get_secret_value())
        except SlackApiError as exc:
            return Check(
                "slack",
                "FAIL",
                f"Slack rejected SLACK_APP_TOKEN ({exc.response.get('error')}).",
                "Create an app-level token (xapp-) with connections:write; enable Socket Mode.",
            )
    return _ok("slack", f"{auth.get('team')} as {auth.get('user')}, scopes match manifest.yml")


async def check_discord(settings: Settings) -> Check | None:
    """The token, the Message Content intent, and /ask and /research registered."""
    if settings.discord_token is None:
        return None
    configure_api(settings)
    client = discord.Client(intents=discord.Intents(guilds=True))  # REST only
    tree: app_commands.CommandTree[discord.Client] = app_commands.CommandTree(client)
    add_commands(tree)
    wanted = {c.name for c in tree.get_commands()}
    async with client:
        try:
            await client.login(bot_token(settings))
        except discord.LoginFailure:
            return Check(
                "discord",
                "FAIL",
                "Discord rejected DISCORD_TOKEN.",
                "Reset the token in the Developer Portal (Bot > Reset Token) and set it.",
            )
        info = await client.application_info()
        flags = info.flags
        if not (flags.gateway_message_content or flags.gateway_message_content_limited):
            return Check(
                "discord",
                "FAIL",
                "The Message Content intent is off.",
                "Developer Portal > Bot > Privileged Gateway Intents: turn on Message Content.",
            )
        guild = discord.Object(settings.discord_guild_id) if settings.discord_guild_id else None
        synced = {c.name for c in await tree.fetch_commands(guild=guild)}
    missing = sorted(wanted - synced)
    if missing:
        command = "quorum discord sync" + (" --global" if guild is None else "")
        return Check(
            "discord",
            "FAIL",
            f"Slash commands not registered: {', '.join('/' + m for m in missing)}.",
            f"Run `{command}`.",
        )
    return _ok("discord", f"logged in as {client.user}, intents and commands in place")


async def _bounded(name: str, check: Awaitable[Check | None]) -> Check | None:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            return await check
    except TimeoutError:
        return Check(name, "FAIL", f"No answer within {CHECK_TIMEOUT_S:g} s.", "Check the network.")


async def run_checks(settings: Settings) -> list[Check]:
    """Every check, in the order an operator fixes things."""
    checks: list[Check | None] = [check_front_ends(settings)]
    slow: list[tuple[str, Callable[[Settings], Awaitable[Check | None]]]] = [
        ("claude", check_claude),
        ("weaviate", check_store),
        ("database", check_database),
        ("slack", check_slack),
        ("discord", check_discord),
    ]
    checks += [check_model(settings), check_disk(settings), check_data(settings)]
    checks.append(check_port(settings))
    checks += [await _bounded(name, fn(settings)) for name, fn in slow]
    return [c for c in checks if c is not None]


def report(checks: list[Check]) -> Table:
    """The table doctor prints."""
    table = Table(title="quorum doctor", show_lines=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    table.add_column("fix", overflow="fold")
    style = {"ok": "green", "warn": "yellow", "FAIL": "bold red"}
    for c in checks:
        table.add_row(c.name, f"[{style[c.status]}]{c.status}[/]", c.detail, c.fix)
    return table


def doctor() -> None:
    """Check settings, Weaviate, the model, the database, Claude, Slack, Discord, disk, and
    say what the data dir holds."""
    try:
        settings = load_settings()
    except QuorumError as exc:
        checks = [
            Check("settings", "FAIL", str(exc), "Fix that variable in the environment or .env.")
        ]
    else:
        checks = [_ok("settings", "loaded"), *asyncio.run(run_checks(settings))]
    escaped = [Check(c.name, c.status, escape(c.detail), escape(c.fix)) for c in checks]
    out.print(report(escaped))
    failed = [c.name for c in checks if c.status == "FAIL"]
    if failed:
        out.print(f"[bold red]{len(failed)} check(s) failed:[/] {', '.join(failed)}.")
        raise typer.Exit(1)
    out.print("[green]Ready to serve.[/]")
