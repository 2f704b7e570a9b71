"""The conversation engine: sessions, answers, deep research. Knows nothing of chat platforms."""
