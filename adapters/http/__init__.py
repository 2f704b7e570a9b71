"""Quorum's HTTP server: health, readiness, metrics and the JSON API on one port."""
