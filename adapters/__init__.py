"""Platform edges: the chat platforms (one folder each, registered in ``platform``), the
console, the command line and HTTP, each translating to and from the core."""

# The store's client (Weaviate's) calls simplefilter("default") on import: import the
# retrieval layer before adding our own filters, or it would undo them.
import retrieval.service  # noqa: F401
