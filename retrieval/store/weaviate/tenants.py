"""Which Weaviate tenant holds a knowledge base now, known to every process alike.

A knowledge base's tenant is rebuilt after a removal (``rebuild``): its live objects are
copied to a fresh tenant, the knowledge base switches to it, and the old tenant is
deleted, files and all (the only way Weaviate 1.39 lets go of a removed source's words
within minutes). So the tenant of a knowledge base is not always its name: the
``QuorumTenants`` collection (no tenants of its own, a few objects) holds

- ``live``: one object per rebuilt knowledge base naming its tenant (none: the tenant is
  the knowledge base's own name, as before rebuilds);
- ``spare``: one object per tenant that is not live: being ``built`` (with a heartbeat)
  or ``retired`` (switched away from, deleted after a grace). A start deletes what a
  crash left of either (``sweep``): a build whose heartbeat stopped, a retired tenant.

Every process reads ``live`` from Weaviate itself (serve, ``quorum worker``, the CLI),
cached ``TTL_S``; a read that fails asks afresh and, when the tenant moved, reads again
(``follows_switch``); a write asks afresh before and after it (``writes``). So a switch
made by another process is seen at once: nothing fails for it, nothing is lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast
from uuid import NAMESPACE_URL, uuid5

import weaviate
from weaviate.classes.config import Configure, DataType, Property, Tokenization
from weaviate.collections.classes.data import DataObject
from weaviate.exceptions import WeaviateQueryError

from retrieval.errors import InvalidInput

log = logging.getLogger("quorum.store")

REGISTRY = "QuorumTenants"
_NS = uuid5(NAMESPACE_URL, "https://quorum.invalid/tenants")
TTL_S = 2.0  # how long a reader trusts its cached tenant
GRACE_S = 1.0  # a retired tenant is deleted this long after the switch (reads under way)
RECHECK_S = 3.0  # how long a failed read waits to learn whether the tenant moved
STALE_BUILD_S = 120.0  # a build with no heartbeat for this long was a crash's
REGISTRY_PROPERTIES = [
    Property(name=name, data_type=DataType.TEXT, tokenization=Tokenization.FIELD)
    for name in ("kind", "kb", "tenant", "state")
] + [Property(name="at", data_type=DataType.NUMBER)]

SpareState = Literal["built", "retired"]

# The tenant a write (and what it reads) is pinned to, per knowledge base, in this task.
_pinned: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "quorum_pinned_tenants", default=None
)


F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


def follows_switch(read: F) -> F:
    """A read of a knowledge base (its name first, on a store with ``names``) that fails
    because a rebuild in any process switched its tenant (and deleted the old one) is
    read again from the new."""

    @functools.wraps(read)
    async def again(self: Any, kb: str, *args: Any, **kwargs: Any) -> Any:
        before = self.names.cached(kb)
        try:
            return await read(self, kb, *args, **kwargs)
        except InvalidInput:
            raise
        except Exception:
            try:  # briefly: a stopped server must not cost a second timeout
                async with asyncio.timeout(RECHECK_S):
                    moved = await self.names.live(kb, fresh=True) != before
            except Exception:  # Weaviate itself fails: the first error says it
                moved = False
            if not moved:
                raise
        return await read(self, kb, *args, **kwargs)

    return cast(F, again)


def fresh_tenant(kb: str) -> str:
    """A new tenant's name for ``kb``: Weaviate's tenant names allow what knowledge base
    names allow, at most 64 characters, so the name is a digest and a time."""
    digest = hashlib.sha256(kb.encode()).hexdigest()[:24]
    return f"qr{digest}-{time.time_ns() // 1000}"


def _uuid(kind: str, name: str) -> str:
    return str(uuid5(_NS, f"{REGISTRY}:{kind}:{name}"))


@dataclass(frozen=True)
class Spare:
    """A tenant that is not live: being built, or switched away from."""

    kb: str
    tenant: str
    state: SpareState
    at: float  # its heartbeat (built) or when it was retired


class TenantNames:
    """The live tenant of each knowledge base, cached briefly; builds and retirements."""

    def __init__(self, client: weaviate.WeaviateAsyncClient, use: Any) -> None:
        self.client = client
        self._use = use  # name -> collection at the consistency level replication needs
        self._live: dict[str, tuple[str, float]] = {}  # kb -> (tenant, read at)

    def registry(self) -> Any:
        return self._use(REGISTRY)

    def cached(self, kb: str) -> str:
        """``kb``'s tenant without asking: the one pinned in this task, else the last read."""
        pinned = _pinned.get()
        if pinned and kb in pinned:
            return pinned[kb]
        return self._live.get(kb, (kb, 0.0))[0]

    async def live(self, kb: str, fresh: bool = False) -> str:
        """``kb``'s tenant, asked of Weaviate when the cached one is older than ``TTL_S``
        (always when ``fresh``)."""
        pinned = _pinned.get()
        if pinned and kb in pinned and not fresh:
            return pinned[kb]
        known = self._live.get(kb)
        if known is not None and not fresh and time.monotonic() - known[1] < TTL_S:
            return known[0]
        try:
            obj = await self.registry().query.fetch_object_by_id(_uuid("live", kb))
        except WeaviateQueryError as exc:
            if not _not_there_yet(exc):
                raise
            obj = None  # not made yet, or just made by another process: nothing rebuilt
        tenant = str(obj.properties.get("tenant") or kb) if obj is not None else kb
        self._live[kb] = (tenant, time.monotonic())
        return tenant

    @contextlib.contextmanager
    def pinned(self, kb: str, tenant: str) -> Iterator[None]:
        """Every collection of ``kb`` in this task uses ``tenant`` (a write stays whole)."""
        token = _pinned.set({**(_pinned.get() or {}), kb: tenant})
        try:
            yield
        finally:
            _pinned.reset(token)

    async def switch(self, kb: str, tenant: str) -> None:
        """Make ``tenant`` ``kb``'s live tenant, for every process."""
        await self._put("live", kb, {"kind": "live", "kb": kb, "tenant": tenant})
        self._live[kb] = (tenant, time.monotonic())

    async def spare(self, kb: str, tenant: str, state: SpareState) -> None:
        """Record ``tenant`` as not live (``built``: a heartbeat too; ``retired``)."""
        props = {"kind": "spare", "kb": kb, "tenant": tenant, "state": state, "at": time.time()}
        await self._put("spare", tenant, props)

    async def unspare(self, tenant: str) -> None:
        """``tenant`` is live, or deleted: no longer a spare."""
        await self.registry().data.delete_by_id(_uuid("spare", tenant))

    async def _put(self, kind: str, name: str, props: dict[str, Any]) -> None:
        result = await self.registry().data.insert_many(
            [DataObject(properties=props, uuid=_uuid(kind, name))]
        )
        if result.errors:
            raise RuntimeError(f"Weaviate refused {REGISTRY}: {result.errors}")

    async def everything(self) -> tuple[dict[str, str], list[Spare]]:
        """Every rebuilt knowledge base's live tenant, and every spare."""
        live: dict[str, str] = {}
        spares: list[Spare] = []
        try:
            found = [obj async for obj in self.registry().iterator()]
        except WeaviateQueryError as exc:
            if not _not_there_yet(exc):
                raise
            found = []  # just made by another process: nothing recorded in it yet
        for obj in found:
            p = obj.properties
            if p.get("kind") == "live":
                live[str(p.get("kb"))] = str(p.get("tenant"))
            elif p.get("kind") == "spare":
                state: SpareState = "built" if p.get("state") == "built" else "retired"
                spares.append(
                    Spare(str(p.get("kb")), str(p.get("tenant")), state, float(p.get("at") or 0))
                )
        return live, spares


def _not_there_yet(exc: WeaviateQueryError) -> bool:
    """The registry is missing (a schema an older Quorum made), or another process has just
    created it and its index is not open on this node yet: either way it records nothing."""
    text = str(exc)
    return (
        f"could not find class {REGISTRY}" in text or f"non-existing index for {REGISTRY}" in text
    )


def registry_config() -> dict[str, Any]:
    """How ``QuorumTenants`` is created: plain properties, no tenants, no vectors used."""
    return {
        "properties": REGISTRY_PROPERTIES,
        "vector_config": Configure.Vectors.self_provided(name="default"),
    }
