"""What ``/metrics`` shows: Prometheus counters and histograms about questions, answers,
the model and errors, kept in one registry per running core (no module-level state).

``MeteredCore`` wraps the engine behind the ``Core`` protocol, so every front end (each chat
platform, the JSON API) is counted the same way without knowing about metrics:

    adapter --Question--> MeteredCore --> Engine
                              |
                              +--> questions{platform,mode,outcome}, answer_seconds{stage},
                                   dedupe hits, errors{kind}, in flight, active sessions

The model's tokens, retries and errors (per backend: claude, openai) are read from the
``Model`` at scrape time.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from bot.connectors.status import ConnectorStatus, ConnectorStatuses
from bot.engine import BROKEN, SEARCH_DOWN
from bot.jobs.table import JobTable
from bot.llm import Model
from bot.models import (
    Actor,
    Added,
    Answer,
    Core,
    EventSink,
    Heard,
    Library,
    Naming,
    Question,
    ThreadKey,
    Waiting,
)
from retrieval.models import SourceInfo

log = logging.getLogger("quorum.metrics")

ACTIVE_WINDOW_S = 15 * 60.0  # a session is active while it had a question this recently
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0)
# Timing keys of an Answer (ms) per stage; deep research reports its archive time.
STAGES = {"search": ("search", "archive"), "llm": ("llm",), "total": ("total",)}


def error_kind(answer: Answer) -> str:
    """Why an answer of kind "error" failed, from the sentence the engine chose."""
    if answer.text == SEARCH_DOWN:
        return "search_unavailable"
    if answer.text == BROKEN:
        return "internal"
    return "invalid_input"


class _ModelCollector(Collector):
    """The model's cumulative tokens, retries and errors, read when scraped."""

    def __init__(self, llm: Model) -> None:
        self.llm = llm

    def collect(self) -> Iterator[CounterMetricFamily]:
        backend = self.llm.name
        tokens = CounterMetricFamily(
            "quorum_llm_tokens",
            "Model tokens spent, by backend and kind.",
            labels=["backend", "kind"],
        )
        u = self.llm.usage
        tokens.add_metric([backend, "input"], u.input_tokens)
        tokens.add_metric([backend, "output"], u.output_tokens)
        tokens.add_metric([backend, "cache_read"], u.cache_read_input_tokens)
        tokens.add_metric([backend, "cache_write"], u.cache_creation_input_tokens)
        yield tokens
        retries = CounterMetricFamily(
            "quorum_llm_retries", "Model requests sent again, by backend.", labels=["backend"]
        )
        retries.add_metric([backend], self.llm.retries)
        yield retries
        errors = CounterMetricFamily(
            "quorum_llm_errors", "Model calls that failed for good, by backend.", labels=["backend"]
        )
        errors.add_metric([backend], self.llm.errors)
        yield errors


JOB_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)
JOBS_EVERY_S = 5.0  # the jobs' figures are read from the database this often


