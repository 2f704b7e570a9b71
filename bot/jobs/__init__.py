"""Ingest jobs: every add, update and removal of a source is a job with a durable record
(``records``, ``table``), run through the one write path (``runner``) by a worker
(``worker``; on PostgreSQL delivered by PgQueuer, ``pgqueue``), queued and watched by
every door (``queue``)."""

from __future__ import annotations

from bot.jobs.queue import JobQueue
from bot.jobs.records import Job, Kind, Lane, State
from bot.jobs.runner import Limits
from bot.jobs.table import JobTable

__all__ = ["Job", "JobQueue", "JobTable", "Kind", "Lane", "Limits", "State"]
