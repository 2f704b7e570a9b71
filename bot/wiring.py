"""The composition root: builds the retrieval layer (``retrieval.service``: the store, the
embedder, the search service), the session store, Claude and the engine from settings,
inside one AsyncExitStack.

Nothing else in Quorum constructs a client; every command and adapter receives these.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.config import Settings
from bot.sessions import Sessions, open_sessions
from retrieval import service as retrieval_service
from retrieval.service import Retrieval, RetrievalConfig
from retrieval.write.chunking import ChunkConfig

if TYPE_CHECKING:
    from bot.engine import Engine, ResearchHook
    from bot.holdings import Holdings
    from bot.jobs import JobQueue, Limits
    from bot.llm import Model
    from bot.retention import Retain
    from bot.speakers import Speakers
    from bot.summaries import ModelSummarizer
    from bot.write import Writer

__all__ = [
    "CoreServices",
    "boot_store",
    "Retrieval",
    "holdings_of",
    "open_core",
    "open_holdings",
    "open_job_queue",
    "open_jobs",
    "job_limits",
    "open_retrieval",
    "retain",
    "open_session_store",
    "retrieval_config",
    "speakers_of",
    "writer_of",
]


def retrieval_config(settings: Settings, *, one_shot: bool = False) -> RetrievalConfig:
    """The retrieval layer's settings, as plain values; ``one_shot`` for a command that
    exits after one job (``RetrievalConfig.one_shot``)."""
    s = settings
    return RetrievalConfig(
        data_dir=s.data_dir,
        store=s.store_settings(),
        embed_model_path=s.embed_model_path,
        embed_batch_size=s.embed_batch_size,
        embed_backend=s.embed_backend,
        embed_onnx_path=s.embed_onnx_path,
        rerank_model_path=s.rerank_model_path,
        hybrid_alpha=s.hybrid_alpha,
        whisper_model=s.whisper_model,
        public_url=s.page_url,
        link_secret=s.link_secret.get_secret_value() if s.link_secret else None,
        link_ttl_days=s.link_ttl_days,
        one_shot=one_shot,
        media_max_bytes=s.media_max_mb * 1024 * 1024 if s.media_max_mb else None,
        media_retain_days=s.media_retain_days,
        diarize=s.diarize != "off",
        speaker_onnx_path=s.speaker_onnx_path,
        voices=s.voices,
        chunking=ChunkConfig(
            max_seconds=s.chunk_seconds,
            overlap_seconds=s.chunk_overlap_seconds,
            max_chars=s.chunk_chars,
            overlap_chars=s.chunk_overlap_chars,
        ),
    )


def boot_store(settings: Settings) -> None:
    """Start the store's embedded server booting before a one-shot command has parsed
    its arguments: most of a cold `quorum search` is that boot."""
    retrieval_service.boot(retrieval_config(settings, one_shot=True))


def open_retrieval(
    settings: Settings, *, warm: bool = False, one_shot: bool = False
) -> contextlib.AbstractAsyncContextManager[Retrieval]:
    """Start or reach the store and hand out the retrieval services (``retrieval.service``)."""
    config = retrieval_config(settings, one_shot=one_shot)
    return retrieval_service.open_retrieval(config, warm=warm)


def open_session_store(settings: Settings) -> contextlib.AbstractAsyncContextManager[Sessions]:
    """PostgreSQL when QUORUM_DATABASE_URL is set, else the SQLite file in the data folder."""
    url = settings.database_url.get_secret_value() if settings.database_url else None
    return open_sessions(url, settings.sessions_path, settings.keep_answers)


def holdings_of(settings: Settings, retrieval: Retrieval, sessions: Sessions) -> Holdings:
    """What Quorum holds per source, over running retrieval and sessions."""
    from bot.holdings import Holdings, forget_voices  # the transcriber's NumPy: not before a boot
    from bot.sessions.sql import SqlSessions
    from bot.voices import Voices, forget_named

    holdings = Holdings(
        store=retrieval.store,
        search=retrieval.search,
        sessions=sessions,
        data_dir=settings.data_dir,
        transcriber=retrieval.transcriber,
        media=retrieval.media,
    )
    holdings.add_hook(forget_voices(retrieval.voiceprints))
    holdings.add_hook(forget_named(Voices(retrieval.voiceprints)))
    if isinstance(sessions, SqlSessions):  # what connectors and jobs keep name its file
        from bot.connectors.forget import forget_connectors
        from bot.connectors.items import forget_key
        from bot.connectors.zoom_fetch import ZoomRecordings
        from bot.jobs.table import JobTable

        holdings.add_hook(ZoomRecordings(sessions).forget)
        # Before the jobs': the connectors' items are found by their jobs' source.
        holdings.add_hook(forget_connectors(sessions.driver, forget_key(settings)))
        holdings.add_hook(JobTable(sessions.driver).forget)
    return holdings


@contextlib.asynccontextmanager
async def open_holdings(settings: Settings, *, one_shot: bool = False) -> AsyncIterator[Holdings]:
    """Retrieval and the session store, for commands that list, audit or remove sources."""
    async with (
        open_retrieval(settings, one_shot=one_shot) as retrieval,
        open_session_store(settings) as sessions,
    ):
        yield holdings_of(settings, retrieval, sessions)


def writer_of(
    settings: Settings,
    retrieval: Retrieval,
    holdings: Holdings | None,
    summarizer: ModelSummarizer | None = None,
) -> Writer:
    """The one write path (``bot.write``) over running retrieval: the model's summaries
    when ``summarizer`` is given, the media store's copies, the audit trail."""
    from bot.connectors.settings import ConnectorSettings
    from bot.write import Writer  # the indexer and its readers: only for a command that writes

    writer = Writer.of(retrieval, holdings=holdings, summarizer=summarizer)
    own = settings.platform(ConnectorSettings)
    if own.s3_url:  # a bucket's objects are downloaded by the job that ingests them
        from bot.connectors.s3 import fetcher

        writer.add_fetcher("s3", fetcher(own, settings.data_dir / "connectors" / "s3"))
    if holdings is not None:  # a Zoom recording is downloaded by the job that ingests it
        from bot.connectors.zoom_fetch import SCHEME, ZoomFetcher

        zoom = ZoomFetcher(settings, holdings.sessions)
        writer.add_fetcher(SCHEME, zoom)
    return writer


