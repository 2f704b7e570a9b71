"""``quorum doctor``: is this Quorum ready to run for a team? One row per check (settings,
what it would serve, the language model (Claude or your own server, and whether it takes
tools), Weaviate, the embedding model, the database, disk, the HTTP port, then one row per
configured chat platform, from its own ``doctor`` module), each failure with the fix, exit 1
when anything fails.

It lives with the adapters because the platforms' rows ask them through their SDKs; every
network check has a deadline, so a dead host costs seconds, not a hang.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

import typer
from rich.markup import escape
from rich.table import Table

from adapters import platform
from adapters.cli.app import out
from adapters.http.auth import parse_tokens
from adapters.platform import Check
from bot.config import Settings, load_settings
from bot.errors import LLMError
from bot.holdings import data_sizes
from bot.llm import NoTools, Tool
from bot.llm import from_settings as llm_from_settings
from bot.sessions import MIGRATIONS
from bot.wiring import open_retrieval, open_session_store
from retrieval.encoding.embed import packaged_model_path
from retrieval.errors import QuorumError

CHECK_TIMEOUT_S = 30.0  # Weaviate may start from cold
MIN_FREE_BYTES = 1 << 30
LOW_FREE_BYTES = 5 << 30
PING_TOOL = Tool("ping", "Answer a ping.", {"type": "object", "properties": {}})


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


async def check_llm(settings: Settings) -> Check:
    """The configured model (Claude or an OpenAI-compatible server) with one request of one
    output token that offers a tool, which also tells whether the model accepts tools."""
    which = settings.llm_backend
    if settings.llm == "none":  # chosen: nothing to fix, and no vendor to name
        return _ok("llm", "Off by choice (QUORUM_LLM=none): answers quote passages.")
    if which is None:
        return Check(
            "llm",
            "warn",
            "No model: answers quote passages instead of being written.",
            "Set ANTHROPIC_API_KEY, or QUORUM_OPENAI_BASE_URL and QUORUM_MODEL for your own "
            "server (Ollama, vLLM, llama.cpp).",
        )
    llm = llm_from_settings(settings)
    assert llm is not None
    llm.timeout_s, llm.max_retries = 15.0, 0
    key_var = "ANTHROPIC_API_KEY" if which == "claude" else "QUORUM_OPENAI_API_KEY"
    url_var = "ANTHROPIC_BASE_URL" if which == "claude" else "QUORUM_OPENAI_BASE_URL"
    tools = "accepts tools"
    try:
        try:
            done = await llm.create(
                system="Reply with one word.",
                messages=[{"role": "user", "content": "ping"}],
                tools=[PING_TOOL],
                max_tokens=1,
            )
        except NoTools:
            tools = "does NOT accept tools: deep research is off, quick answers work"
            done = await llm.complete(
                system="Reply with one word.",
                messages=[{"role": "user", "content": "ping"}],
                max_tokens=1,
            )
    except LLMError as exc:
        if exc.status in (401, 403):
            return Check("llm", "FAIL", f"{which} rejected {key_var}.", "Set a valid key.")
        if exc.status == 404:
            return Check(
                "llm",
                "FAIL",
                f"{which} does not know the model {settings.model!r}.",
                "Set QUORUM_MODEL to a model the server serves.",
            )
        if exc.status is None and "connection" in str(exc):
            return Check(
                "llm", "FAIL", f"Cannot reach {which}.", f"Check the network (or {url_var})."
            )
        return Check("llm", "warn", f"{which}: {exc}", "Try again shortly.")
    finally:
        await llm.aclose()
    return _ok("llm", f"{which}: {done.model} answers and {tools}")


async def check_store(settings: Settings) -> Check:
    """Connect (starting the embedded server if that is the mode), report the version."""
    own = settings.store_settings()  # what its fix names is the store's own to say
    try:
        async with open_retrieval(settings) as r:
            info = await r.store.server_info()
    except QuorumError as exc:
        return Check(settings.store, "FAIL", str(exc), own.fix())
    return _ok(settings.store, f"{own.where(info)}, version {info.version}")


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


async def check_jobs(settings: Settings) -> Check | None:
    """The workers alive and the oldest queued job (None when the database fails: its
    own row says why)."""
    from bot.jobs import JobTable
    from bot.sessions.sql import SqlSessions

    try:
        async with open_session_store(settings) as store:
            assert isinstance(store, SqlSessions)
            table = JobTable(store.driver)
            alive = await table.alive(10.0)
            oldest = await table.oldest_queued()
            counts = await table.counts()
    except (QuorumError, OSError):
        return None
    hosts = sorted({w["host"] for w in alive})
    workers = f"{len(alive)} worker(s) alive" + (f" on {', '.join(hosts)}" if hosts else "")
    if oldest is None:
        return _ok("jobs", f"{workers}; nothing queued ({counts['failed']} failed in all)")
    waited = time.time() - oldest.created_at
    detail = f"{workers}; {counts['queued']} queued, the oldest ({oldest.name}) for {waited:.0f} s"
    if not alive:
        return Check(
            "jobs",
            "warn",
            detail,
            "Start `quorum serve` (QUORUM_SERVE_WORKERS) or `quorum worker`.",
        )
    return _ok("jobs", detail)


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


def check_pages(settings: Settings) -> Check:
    """Page links reach people: QUORUM_PUBLIC_URL is set when chat platforms are."""
    host = (urlsplit(settings.page_url).hostname or "").lower()
    local = host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")
    chat = [p.name for p in platform.platforms() if p.is_configured(settings)]
    if local and chat:
        return Check(
            "pages",
            "warn",
            f"Links in answers point at {settings.page_url}, which only this machine can open "
            f"({', '.join(chat)} users cannot).",
            "Set QUORUM_PUBLIC_URL to the address people reach this server at "
            "(https://quorum.example.com).",
        )
    days = f"{settings.link_ttl_days:g}"
    return _ok("pages", f"links open at {settings.page_url}/v/..., valid {days} days")


async def run_checks(settings: Settings) -> list[Check]:
    """Every check, in the order an operator fixes things."""
    checks: list[Check | None] = [check_front_ends(settings)]
    slow: list[tuple[str, Callable[[Settings], Awaitable[Check | None]]]] = [
        ("llm", check_llm),
        (settings.store, check_store),
        ("database", check_database),
        ("jobs", check_jobs),
    ]
    slow += [(p.name, p.check) for p in platform.platforms()]
    checks += [check_model(settings), check_disk(settings), check_data(settings)]
    checks.append(check_port(settings))
    checks.append(check_pages(settings))
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
    """Check settings, Weaviate, the models, the database, each chat platform, disk, and
    say what the data dir holds."""
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
