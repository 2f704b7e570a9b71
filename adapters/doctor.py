"""``quorum doctor``: is this Quorum ready to run for a team? One row per check (settings,
what it would serve, Claude, Weaviate, the model, the database, disk, the HTTP port, then
one row per configured chat platform, from its own ``doctor`` module), each failure with
the fix, exit 1 when anything fails.

It lives with the adapters because the platforms' rows ask them through their SDKs; every
network check has a deadline, so a dead host costs seconds, not a hang.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

import anthropic
import typer
from rich.markup import escape
from rich.table import Table

from adapters import platform
from adapters.cli.app import out
from adapters.http.api import parse_tokens
from bot.config import Settings, load_settings
from bot.holdings import data_sizes
from bot.sessions import MIGRATIONS
from bot.wiring import open_retrieval, open_session_store
from retrieval.embed import packaged_model_path
from retrieval.errors import QuorumError
from retrieval.links import redact_url

Status = Literal["ok", "warn", "FAIL"]
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


def check_front_ends(settings: Settings) -> Check:
    """Something to serve: a chat platform or the JSON API."""
    try:
        tokens = parse_tokens(settings.api_tokens)
    except QuorumError as exc:
        return Check("serves", "FAIL", str(exc), "Fix QUORUM_API_TOKENS (token1:kb1,token2:kb2).")
    chats = platform.platforms()
    served = [p.name for p in chats if p.is_configured(settings)]
    served += ["the JSON API"] if tokens else []
    if not served:
        return Check(
            "serves",
            "FAIL",
            f"Nothing to serve: no chat platform ({', '.join(p.name for p in chats)}) "
            "or API token is set.",
            "Set "
            + ", and/or ".join([p.needs for p in chats] + ["QUORUM_API_TOKENS=token:kb"])
            + ".",
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
    ]
    slow += [(p.name, p.check) for p in platform.platforms()]
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
    """Check settings, Weaviate, the model, the database, Claude, each chat platform, disk,
    and say what the data dir holds."""
    try:
        settings = load_settings()
        for chat in platform.platforms():
            chat.own(settings)  # a bad platform variable fails here, named
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