def speakers_of(retrieval: Retrieval, writer: Writer) -> Speakers:
    """Speakers listed, named and merged through ``writer``; voices remembered with
    ``QUORUM_VOICES=on``."""
    from bot.speakers import Speakers
    from bot.voices import Voices

    return Speakers(writer=writer, search=retrieval.search, voices=Voices(retrieval.voiceprints))


def job_limits(settings: Settings) -> Limits:
    """How jobs are kept alive and retried, from settings."""
    from bot.jobs import Limits  # the jobs package: only for commands that run jobs

    return Limits(settings.job_timeout_s, settings.job_attempts)


@contextlib.asynccontextmanager
async def open_job_queue(
    settings: Settings, sessions: Sessions, writer: Writer | None, *, inline: bool = True
) -> AsyncIterator[JobQueue]:
    """The job queue in the session database (on PostgreSQL, with PgQueuer delivering to
    workers on any machine). With ``writer`` and ``inline`` a door runs its own jobs when
    no worker is alive."""
    # jobs and the SQL store: only for commands that run jobs
    from bot.jobs import JobQueue, JobTable
    from bot.sessions.sql import SqlSessions

    if not isinstance(sessions, SqlSessions):
        raise TypeError("jobs live in the SQL session store")
    table = JobTable(sessions.driver)
    limits = job_limits(settings)
    url = settings.database_url.get_secret_value() if settings.database_url else None
    if url is None:
        yield JobQueue(table, writer=writer, limits=limits, inline=inline)
        return
    from bot.jobs.pgqueue import delivery  # PgQueuer: only on PostgreSQL

    async with delivery(url) as pg:
        yield JobQueue(table, pg, writer=writer, limits=limits, inline=inline)


