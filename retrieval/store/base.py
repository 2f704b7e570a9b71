"""The store seam: what ingest, search, the library, doctor and readiness ask of wherever
segments and sources are kept, in Quorum's own types.

A knowledge base (``kb``) is a name checked by ``retrieval.models.check_kb``; each is kept
apart from the others. A source becomes visible whole or not at all: a write puts its
windows and units under a new *generation*, then flips its source record to name that
generation, then drops older ones; every read keeps only the live generation, so a reader
never sees half a source (``weaviate/writes.py`` tells the crash story).

Implemented by ``retrieval.store.weaviate.WeaviateStore`` (what Quorum runs) and
``retrieval.store.memory.MemoryStore`` (in-process, for fast tests).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from retrieval.errors import SearchUnavailable
from retrieval.models import Document, Hit, Level, SearchFilters, SourceInfo


@dataclass(frozen=True)
class Embedded:
    """A document ready to write: one vector per window, one per unit of its other levels."""

    doc: Document
    vectors: Sequence[Sequence[float]]
    level_vectors: Sequence[Sequence[float]] = ()


@dataclass(frozen=True)
class UpsertResult:
    """What an upsert did to one source."""

    status: str  # "added" | "updated" | "skipped"
    segments: int
    removed: int = 0


@dataclass(frozen=True)
class StoredSource:
    """What the store remembers of an indexed file: its content hash and path."""

    content_hash: str
    path: str


@dataclass(frozen=True)
class StoreInfo:
    """What ``quorum doctor`` says of the store: where it is and which version answers."""

    url: str
    version: str


class Store(Protocol):
    """Where segments and sources are kept, written whole and searched per level."""

    # --- writes (ingest, the library)
    async def upsert_many(
        self,
        kb: str,
        items: Sequence[Embedded],
        batch_size: int = 256,
        known: dict[str, StoredSource] | None = None,
    ) -> list[UpsertResult | SearchUnavailable]:
        """Write several documents, one result per document in order, each source visible
        whole or not at all; a document the store rejects gets an error in its place, a
        store that fails raises ``SearchUnavailable``. ``known``: the stored sources, if
        already looked up. Raises ``ValueError`` unless each document has one vector per
        window and per unit."""
        ...

    async def delete_source(self, kb: str, source_id: str) -> int:
        """Delete a source and all its units; how many windows went."""
        ...

    async def set_path(self, kb: str, source_id: str, path: str) -> bool:
        """Show ``path`` as a source's path (its record alone holds it: nothing is written
        again); False when the source is not indexed."""
        ...

    async def purge(self, kb: str) -> None:
        """Make what was deleted from ``kb`` leave the store's files (Weaviate keeps a
        deleted object's words in its files until a compaction: ``weaviate/rebuild.py``).
        Removals in quick succession may share one purge."""
        ...

    async def clean_orphans(self, kb: str, min_age_s: float = 3600.0) -> int:
        """Delete units no source record makes live (left by a crashed write) once older
        than ``min_age_s``; how many went."""
        ...

    # --- what is stored
    async def knowledge_bases(self) -> list[str]:
        """Every knowledge base the store holds, by name."""
        ...

    async def stored_sources(self, kb: str, source_ids: Sequence[str]) -> dict[str, StoredSource]:
        """The stored record of each of ``source_ids`` that is indexed, by id."""
        ...

    async def list_sources(self, kb: str) -> list[SourceInfo]:
        """Every source in ``kb``, newest recording first, then by title; [] for an
        unknown knowledge base."""
        ...

    async def count(self, kb: str) -> int:
        """How many windows ``kb`` holds."""
        ...

    # --- reads (search, the archive, research)
    async def hybrid(
        self,
        kb: str,
        query: str,
        vector: Sequence[float],
        filters: SearchFilters | None,
        k: int,
        alpha: float,
        level: Level = "window",
    ) -> list[Hit]:
        """The ``k`` best live units of ``level`` for keywords and vector together
        (``alpha``: the vector's share, 0..1), with each hit's cosine to ``vector`` as its
        ``similarity``. ``filters.source`` must already be resolved to ``source_ids``."""
        ...

    async def hybrid_levels(
        self,
        kb: str,
        query: str,
        vector: Sequence[float],
        filters: SearchFilters | None,
        k: int,
        alpha: float,
        plan: Sequence[tuple[Level, float]],
        read: int | None = None,
    ) -> list[list[Hit]]:
        """``hybrid`` over each level of ``plan`` (their results in its order), asked
        together where the store can share the work (a fused route's levels). With
        ``read``, a store may leave out all but the ``read`` hits ``route.best`` ranks
        first across the levels (by the plan's weights): each level's list is then a
        prefix of its own."""
        ...

    async def get(self, kb: str, hit_id: str) -> Hit | None:
        """One live window by its hit id; None when there is none."""
        ...

    async def fetch_ordered(
        self,
        kb: str,
        source_id: str,
        *,
        positions: tuple[int, int] | None = None,
        start_s: float | None = None,
        end_s: float | None = None,
        offset: int = 0,
        limit: int = 200,
        level: Level = "window",
    ) -> list[Hit]:
        """A source's live units of ``level`` in order of position: those at ``positions``
        (first and last, inclusive) and overlapping ``start_s``..``end_s`` when given."""
        ...

    # --- health (readiness, doctor)
    async def ready(self) -> bool:
        """True when the store answers now."""
        ...

    async def server_info(self) -> StoreInfo:
        """Where the store is and its version (raises ``SearchUnavailable`` when down)."""
        ...
