"""Connectors: recordings that arrive by themselves (a watched folder, an S3 bucket, Zoom's
webhook). Every connector produces jobs (``bot.jobs``: ingest goes through the one write
path, ``bot.write``) and none transcribes inline; each keeps a status row that `quorum
doctor`, `quorum jobs` and ``/metrics`` show.

The status API (``bot.connectors.status``), for any connector::

    from bot.connectors import ConnectorStatuses, statuses_of

    statuses = statuses_of(services.sessions)        # the session database's rows
    await statuses.register("zoom", "zoom", "default")  # once, when the connector starts
    await statuses.count("zoom", "seen")              # an event or file noticed
    await statuses.count("zoom", "queued")            # a job queued for it
    await statuses.count("zoom", "failed")            # it could not be had (download, job)
    await statuses.count("zoom", "forgotten")         # a source removed after a delete
    await statuses.error("zoom", "Zoom refused the download token (404).")  # between runs
    await statuses.ran("zoom", next_run=None, error=None)  # a run (a poll, an event) ended:
    #   next_run: when the next poll is due (None: it waits for events); cursor=...: where
    #   its listing stands (never a key); error=None clears the last error, a sentence sets it
    for s in await statuses.all():                    # every connector, by name
        s.name, s.kind, s.kb, s.last_run, s.next_run, s.counts.seen, s.last_error
        s.problems()                                  # one sentence per problem (doctor)
    await statuses.lease("s3:bucket/x", holder, ttl_s=30)  # True: this process polls it
    await statuses.release("s3:bucket/x", holder)

Names are unique per connector (``folder:/srv/calls``, ``s3:bucket/prefix``, ``zoom``);
counts only grow; an error is one sentence a person can act on (it names the setting).
Times are Unix seconds. Doctor prints a row per connector (``ok``, or ``warn`` with its
problems), `quorum jobs` a connectors section, ``/metrics`` ``quorum_connector_*``.

The polling connectors (``poller``: stable files, unchanged never re-ingested, deletes
followed only when asked) are ``folder`` and ``s3``, run inside `quorum serve`
(``run.run_connectors``).
"""

from __future__ import annotations

from bot.connectors.status import (
    EVENTS,
    ConnectorStatus,
    ConnectorStatuses,
    Counts,
    Event,
)
from bot.sessions import Sessions


def statuses_of(sessions: Sessions) -> ConnectorStatuses:
    """The connectors' status rows in ``sessions``' database (SQLite or PostgreSQL)."""
    from bot.sessions.sql import SqlSessions

    if not isinstance(sessions, SqlSessions):
        raise TypeError("connectors live in the SQL session store")
    return ConnectorStatuses(sessions.driver)


__all__ = [
    "EVENTS",
    "ConnectorStatus",
    "ConnectorStatuses",
    "Counts",
    "Event",
    "statuses_of",
]
