"""Where Quorum keeps its segments and sources: one package per store (``weaviate/``)."""
