"""Connectors: recordings that arrive by themselves (Zoom's webhooks, ...), each turned
into jobs (``bot.jobs``) that download and ingest through the one write path."""
