"""The quick path: one search, numbered sources, one answer.

``answer`` runs it (``QuickAnswerer``); before searching, ``followup`` answers at once or
makes a follow-up standalone, ``understand`` (with ``dates``) reads speakers, recordings
and dates, ``expand`` rephrases and reranks hard questions; ``passages`` numbers the hits
as timed sources, ``relevance`` decides whether they are worth quoting, and ``write`` has
Claude (``prompts``) or, without it, ``extractive`` write the answer from the sentences
``scoring`` picks.
"""
