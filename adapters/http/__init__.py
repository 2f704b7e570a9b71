"""Quorum's one HTTP port: ``server`` mounts every route (ops, API, pages, insights, /mcp,
platforms' webhooks); routes share ``served``, ``auth``, ``problems`` and ``shell``."""
