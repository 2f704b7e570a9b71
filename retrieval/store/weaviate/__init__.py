"""Everything Weaviate: the client and its server, the schema, writes, reads and filters.

Nothing outside this package imports ``weaviate`` or touches a Weaviate client."""

from retrieval.store.weaviate.store import WeaviateStore

__all__ = ["WeaviateStore"]
