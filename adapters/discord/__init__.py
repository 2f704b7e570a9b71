"""Quorum on Discord: ``client`` (events and the answer flow), ``commands`` (the app
commands), ``ui`` (live placeholder, feedback buttons), ``render`` (messages within
Discord's limits), ``cli`` (``quorum discord sync``)."""
