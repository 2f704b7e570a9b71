"""What a polling connector has seen of each file or object (``connector_items``): its
size and stamp at the last poll (a file's mtime, an object's ETag), the content hash of
the version queued, where it stands, its job and source. Kept in the session database, so
a restart (or another replica taking the lease over) re-ingests nothing unchanged."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from bot.sessions.driver import Driver

ItemState = Literal["growing", "queued", "done", "failed", "gone"]
"""``growing``: seen changed at the last poll (not yet stable); ``queued``: its job is
queued or running; ``done``: ingested (or unchanged); ``failed``: it could not be read
(tried again only once it changes); ``gone``: no longer listed (deletes not followed)."""

TOUCH_BATCH = 500  # keys per statement
COLUMNS = "connector, item, size, stamp, digest, state, job_id, source_id, error, seen_at"


@dataclass(frozen=True)
class Item:
    """One file or object as the connector last saw it."""

    connector: str
    key: str  # a file's path, an object's key (the ``item`` column)
    size: int
    stamp: str
    digest: str | None  # the content hash of the version queued or ingested
    state: ItemState
    job_id: int | None = None
    source_id: str | None = None
    error: str | None = None
    seen_at: float = 0.0

    def but(self, **changes: Any) -> Item:
        """This item with ``changes``."""
        return replace(self, **changes)


class ItemTable:
    """A connector's items in the session database."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    async def all(self, connector: str) -> dict[str, Item]:
        """Every item of ``connector``, by key."""
        rows = await self.driver.fetch(
            f"SELECT {COLUMNS} FROM connector_items WHERE connector = ?", connector
        )
        return {
            r["item"]: Item(**{**{k: v for k, v in r.items() if k != "item"}, "key": r["item"]})
            for r in rows
        }

    async def put(self, item: Item) -> None:
        """Write ``item`` (made or replaced), seen now."""
        await self.driver.execute(
            f"INSERT INTO connector_items ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (connector, item) DO UPDATE SET size = excluded.size, "
            "stamp = excluded.stamp, digest = excluded.digest, state = excluded.state, "
            "job_id = excluded.job_id, source_id = excluded.source_id, "
            "error = excluded.error, seen_at = excluded.seen_at",
            item.connector,
            item.key,
            item.size,
            item.stamp,
            item.digest,
            item.state,
            item.job_id,
            item.source_id,
            item.error,
            time.time(),
        )

    async def touch(self, connector: str, keys: Sequence[str]) -> None:
        """The items ``keys`` were listed now (an item not listed for a whole pass is gone)."""
        now = time.time()
        for start in range(0, len(keys), TOUCH_BATCH):
            batch = keys[start : start + TOUCH_BATCH]
            marks = ", ".join("?" for _ in batch)
            await self.driver.execute(
                f"UPDATE connector_items SET seen_at = ? WHERE connector = ? AND item IN ({marks})",
                now,
                connector,
                *batch,
            )

    async def drop(self, connector: str, key: str) -> None:
        """Forget an item (its file was deleted and its source forgotten)."""
        await self.driver.execute(
            "DELETE FROM connector_items WHERE connector = ? AND item = ?", connector, key
        )