@contextlib.asynccontextmanager
async def open_jobs(
    settings: Settings, *, one_shot: bool = False, warm: bool = True
) -> AsyncIterator[tuple[Writer, JobQueue, Sessions]]:
    """The write path and the job queue, for a command that adds or removes sources,
    or runs jobs (``quorum worker``)."""
    from bot.summaries import model_summarizer  # a model's SDK: not before the store has booted

    async with (
        open_retrieval(settings, warm=warm, one_shot=one_shot) as retrieval,
        open_session_store(settings) as sessions,
        model_summarizer(settings) as summarizer,
    ):
        holdings = holdings_of(settings, retrieval, sessions)
        writer = writer_of(settings, retrieval, holdings, summarizer)
        async with open_job_queue(settings, sessions, writer) as queue:
            yield writer, queue, sessions


def retain(settings: Settings) -> Retain:
    """The retention settings, as plain values."""
    from bot.retention import Retain  # retention's SQL and file walks: only when asked

    return Retain(
        settings.retain_sources_days,
        settings.retain_transcripts_days,
        settings.retain_queries_days,
        settings.media_retain_days,
    )


@dataclass
class CoreServices:
    """The running core: the engine adapters call, and the parts it was built from."""

    settings: Settings
    retrieval: Retrieval
    sessions: Sessions
    llm: Model | None
    engine: Engine
    holdings: Holdings
    writer: Writer
    jobs: JobQueue


@contextlib.asynccontextmanager
async def open_core(
    settings: Settings,
    *,
    retrieval: Retrieval | None = None,
    research: ResearchHook | None = None,
    one_shot: bool = False,
    inline_jobs: bool = True,
) -> AsyncIterator[CoreServices]:
    """Retrieval (or the one given, left open), the session store, Claude (None without an
    API key: answers are then extractive), the research router (quick or deep per question),
    the job queue and the engine, closed in reverse on exit. ``inline_jobs``: an upload no
    live worker would take runs in this process (off in ``quorum serve``, whose workers
    are processes of their own)."""
    # Imported here: Claude's SDK and the engine cost seconds that `quorum search` and
    # `quorum ingest`, which open retrieval alone, should not pay.
    from bot.cite.vectors import SentenceVectors
    from bot.engine import Engine
    from bot.library import KbLibrary
    from bot.llm import from_settings as model_from_settings
    from bot.router import ResearchRouter
    from bot.summaries import ModelSummarizer

    async with contextlib.AsyncExitStack() as stack:
        if retrieval is None:
            opened = open_retrieval(settings, warm=True, one_shot=one_shot)
            retrieval = await stack.enter_async_context(opened)
        sessions = await stack.enter_async_context(open_session_store(settings))
        llm = model_from_settings(settings)
        if llm is not None:
            stack.push_async_callback(llm.aclose)
        vectors = SentenceVectors(retrieval.embedder)  # shared: quick answers warm it
        holdings = holdings_of(settings, retrieval, sessions)
        summarizer = ModelSummarizer(llm, settings.llm_timeout_s) if llm is not None else None
        writer = writer_of(settings, retrieval, holdings, summarizer)
        queue = open_job_queue(settings, sessions, writer, inline=inline_jobs)
        jobs = await stack.enter_async_context(queue)
        engine = Engine.from_settings(
            settings,
            archives=retrieval.search.archive,
            sessions=sessions,
            llm=llm,
            research=research or ResearchRouter.from_settings(settings, llm, vectors),
            embedder=vectors,
            library=KbLibrary.of(retrieval, holdings=holdings, writer=writer, jobs=jobs),
        )
        yield CoreServices(settings, retrieval, sessions, llm, engine, holdings, writer, jobs)
