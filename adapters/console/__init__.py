"""Quorum in a terminal: ``quorum chat`` and ``quorum demo``."""
