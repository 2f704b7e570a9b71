"""How ``quorum serve`` starts and stops.

Start: the HTTP server first (``/healthz`` alive, ``/readyz`` 503), then the core
(Weaviate ready, the database migrated), then the embedding model loaded and warmed,
and only then the platforms connect, so the first question is answered as fast as any
later one. ``/readyz`` turns green when every platform is connected.

With ``QUORUM_RETAIN_*`` (or ``QUORUM_MEDIA_RETAIN_DAYS``) set, retention runs once the core
is up and then daily.

Stop (SIGTERM or SIGINT, also when started in the background where SIGINT is ignored):
``/readyz`` turns 503, each platform stops taking events, answers in flight get half of
``QUORUM_SHUTDOWN_S`` to finish and are then ended with one line in their thread (an
API client gets a final SSE ``error`` event or a JSON 503 saying to ask again), the
clients close, an embedded Weaviate this process started is stopped unless another
process still uses it, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from adapters.http.server import OpsServer
from adapters.platform import Platform, Runner
from adapters.workers import Workers
from bot.config import Settings
from bot.metrics import MeteredCore, Metrics
from bot.retention import daily
from bot.wiring import CoreServices, open_core, retain
from retrieval.errors import QuorumError
from retrieval.models import LEVELS, SearchFilters

log = logging.getLogger("quorum.serve")

WARM_UP_QUERY = "warm up"
# Routed to windows, topics and turns (an overview and a remark at once): every collection.
WARM_UP_QUESTION = "Who talked about the main points of the plan?"
WARM_KBS = 50  # knowledge bases warmed before /readyz; the others' first question pays


async def serve_until_stopped(settings: Settings, platforms: Sequence[Platform[Any]]) -> None:
    """Run the HTTP server and ``platforms`` until SIGTERM/SIGINT; returns after a clean
    stop. A platform that fails (a rejected token) stops everything and raises. A
    platform whose events arrive over HTTP takes them on the server's port."""
    loop = asyncio.get_running_loop()
    hooks = {p.name: path for p in platforms if (path := p.webhook_path(settings))}
    server = OpsServer(settings, hooks.values())
    runners: dict[str, Runner] = {
        p.name: partial(p.run, webhook=server.webhooks.get(hooks.get(p.name, "")))
        for p in platforms
    }
    main = asyncio.create_task(_serve(settings, server, runners), name="quorum-serve")
    signals = (signal.SIGTERM, signal.SIGINT)

    def stop(name: str) -> None:
        if server.readiness.stopping:
            return
        log.warning("%s: finishing answers in flight, then stopping", name)
        server.readiness.stopping = True
        main.cancel()

    for sig in signals:
        loop.add_signal_handler(sig, stop, sig.name)
    try:
        await main
    except asyncio.CancelledError:
        if not server.readiness.stopping:
            raise
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        await server.stop()
    log.warning("Quorum stopped")


async def _serve(settings: Settings, server: OpsServer, platforms: dict[str, Runner]) -> None:
    port = await server.start()
    log.warning("Quorum's HTTP server is on port %d (/healthz, /readyz, /metrics, /api)", port)
    for name in platforms:
        server.readiness.set(name, "not connected")
    # Jobs run in worker processes of their own (adapters.workers); with none here, on
    # SQLite, an upload is run by the bot itself, as before jobs.
    inline = settings.serve_workers == 0 and settings.database_url is None
    workers = Workers(settings.serve_workers) if settings.serve_workers else None
    async with open_core(settings, inline_jobs=inline) as services:
        from adapters.chat.announce import announcer  # the platforms' posters, by name

        if workers is not None:
            workers.start()

        services.writer.add_announcer(announcer(settings, services.retrieval.search))
        metrics = Metrics(services.llm)
        counting = asyncio.create_task(metrics.jobs().watch(services.jobs.table))
        core = MeteredCore(services.engine, metrics)
        server.attach(services, core, metrics)
        await _warm_up(services)
        server.readiness.set("model", None)

        def connected(name: str) -> Callable[[], None]:
            return lambda: server.readiness.set(name, None)

        tasks = [
            asyncio.create_task(run(core, settings, connected(name)), name=f"quorum-{name}")
            for name, run in platforms.items()
        ]
        keeper = None
        if (days := retain(settings)).any:  # QUORUM_RETAIN_*: now, then once a day
            keeper = asyncio.create_task(daily(services.holdings, days), name="quorum-retention")
        if not tasks:
            log.warning("Quorum is ready: no platform is configured, serving the API alone")
        try:
            await asyncio.gather(*tasks) if tasks else await _forever()
        finally:
            for task in [*tasks, *([keeper] if keeper else []), counting]:
                task.cancel()
            # API requests in flight finish beside the platforms' answers, while the
            # core they need is still open.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.gather(
                    server.stop(),
                    *tasks,
                    *([workers.stop()] if workers else []),
                    return_exceptions=True,
                )


async def _warm_up(services: CoreServices) -> None:
    """Load the model and run each path a question takes once, so the first question pays
    nothing extra: a query, batches of sentences as long as the model reads (ONNX Runtime
    sizes its memory for the largest batch it has seen: short texts alone left the first
    answer 0.5 s slower); then, for every knowledge base this process may serve
    (``served_kbs``), its source list, its stems check and a search of every level over
    gRPC; and one whole extractive answer, stored nowhere (``Engine.warm``): names and
    dates read, passages widened, sentences encoded and scored, citations aligned."""
    embedder = services.retrieval.embedder
    await embedder.get()
    await embedder.embed_query(WARM_UP_QUERY)
    await embedder.embed_documents([WARM_UP_QUERY] * 8)
    await embedder.embed_documents([" ".join([WARM_UP_QUERY] * 60)] * 32)
    search = services.retrieval.search
    kbs = await served_kbs(services)
    every_level = SearchFilters(levels=LEVELS)
    for kb in kbs:
        with contextlib.suppress(QuorumError):  # an empty knowledge base is fine
            await search.sources(kb)
            await search.search(kb, WARM_UP_QUERY, every_level, k=8)
    for kb in kbs[:1]:
        try:
            await services.engine.warm(kb, WARM_UP_QUESTION)
        except Exception:  # a warm-up that fails costs the first question time, no more
            log.warning("warming up the answer path failed", exc_info=True)


async def served_kbs(services: CoreServices) -> list[str]:
    """The knowledge bases to warm up: the default one first, then every other one the
    store holds, at most ``WARM_KBS`` (names only: an empty store gives the default)."""
    default = services.settings.default_kb
    try:
        stored = await services.retrieval.store.knowledge_bases()
    except QuorumError:
        stored = []
    held = [default] if default in stored or not stored else []
    return (held + [kb for kb in stored if kb != default])[:WARM_KBS]


async def _forever() -> None:
    await asyncio.get_running_loop().create_future()
