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
from datetime import UTC, date, datetime

from bot.insights.gaps import Progress, find_gaps
from bot.insights.report import Cited, Gap, Moment, Report, build
from bot.sessions.base import Sessions
from retrieval.archive import Archive
from retrieval.encoding.embed import Embedder
from retrieval.errors import InvalidInput

__all__ = ["Cited", "Gap", "Insights", "Moment", "Report", "day_range"]

DAY_S = 86400
EPOCH = date(1970, 1, 1)

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


def day_range(
    days: int,
    since: date | None,
    until: date | None,
    *,
    spell: str = "{}",
    now: float | None = None,
) -> tuple[float, float | None]:
    """A report's ``[since, until)`` in seconds from UTC days (``until`` included), or the
    ``days`` before ``until`` (or now); ``until`` None means now. The one rule every
    surface uses: a day before 1970 (no question is older) or a ``since`` after today is
    one sentence (``spell`` writes an option's name as the surface does: ``since`` or
    ``--since``), and an ``until`` from today on means now, so no calendar end
    (``9999-12-31``) becomes a date past what a timestamp holds."""
    now = time.time() if now is None else now
    today = datetime.fromtimestamp(now, UTC).date()
    for name, day in (("since", since), ("until", until)):
        if day is not None and day < EPOCH:
            raise InvalidInput(
                f"{spell.format(name)} {day.isoformat()} is before 1970-01-01, "
                "older than any question Quorum logs."
            )
    if since is not None and since > today:
        raise InvalidInput(f"{spell.format('since')} {since.isoformat()} is after today.")
    end = None if until is None or until >= today else _midnight(until) + DAY_S
    start = _midnight(since) if since is not None else max(0.0, (end or now) - days * DAY_S)
    if end is not None and end <= start:
        raise InvalidInput(f"{spell.format('until')} is before {spell.format('since')}.")
    return start, end


def _midnight(day: date) -> float:
    return datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()


def _hour(ts: float) -> int:
    return int(ts // 3600)
