"""Finding passages: ingest, embed, store in Weaviate, search. Knows nothing of chat."""