class ConnectorMetrics(Collector):
    """Each connector's status row (``bot.connectors``) as metrics: its counts (counters),
    last and next run (timestamps) and whether its last run failed."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.statuses: list[ConnectorStatus] = []
        r.register(self)

    def show(self, statuses: list[ConnectorStatus]) -> None:
        """The statuses the next scrape reports."""
        self.statuses = statuses

    def collect(self) -> Iterator[Metric]:
        labels = ["connector", "kind", "kb"]
        items = CounterMetricFamily(
            "quorum_connector_items",
            "Items a connector has seen, queued, failed and forgotten, by event.",
            labels=[*labels, "event"],
        )
        last = GaugeMetricFamily(
            "quorum_connector_last_run_timestamp_seconds",
            "When a connector last ran (Unix seconds).",
            labels=labels,
        )
        nxt = GaugeMetricFamily(
            "quorum_connector_next_run_timestamp_seconds",
            "When a connector runs next (Unix seconds).",
            labels=labels,
        )
        broken = GaugeMetricFamily(
            "quorum_connector_error", "1 while a connector's last run failed.", labels=labels
        )
        for s in self.statuses:
            who = [s.name, s.kind, s.kb]
            for event, n in s.counts.as_dict().items():
                items.add_metric([*who, event], n)
            if s.last_run is not None:
                last.add_metric(who, s.last_run)
            if s.next_run is not None:
                nxt.add_metric(who, s.next_run)
            broken.add_metric(who, 1.0 if s.last_error else 0.0)
        yield from (items, last, nxt, broken)


class JobMetrics:
    """Jobs by state, the queue's depth per lane and job seconds by kind, read from the
    shared jobs table, so every replica reports the whole queue (what an autoscaler of
    workers scales on)."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.by_state = Gauge("quorum_jobs", "Ingest jobs, by state.", ["state"], registry=r)
        self.depth = Gauge(
            "quorum_jobs_queued", "Jobs waiting for a worker, by lane.", ["lane"], registry=r
        )
        self.oldest = Gauge(
            "quorum_jobs_oldest_queued_seconds", "How long the oldest queued job waits.", registry=r
        )
        self.workers = Gauge("quorum_workers", "Workers seen in the last 10 seconds.", registry=r)
        self.seconds = Histogram(
            "quorum_job_seconds",
            "Seconds a finished job ran, by kind.",
            ["kind"],
            buckets=JOB_BUCKETS,
            registry=r,
        )
        self.since = time.time()
        self.connectors = ConnectorMetrics(r)

    async def read(self, table: JobTable) -> None:
        """Read the figures once."""
        for state, n in (await table.counts()).items():
            self.by_state.labels(state).set(n)
        rows = await table.driver.fetch(
            "SELECT lane, COUNT(*) AS n FROM jobs WHERE state = 'queued' GROUP BY lane"
        )
        depth = {r["lane"]: int(r["n"]) for r in rows}
        for lane in ("transcribe", "write"):
            self.depth.labels(lane).set(depth.get(lane, 0))
        oldest = await table.oldest_queued()
        self.oldest.set(time.time() - oldest.created_at if oldest else 0.0)
        self.workers.set(len(await table.alive(10.0)))
        now = time.time()
        for kind, seconds in (await table.seconds_by_kind(self.since)).items():
            for s in seconds:
                self.seconds.labels(kind).observe(s)
        self.since = now
        self.connectors.show(await ConnectorStatuses(table.driver).all())

    async def watch(self, table: JobTable, every_s: float = JOBS_EVERY_S) -> None:
        """Read the figures every ``every_s`` until cancelled."""
        while True:
            try:
                await self.read(table)
            except Exception:  # the database blinked: the next read tries again
                log.warning("reading the jobs' metrics failed", exc_info=True)
            await asyncio.sleep(every_s)


