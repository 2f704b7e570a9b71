"""Retention: how long Quorum keeps sources, the transcripts cache and the questions it
was asked (``QUORUM_RETAIN_SOURCES_DAYS``, ``..._TRANSCRIPTS_DAYS``, ``..._QUERIES_DAYS``;
unset keeps them for ever), and what pages serve (``QUORUM_MEDIA_RETAIN_DAYS``). ``plan``
says what has outlived its days, ``apply`` deletes it: an expired source is forgotten
whole (``Holdings.forget``, written to the audit trail as expired), a kept transcript older
than its days is deleted (a later ingest of the same audio transcribes it again), so is a
kept recording or document (its page then shows the text only), and older questions go
with their answers, feedback and searches. ``quorum retention`` and ``quorum serve`` (once
a day) run it."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from bot.holdings import Holdings, unlink
from bot.sessions import Actor

log = logging.getLogger("quorum.retention")

DAY_S = 86_400.0
RETENTION = Actor("retention")


@dataclass(frozen=True)
class Retain:
    """Days to keep each kind of data; None keeps it."""

    sources_days: int | None = None
    transcripts_days: int | None = None
    queries_days: int | None = None
    media_days: int | None = None  # what pages serve, in the media store

    @property
    def any(self) -> bool:
        """True when something has a limit."""
        return any(d is not None for d in vars(self).values())


@dataclass(frozen=True)
class ExpiredSource:
    """A source older than its days."""

    kb: str
    source_id: str
    title: str
    age_days: float


@dataclass
class Plan:
    """What retention deletes (or would)."""

    sources: list[ExpiredSource] = field(default_factory=list)
    transcripts: list[tuple[Path, float]] = field(default_factory=list)  # file, age in days
    media: list[tuple[Path, float]] = field(default_factory=list)  # kept for pages, age in days
    questions: int = 0
    searches: int = 0
    undated: int = 0  # sources with no known add time: kept
    applied: bool = False

    def totals(self) -> str:
        """One line of how much went (or would)."""
        verb = "Deleted" if self.applied else "Would delete"
        return (
            f"{verb} {len(self.sources)} source(s), {len(self.transcripts)} kept transcript(s), "
            + (f"{len(self.media)} kept page file(s), " if self.media else "")
            + f"{self.questions} question(s) and {self.searches} search(es)."
        )

    def lines(self) -> list[str]:
        """What it says, one line a deletion, then the totals."""
        verb = "Deleted" if self.applied else "Would delete"
        out = [
            f"{verb} source {s.kb}/{s.source_id} ({s.title}), added {s.age_days:.0f} days ago"
            for s in self.sources
        ]
        out += [
            f"{verb} kept transcript {f.name}, {age:.0f} days old" for f, age in self.transcripts
        ]
        out += [f"{verb} kept media {f.name}, {age:.0f} days old" for f, age in self.media]
        out.append(self.totals())
        if self.undated:
            out.append(
                f"{self.undated} source(s) have no known add time and are kept; "
                "`quorum remove` removes one."
            )
        return out


async def _expired_sources(
    holdings: Holdings, days: int, now: float
) -> tuple[list[ExpiredSource], int]:
    expired: list[ExpiredSource] = []
    undated = 0
    for kb in await holdings.store.knowledge_bases():
        added = await holdings.sessions.added(kb)
        for info in await holdings.store.list_sources(kb):
            entry = added.get(info.source.id)
            # The audit trail's date, else (added before it existed) when it was indexed.
            at = entry.at if entry is not None else info.indexed_at
            if at is None:
                undated += 1
            elif now - at > days * DAY_S:
                age = (now - at) / DAY_S
                expired.append(ExpiredSource(kb, info.source.id, info.source.title, age))
    return expired, undated


def _old_transcripts(holdings: Holdings, days: int, now: float) -> list[tuple[Path, float]]:
    old: list[tuple[Path, float]] = []
    for files in holdings.transcriber.kept().values():
        for file in files:
            try:
                age = now - file.stat().st_mtime
            except OSError:
                continue
            if age > days * DAY_S:
                old.append((file, age / DAY_S))
    return sorted(old)


async def plan(holdings: Holdings, retain: Retain, apply: bool = False) -> Plan:
    """What has outlived its days; deleted too when ``apply``."""
    now = time.time()
    out = Plan(applied=apply)
    if retain.sources_days is not None:
        out.sources, out.undated = await _expired_sources(holdings, retain.sources_days, now)
        if apply:
            for s in out.sources:
                await holdings.forget(s.kb, s.source_id, RETENTION, action="expired", purge=False)
            await holdings.purge([s.kb for s in out.sources])  # one rebuild per knowledge base
    if retain.transcripts_days is not None:
        out.transcripts = await asyncio.to_thread(
            _old_transcripts, holdings, retain.transcripts_days, now
        )
        if apply:
            await asyncio.to_thread(unlink, [f for f, _ in out.transcripts])
    if retain.media_days is not None:
        out.media = await asyncio.to_thread(holdings.media.expired, retain.media_days, now)
        if apply:
            await asyncio.to_thread(unlink, [f for f, _ in out.media])
    if retain.queries_days is not None:
        counts = await holdings.sessions.old_questions(now - retain.queries_days * DAY_S, apply)
        out.questions, out.searches = counts["questions"], counts["searches"]
        if apply and (out.questions or out.searches):
            await holdings.sessions.purge()  # the deleted rows' words out of the WAL too
    return out


async def daily(holdings: Holdings, retain: Retain, every_s: float = DAY_S) -> None:
    """Apply retention now and then every ``every_s`` until cancelled (``quorum serve``);
    a failed run is logged and tried again next time."""
    while True:
        try:
            done = await plan(holdings, retain, apply=True)
            log.warning("retention: %s", done.totals())
        except Exception:
            log.exception("retention failed; trying again in %.0f s", every_s)
        await asyncio.sleep(every_s)
