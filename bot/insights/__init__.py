"""Insights for the people who run Quorum: what a knowledge base's people ask, how the
answers did, and where the archive falls short. ``report`` counts (pure arithmetic over
the stored exchanges), ``gaps`` groups the questions the archive did not answer well by
meaning and finds the closest moments it does have; ``Insights`` builds both from the
session store, the embedder and the archive, and keeps recent reports so a page renders
from a cached run."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable

from bot.insights.gaps import Progress, find_gaps
from bot.insights.report import Cited, Gap, Moment, Report, build
from bot.sessions.base import Sessions
from retrieval.archive import Archive
from retrieval.embed import Embedder

__all__ = ["Cited", "Gap", "Insights", "Moment", "Report"]

CACHE_S = 600.0
"""How long a built report is served again (a page's reload, the API, a chat link)."""
CACHED_REPORTS = 32
_Key = tuple[str, int, int | str, bool]


class Insights:
    """Reports per knowledge base and time range, built once per ``CACHE_S``."""

    def __init__(
        self,
        *,
        sessions: Sessions,
        embedder: Embedder | None,
        archives: Callable[[str], Archive] | None,
        cache_s: float = CACHE_S,
    ) -> None:
        self.sessions = sessions
        self.embedder = embedder
        self.archives = archives
        self.cache_s = cache_s
        self._cache: OrderedDict[_Key, tuple[float, Report]] = OrderedDict()
        self._building: dict[_Key, asyncio.Task[tuple[float, Report]]] = {}

    async def report(
        self,
        kb: str,
        since: float,
        until: float | None = None,
        *,
        gaps: bool = True,
        fresh: bool = False,
        progress: Progress | None = None,
    ) -> Report:
        """Insights for ``kb`` over ``[since, until)`` (until now); ``gaps`` groups the
        questions it fell short on (embedding them: seconds for thousands). A report built
        in the last ``cache_s`` for the same range is returned as it is unless ``fresh``;
        a range is known by its hours ("the last 30 days" asked a minute later, or a
        second page's reload, is the same report)."""
        key = (kb, _hour(since), "now" if until is None else _hour(until), gaps)
        cached = self._cache.get(key)
        if cached is not None and not fresh and time.time() - cached[1].built_at < self.cache_s:
            # A removal since it was read (by any process: the audit trail says) makes a
            # report that may quote the removed source stale at once.
            if await self.sessions.last_removal(kb) < cached[0]:
                self._cache.move_to_end(key)
                return cached[1]
        task = self._building.get(key)
        if task is None:  # one build per range, however many pages ask at once
            end = time.time() if until is None else until
            task = asyncio.create_task(self._build(kb, since, end, gaps, progress))
            self._building[key] = task
            task.add_done_callback(lambda _t: self._building.pop(key, None))
        built = await asyncio.shield(task)
        self._cache[key] = built
        while len(self._cache) > CACHED_REPORTS:
            self._cache.popitem(last=False)
        return built[1]

    async def _build(
        self, kb: str, since: float, until: float, gaps: bool, progress: Progress | None
    ) -> tuple[float, Report]:
        """The report, and when its rows were read."""
        read_at = time.time()
        rows = await self.sessions.asked(kb, since, until)
        report = build(kb, since, until, rows)
        if gaps and self.embedder is not None:
            archive = self.archives(kb) if self.archives is not None else None
            report.gaps = await find_gaps(rows, self.embedder, archive, progress=progress)
        return read_at, report


def _hour(ts: float) -> int:
    return int(ts // 3600)
