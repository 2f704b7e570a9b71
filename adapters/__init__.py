"""Platform edges: the chat platforms (one folder each, registered in ``platform``), the
console, the command line and HTTP, each translating to and from the core."""

# Weaviate's client calls simplefilter("default") on import: import it (through retrieval)
# before adding our own filters, or it would undo them.
import retrieval.weaviate_server  # noqa: F401
