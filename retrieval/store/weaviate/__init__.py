"""Everything Weaviate: the client and its server, the schema, writes, reads and filters.

Nothing outside this package imports ``weaviate`` or touches a Weaviate client. The client
library is imported on first use of ``WeaviateStore`` (a second on two cores): opening
the store starts the embedded server first, so the server boots while it is imported."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval.store.weaviate.store import WeaviateStore

__all__ = ["WeaviateStore"]


def __getattr__(name: str) -> object:
    if name == "WeaviateStore":
        from retrieval.store.weaviate.store import WeaviateStore

        return WeaviateStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
