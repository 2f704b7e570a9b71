"""The seam the core calls: one knowledge base's archive, read-only.

An ``Archive`` is scoped in code to a single knowledge base (a Weaviate tenant), so
nothing built on it (quick answers, deep-research tools) can reach another one.
"""

from __future__ import annotations

from typing import Protocol

from retrieval.models import Hit, SearchFilters, SourceInfo


class Archive(Protocol):
    """Read access to one knowledge base."""

    @property
    def kb(self) -> str:
        """The knowledge base (tenant) this archive is bound to."""
        ...

    async def search(
        self, query: str, filters: SearchFilters | None = None, k: int = 8
    ) -> list[Hit]:
        """Hybrid search (BM25 + vector), best first."""
        ...

    async def neighbours(self, hit_id: str, before: int = 1, after: int = 1) -> list[Hit]:
        """The segment ``hit_id`` with up to ``before``/``after`` segments around it, in order."""
        ...

    async def transcript(
        self,
        source_id: str,
        start_s: float | None = None,
        end_s: float | None = None,
        offset: int = 0,
        limit: int = 200,
    ) -> list[Hit]:
        """A source's segments in order, optionally within a time range, paged."""
        ...

    async def sources(self) -> list[SourceInfo]:
        """Every source in the knowledge base with its segment count."""
        ...

    async def speakers(self) -> list[str]:
        """Every speaker name known to the knowledge base."""
        ...