class Metrics:
    """Every metric a running Quorum exposes, in its own registry."""

    def __init__(self, llm: Model | None = None) -> None:
        self.registry = r = CollectorRegistry()
        self.questions = Counter(
            "quorum_questions",
            "Questions answered, by platform, mode and outcome (the answer's kind).",
            ["platform", "mode", "outcome"],
            registry=r,
        )
        self.latency = Histogram(
            "quorum_answer_seconds",
            "Answer latency by stage: search, llm (the model), total.",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.dedupe_hits = Counter(
            "quorum_dedupe_hits", "Redelivered events dropped.", ["platform"], registry=r
        )
        self.errors = Counter("quorum_errors", "Errors, by kind.", ["kind"], registry=r)
        self.ingest_segments = Counter(
            "quorum_ingest_segments", "Segments ingested from chat uploads.", registry=r
        )
        self.ingest_files = Counter(
            "quorum_ingest_files", "Files uploaded in chat, by outcome.", ["status"], registry=r
        )
        self.in_flight = Gauge(
            "quorum_questions_in_flight", "Questions being answered.", registry=r
        )
        self._seen: dict[ThreadKey, float] = {}
        Gauge(
            "quorum_active_sessions",
            f"Threads with a question in the last {ACTIVE_WINDOW_S / 60:.0f} minutes.",
            registry=r,
        ).set_function(self._active_sessions)
        self._jobs: JobMetrics | None = None
        self.backend = None if llm is None else llm.name
        if llm is not None:
            r.register(_ModelCollector(llm))

    def _active_sessions(self) -> float:
        cutoff = time.monotonic() - ACTIVE_WINDOW_S
        for key in [k for k, t in self._seen.items() if t < cutoff]:
            del self._seen[key]
        return float(len(self._seen))

    def answered(self, question: Question, answer: Answer) -> None:
        """Count an answer and observe its timings."""
        self._seen[question.thread] = time.monotonic()
        self.questions.labels(question.thread.platform, answer.mode, answer.kind).inc()
        for stage, keys in STAGES.items():
            ms = next((answer.timings[k] for k in keys if k in answer.timings), None)
            if ms is not None:
                self.latency.labels(stage).observe(ms / 1000)
        if answer.kind == "error":
            self.errors.labels(error_kind(answer)).inc()
        elif answer.kind == "extractive" and self.backend is not None:
            self.errors.labels(self.backend).inc()  # the model failed: the answer fell back

    def jobs(self) -> JobMetrics:
        """The ingest jobs' metrics, in this registry (``JobMetrics.watch`` fills them)."""
        if self._jobs is None:
            self._jobs = JobMetrics(self.registry)
        return self._jobs

    def render(self) -> tuple[bytes, str]:
        """The exposition text and its content type."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class MeteredCore:
    """A ``Core`` that counts what passes through it; everything else is the engine's."""

    def __init__(self, core: Core, metrics: Metrics) -> None:
        self.core = core
        self.metrics = metrics
        self.library: Library | None = (
            None if core.library is None else MeteredLibrary(core.library, metrics)
        )

    async def ask(self, question: Question, on_event: EventSink | None = None) -> Answer:
        """The engine's answer, counted."""
        m = self.metrics
        m.in_flight.inc()
        try:
            answer = await self.core.ask(question, on_event)
        except asyncio.CancelledError:
            m.questions.labels(question.thread.platform, question.mode, "cancelled").inc()
            raise
        except Exception:
            m.errors.labels("exception").inc()
            raise
        finally:
            m.in_flight.dec()
        m.answered(question, answer)
        return answer

    async def claim_event(self, platform: str, event_id: str) -> bool:
        """The engine's claim; a redelivery counts as a dedupe hit."""
        first = await self.core.claim_event(platform, event_id)
        if not first:
            self.metrics.dedupe_hits.labels(platform).inc()
        return first

    async def is_active_thread(self, thread: ThreadKey) -> bool:
        """The engine's answer."""
        return await self.core.is_active_thread(thread)

    async def record_feedback(self, exchange_id: int, user: str, value: int) -> None:
        """The engine's feedback store."""
        await self.core.record_feedback(exchange_id, user, value)

    async def reset(self, thread: ThreadKey) -> None:
        """The engine's reset."""
        await self.core.reset(thread)

    async def speakers(self, kb: str) -> list[str]:
        """The engine's speakers."""
        return await self.core.speakers(kb)

    async def source_titles(self, kb: str) -> list[str]:
        """The engine's source titles."""
        return await self.core.source_titles(kb)


class MeteredLibrary:
    """A ``Library`` whose uploads are counted (files by outcome, segments ingested)."""

    def __init__(self, library: Library, metrics: Metrics) -> None:
        self.inner, self.metrics = library, metrics

    def inbox(self, kb: str) -> Path:
        """The inner library's inbox."""
        return self.inner.inbox(kb)

    async def add(
        self,
        kb: str,
        path: Path,
        heard: Heard | None = None,
        by: Actor | None = None,
        waiting: Waiting | None = None,
        speakers: int | None = None,
    ) -> Added:
        """The inner library's add, counted."""
        added = await self.inner.add(kb, path, heard, by, waiting, speakers)
        self.metrics.ingest_files.labels(added.status).inc()
        self.metrics.ingest_segments.inc(added.segments)
        return added

    async def sources(self, kb: str) -> list[SourceInfo]:
        """The inner library's sources."""
        return await self.inner.sources(kb)

    async def forget(self, kb: str, source_id: str, by: Actor | None = None) -> int:
        """The inner library's forget."""
        return await self.inner.forget(kb, source_id, by)

    @property
    def speakers(self) -> Naming:
        """The inner library's speakers."""
        return self.inner.speakers
