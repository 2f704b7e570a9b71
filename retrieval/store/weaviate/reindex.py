"""Range indexes added to collections an older Quorum made without them (``schema``'s
``RANGE_FILTERED``), once, when the store connects.

Weaviate (1.39) builds an index of an existing property as a background task over every
tenant and every replica: ``PUT /v1/schema/{collection}/properties/{property}/index/rangeable``
submits it (202 and a task id; 200 ``NO_OP`` when the index is there; a second request
while it runs joins the same task), and ``GET /v1/schema/{collection}/indexes`` reports each
index's state (``pending``, ``indexing`` with a progress from 0 to 1, ``ready``, ``failed``,
``cancelled``). The client library has no call for either, so both go through its HTTP
connection (its base URL, credentials and timeouts).

Searches stay correct meanwhile (Weaviate answers from the filterable index until the new
one is whole), so the wait is bounded: past it, the store goes on and says so, and
Weaviate finishes the task on its own; the next start finds the index in place or joins
the task. Nothing here raises for Weaviate's refusals: without the index, range filters
are slower, not wrong.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import weaviate
from weaviate.exceptions import UnexpectedStatusCodeError

log = logging.getLogger("quorum.store")

WAIT_S = 300.0  # how long a start waits for the indexes before going on without them
POLL_S = 0.25
REPORT_S = 5.0  # a progress line at most this often

Key = tuple[str, str]  # (collection, property)


async def add_range_indexes(
    client: weaviate.WeaviateAsyncClient,
    missing: Mapping[str, Sequence[str]],
    *,
    wait_s: float = WAIT_S,
    poll_s: float = POLL_S,
    report_s: float = REPORT_S,
) -> bool:
    """Build the range index of each property ``missing`` names (by collection), waiting
    at most ``wait_s`` with progress in the log; True when every one is in place."""
    # A collection without tenants holds nothing to index, and Weaviate refuses a task
    # over no shards: its index is asked for again at a start after something is stored.
    held = [col for col, props in missing.items() if props and await _has_tenants(client, col)]
    wanted = [(col, prop) for col in held for prop in missing[col]]
    if not wanted:
        return not any(missing.values())
    t0 = time.monotonic()
    objects = await _objects(client, held)
    log.warning(
        "Building Weaviate's date and position index for %s (once, for an archive an older "
        "Quorum made; until it is done, date filters and reads of a recording's passages "
        "are slower)...",
        f"{objects:,} stored objects" if objects else "the stored objects",
    )
    pending: set[Key] = set()
    refused = False
    for key in wanted:
        status = await _submit(client, *key)
        if status == "started":
            pending.add(key)
        refused = refused or status == "refused"
    reported = t0
    while pending:
        if time.monotonic() - t0 >= wait_s:
            log.warning(
                "Weaviate's date and position index is still being built after %.0f s; "
                "going on without it meanwhile (what it speeds up stays correct, only slower). "
                "Weaviate finishes it in the background; the next start checks again.",
                time.monotonic() - t0,
            )
            return False
        await asyncio.sleep(poll_s)
        progress: list[float] = []
        for col in sorted({c for c, _ in pending}):
            states = await _states(client, col)
            for key in sorted(k for k in pending if k[0] == col):
                state, done = states.get(key[1], ("pending", 0.0))
                if state == "ready":
                    pending.discard(key)
                elif state in ("failed", "cancelled"):
                    log.warning("Weaviate's range index of %s.%s %s.", col, key[1], state)
                    pending.discard(key)
                    refused = True
                else:
                    progress.append(done)
        if pending and time.monotonic() - reported >= report_s:
            reported = time.monotonic()
            finished = len(wanted) - len(pending) + sum(progress)
            log.warning(
                "... date and position index %.0f%% built (%.0f s)",
                100 * finished / len(wanted),
                reported - t0,
            )
    if refused:
        log.warning(
            "Weaviate did not build every range index (see above); what it speeds up stays "
            "correct, only slower. The next start tries again."
        )
        return False
    log.warning("Weaviate's date and position index is built (%.1f s).", time.monotonic() - t0)
    return True


async def _submit(client: weaviate.WeaviateAsyncClient, col: str, prop: str) -> str:
    """Ask for ``prop``'s range index: "started" (building, or joined a task that is),
    "done" (already there) or "refused" (said in the log)."""
    path = f"/schema/{col}/properties/{prop}/index/rangeable"
    try:
        res = await _send(client, "PUT", path)
        status, said = res.status_code, _message(res)
    except UnexpectedStatusCodeError as exc:  # 403: these credentials may not change schema
        status, said = exc.status_code, " ".join(str(exc).split())[:200]
    if status == 200:
        return "done"
    if status == 202:
        return "started"
    # E.g. a server older than 1.39 has no such route: the next start asks again.
    log.warning(
        "Weaviate did not add a range index to %s.%s (HTTP %s: %s).", col, prop, status, said
    )
    return "refused"


async def _states(client: weaviate.WeaviateAsyncClient, col: str) -> dict[str, tuple[str, float]]:
    """Each property's range index state and progress (0-1) in ``col``; {} when Weaviate
    does not say (polled again)."""
    try:
        res = await _send(client, "GET", f"/schema/{col}/indexes")
        body = res.json() if res.status_code == 200 else {}
    except (UnexpectedStatusCodeError, ValueError):
        return {}
    states: dict[str, tuple[str, float]] = {}
    for prop in body.get("properties") or ():
        for index in prop.get("indexes") or ():
            if index.get("type") == "rangeFilters":
                states[str(prop.get("name"))] = (
                    str(index.get("status")),
                    float(index.get("progress") or 0.0),
                )
    return states


async def _has_tenants(client: weaviate.WeaviateAsyncClient, col: str) -> bool:
    return bool(await client.collections.use(col).tenants.get())


async def _objects(client: weaviate.WeaviateAsyncClient, cols: Sequence[str]) -> int:
    """How many objects ``cols`` hold over every tenant (0: not known)."""
    total = 0
    try:
        for col in cols:
            collection = client.collections.use(col)
            for tenant in await collection.tenants.get():
                found = await collection.with_tenant(tenant).aggregate.over_all(total_count=True)
                total += int(found.total_count or 0)
    except Exception:  # a count for a message only: never worth failing a start
        log.debug("could not count the stored objects", exc_info=True)
        return 0
    return total


async def _send(
    client: weaviate.WeaviateAsyncClient, method: Literal["GET", "PUT"], path: str
) -> Any:
    """One request to Weaviate's REST API through the client's own connection."""
    conn = client._connection
    sent = conn.put(path, weaviate_object={}) if method == "PUT" else conn.get(path)
    return await sent if inspect.isawaitable(sent) else sent


def _message(res: Any) -> str:
    try:
        errors = res.json().get("error") or []
        text = "; ".join(str(e.get("message")) for e in errors) or res.text
    except (ValueError, AttributeError):
        text = str(res.text)
    text = " ".join(text.split())
    return text if len(text) <= 200 else text[:197] + "..."
