"""The ``quorum`` command line: ``app`` holds the typer app and what commands share,
``commands`` the archive commands (ingest, search, summary, sources, remove), ``ask`` ask and
eval, ``mcp`` the MCP server over stdio, ``transcript`` a recording's transcript,
``privacy`` audit and retention, ``terminal`` how answers look in a terminal; ``main``
adds the platform commands (serve, chat, demo, doctor, and each chat platform's)."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import NoReturn

# These need neither a chat SDK nor Claude's: run alone, they skip importing the chat
# platforms' and Anthropic's SDKs, seconds that a one-shot `quorum search` should not pay.
ARCHIVE_COMMANDS = frozenset(
    {
        "ingest",
        "search",
        "summary",
        "sources",
        "remove",
        "transcript",
        "audit",
        "retention",
        "insights",
    }
)


STORE_COMMANDS = (ARCHIVE_COMMANDS - {"audit"}) | {"ask", "eval", "mcp"}
"""The commands that open the archive's store."""


def boot_store() -> None:
    """For a command that opens the store, start its embedded server booting first: the
    boot (about two seconds) then runs while the command imports and parses."""
    if not sys.argv[1:2] or sys.argv[1] not in STORE_COMMANDS:
        return
    if any(arg in ("--help", "-h") for arg in sys.argv[2:]):
        return
    from bot.config import load_settings
    from bot.wiring import boot_store
    from retrieval.errors import QuorumError

    try:
        settings = load_settings()
    except (QuorumError, ValueError):  # the command itself says what is wrong
        return
    boot_store(settings)


def main() -> int:
    """Run the ``quorum`` command line (imported late: the commands pull in every SDK)."""
    boot_store()
    if sys.argv[1:2] and sys.argv[1] in ARCHIVE_COMMANDS:
        from adapters.cli import commands, insights, privacy, transcript  # noqa: F401
        from adapters.cli.app import launch
    elif sys.argv[1:2] == ["mcp"]:  # an assistant waits on it: no chat platform's SDK
        from adapters.cli import commands, mcp  # noqa: F401  (two commands: a group)
        from adapters.cli.app import launch
    else:
        from adapters.cli.main import launch
    if not sys.argv[1:2] or sys.argv[1] not in STORE_COMMANDS:
        return launch()
    try:
        code = launch()
    except SystemExit as done:
        code = _exit_code(done)
    end_now(code)


def _exit_code(done: SystemExit) -> int:
    if done.code is None or isinstance(done.code, int):
        return done.code or 0
    print(done.code, file=sys.stderr)
    return 1


def end_now(code: int) -> NoReturn:
    """End a one-shot command at once, its output flushed: everything it opened is closed
    by then, and the interpreter's own teardown (releasing the model, the store client's
    channels and every module: a quarter of a second here) would only delay the prompt."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader that left (`| head`)
            stream.flush()
    os._exit(code)
