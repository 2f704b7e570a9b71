"""The polling connectors inside `quorum serve`: a ``Poller`` per watched folder and per
bucket, started with serve and stopped with it, each polling while this process holds
its lease (so several replicas poll each connector once between them)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from bot.connectors.folder import FolderFeed
from bot.connectors.items import ItemTable, forget_key
from bot.connectors.poller import Feed, Poller
from bot.connectors.settings import ConnectorSettings
from bot.connectors.status import ConnectorStatuses
from bot.jobs.queue import worker_id

if TYPE_CHECKING:
    from bot.wiring import CoreServices

log = logging.getLogger("quorum.connectors")


def feeds(own: ConnectorSettings) -> list[Feed]:
    """A feed per configured folder and bucket."""
    found: list[Feed] = [
        FolderFeed(w, own.watch_poll_s, own.watch_follow_deletes) for w in own.watch
    ]
    if own.s3_url:
        from bot.connectors.s3 import S3Feed  # boto3 only where a bucket is set

        found += [S3Feed(b, own) for b in own.s3_url]
    return found


async def run_connectors(services: CoreServices, holder: str | None = None) -> None:
    """Poll every configured connector until cancelled (returns at once with none)."""
    own = services.settings.platform(ConnectorSettings)
    configured = feeds(own)
    if not configured:
        return
    driver = services.jobs.table.driver
    key = forget_key(services.settings)
    await asyncio.to_thread(key)  # read (or made) once, here, off the event loop
    statuses, items = ConnectorStatuses(driver), ItemTable(driver, key)
    holder = holder or worker_id()
    pollers = [
        Poller(
            f,
            statuses,
            items,
            services.jobs,
            holder,
            settle=services.jobs.inline,
            origins=services.writer.show_origins,
        )
        for f in configured
    ]
    log.warning("connectors: %s", ", ".join(f.name for f in configured))
    await asyncio.gather(*(p.run() for p in pollers))
