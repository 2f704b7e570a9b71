"""Where Quorum keeps its segments and sources: the ``Store`` seam (``base``) and its
implementations, one per package or module (``weaviate/``, ``memory``)."""

from retrieval.store.base import Embedded, Store, StoredSource, StoreInfo, UpsertResult

__all__ = ["Embedded", "Store", "StoreInfo", "StoredSource", "UpsertResult"]
