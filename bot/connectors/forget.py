"""A forgotten source, forgotten by the connectors too (a ``ForgetHook``, registered in
``bot.wiring.holdings_of`` before the jobs' own): the items it was made from keep only a
keyed hash of their version (``ItemTable.forget``: the same version stays out, a changed
one is taken in again), and a connector's last error that quoted its key, file or title
is cleared (``ConnectorStatuses.forget``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import PurePosixPath

from bot.connectors.items import ItemTable, Key
from bot.connectors.status import ConnectorStatuses
from bot.sessions.driver import Driver
from retrieval.models import Source


def forget_connectors(driver: Driver, key: Key) -> Callable[[str, Source], Awaitable[None]]:
    """The hook: run it before the jobs' (it finds items by their jobs' source)."""
    items, statuses = ItemTable(driver, key), ConnectorStatuses(driver)

    async def hook(kb: str, source: Source) -> None:
        files = await driver.fetch(
            "SELECT DISTINCT file FROM jobs WHERE kb = ? AND source_id = ? AND kind <> 'remove'",
            kb,
            source.id,
        )
        named = [*await items.forget(kb, source.id), *(r["file"] for r in files)]
        words = {source.title, *named, *(PurePosixPath(n).name for n in named)}
        await statuses.forget(sorted(w for w in words if w))

    return hook
