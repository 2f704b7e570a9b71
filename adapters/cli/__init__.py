"""The ``quorum`` command line: ``commands`` holds the core's commands (ingest, search,
sources, remove, ask, eval), ``terminal`` how answers look in a terminal, ``main`` adds
the platform commands (serve, chat, demo, discord) and is the console-script entry point."""

from __future__ import annotations


def main() -> int:
    """Run the ``quorum`` command line (imported late: the commands pull in every SDK)."""
    from adapters.cli.main import main as run

    return run()
