"""What a polling connector has seen of each file or object (``connector_items``): its
size and stamp at the last poll (a file's mtime, an object's ETag), the content hash of
the version queued, where it stands, its job and source. Kept in the session database, so
a restart (or another replica taking the lease over) re-ingests nothing unchanged.

When the source an item became is forgotten (``forget``, a ``ForgetHook``), its row
forgets the item's name too: it becomes a ``forgotten`` row whose ``item`` is a keyed hash
(HMAC-SHA256 under ``forget_key``) of the connector, the key and the version the listing
showed (size and stamp: an object's ETag, a file's mtime), with no key, job, source or
error. The poller hashes what it lists the same way, so the same version stays out; a
changed one (edited, copied in again, touched, uploaded again) is taken in again, as a
user who puts a file back expects. The hash is keyed so a guessed name cannot be checked
against the table without the secret."""

from __future__ import annotations

import functools
import hashlib
import hmac
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from bot.config import Settings
from bot.sessions.driver import Driver
from retrieval.links.share import load_secret

ItemState = Literal["growing", "queued", "done", "failed", "gone", "forgotten"]
"""``growing``: seen changed at the last poll (not yet stable); ``queued``: its job is
queued or running; ``done``: ingested (or unchanged); ``failed``: it could not be read
(tried again only once it changes); ``gone``: no longer listed (deletes not followed);
``forgotten``: its source was forgotten (the row keeps only a hash of it, ``mark``)."""

TOUCH_BATCH = 500  # keys per statement
COLUMNS = "connector, item, size, stamp, digest, state, job_id, source_id, error, seen_at"
FORGOTTEN = "forgotten:"  # a forgotten row's ``item``: this, then the hash
KEY_LABEL = b"quorum: forgotten connector items"


Key = Callable[[], bytes]
"""What forgotten rows are hashed with, read when first needed (``forget_key``)."""


def forget_key(settings: Settings) -> Key:
    """The key forgotten rows are hashed with, derived from Quorum's link secret (the one
    secret every replica shares: ``QUORUM_LINK_SECRET``, else the data dir's), read once
    when first needed (a command that forgets nothing never reads it)."""

    @functools.cache
    def key() -> bytes:
        given = settings.link_secret.get_secret_value() if settings.link_secret else None
        return hmac.new(load_secret(settings.data_dir, given), KEY_LABEL, hashlib.sha256).digest()

    return key


def mark(key: bytes, connector: str, item: str, size: int, stamp: str) -> str:
    """A forgotten row's ``item``: the keyed hash of one version of one item."""
    text = "\0".join([connector, item, str(size), stamp]).encode()
    return FORGOTTEN + hmac.new(key, text, hashlib.sha256).hexdigest()


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
    """A connector's items in the session database (``key``: what forgotten rows are
    hashed with, ``forget_key``)."""

    def __init__(self, driver: Driver, key: Key) -> None:
        self.driver, self.key = driver, key

    def forgotten(self, connector: str, item: str, size: int, stamp: str) -> str:
        """The ``item`` of this version's row once its source was forgotten."""
        return mark(self.key(), connector, item, size, stamp)

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
        """Write ``item`` (made or replaced), seen now: for an item with no row yet (an
        item that has one is written with ``update``)."""
        await self.driver.execute(
            f"INSERT INTO connector_items ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (connector, item) DO UPDATE SET size = excluded.size, "
            "stamp = excluded.stamp, digest = excluded.digest, state = excluded.state, "
            "job_id = excluded.job_id, source_id = excluded.source_id, "
            "error = excluded.error, seen_at = excluded.seen_at",
            item.connector,
            item.key,
            *_fields(item),
            time.time(),
        )

    async def update(self, item: Item) -> None:
        """Write ``item`` into its row, seen now, unless that row is gone: its source was
        forgotten meanwhile (a ``forgotten`` row took its place, and wins). One statement,
        so a forget landing while a poll queues a version or reads a job's end never
        brings the item's key back."""
        await self.driver.execute(
            "UPDATE connector_items SET size = ?, stamp = ?, digest = ?, state = ?, job_id = ?, "
            "source_id = ?, error = ?, seen_at = ? "
            "WHERE connector = ? AND item = ? AND state <> 'forgotten'",
            *_fields(item),
            time.time(),
            item.connector,
            item.key,
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

    async def forget(self, kb: str, source_id: str) -> list[str]:
        """The items of ``kb``'s connectors that became ``source_id`` become ``forgotten``
        rows that keep only ``mark``; the keys they held. An item is known by its row's
        source, or by its job's file: a job of the same file wrote the source (the item
        may have changed, and its next job failed, before its row heard of the first)."""
        rows = await self.driver.fetch(
            f"SELECT {COLUMNS} FROM connector_items WHERE state <> 'forgotten' "
            "AND connector IN (SELECT name FROM connectors WHERE kb = ?) AND (source_id = ? "
            "OR job_id IN (SELECT id FROM jobs WHERE kb = ? AND file IN (SELECT file FROM jobs "
            "WHERE kb = ? AND source_id = ? AND kind <> 'remove')))",
            kb,
            source_id,
            kb,
            kb,
            source_id,
        )
        now = time.time()
        async with self.driver.transaction() as tx:
            for r in rows:
                await tx.execute(
                    "DELETE FROM connector_items WHERE connector = ? AND item = ?",
                    r["connector"],
                    r["item"],
                )
                await tx.execute(
                    f"INSERT INTO connector_items ({COLUMNS}) "
                    "VALUES (?, ?, 0, '', NULL, 'forgotten', NULL, NULL, NULL, ?) "
                    "ON CONFLICT (connector, item) DO UPDATE SET seen_at = excluded.seen_at",
                    r["connector"],
                    self.forgotten(r["connector"], r["item"], int(r["size"]), r["stamp"]),
                    now,
                )
        return [r["item"] for r in rows]


def _fields(item: Item) -> tuple[object, ...]:
    """An item's columns after its connector and key, before ``seen_at``."""
    return (item.size, item.stamp, item.digest, item.state, item.job_id, item.source_id, item.error)
