"""The ``quorum`` typer app and what every command shares: its consoles, ``run`` (settings,
asyncio, a QuorumError as one red sentence and a non-zero exit), the common options and
their validation. Commands live in ``commands`` (the archive) and ``ask`` (answers, eval);
``main`` adds the platform ones."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from adapters.chat.options import check_range, parse_date, parse_kind
from bot.config import Settings, load_settings
from retrieval.errors import InvalidInput, QuorumError
from retrieval.models import LEVELS, Level, SearchFilters, check_kb

app = typer.Typer(
    name="quorum",
    help="Answers from your team's recordings and documents, with links to the second.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
out = Console()
err = Console(stderr=True)
T = TypeVar("T")

KbOpt = Annotated[
    str | None, typer.Option("--kb", help="Knowledge base (default: QUORUM_DEFAULT_KB).")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


def fail(message: str, code: int = 1) -> typer.Exit:
    """Print one clear sentence to stderr and return the exit to raise."""
    # The message may quote a file, an argument or a title: never read it as markup.
    err.print(Text.assemble(("Error:", "bold red"), " ", message), highlight=False)
    return typer.Exit(code)


def run(coro_fn: Callable[[Settings], Coroutine[Any, Any, T]]) -> T:
    """Load settings and run an async command, translating Quorum errors into exits."""
    try:
        settings = load_settings()
        return asyncio.run(coro_fn(settings))
    except QuorumError as exc:
        logging.getLogger("quorum").debug("command failed", exc_info=True)
        raise fail(str(exc)) from None
    except KeyboardInterrupt:
        raise fail("interrupted.", 130) from None


class Explained(logging.Formatter):
    """Log lines for a person's terminal: a Quorum error is already one sentence saying
    how to fix it, so it ends its line instead of a traceback; anything else (a bug)
    keeps its traceback."""

    def format(self, record: logging.LogRecord) -> str:
        """The line, with a Quorum error said in it rather than traced."""
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, QuorumError):
            said = {"msg": f"{record.getMessage()}: {exc}", "args": None, "exc_info": None}
            record = logging.makeLogRecord({**record.__dict__, **said, "exc_text": None})
        return super().format(record)


def launch() -> int:
    """Run the app on the command line (with whichever commands are registered)."""
    handler = logging.StreamHandler()
    handler.setFormatter(Explained("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[handler])
    app()
    return 0


def kb_name(settings: Settings, kb: str | None) -> str:
    """The knowledge base to use, validated."""
    return check_kb(kb or settings.default_kb)


def build_filters(
    speaker: str | None,
    source: str | None,
    after: str | None,
    before: str | None,
    kind: str | None = None,
    lesson: int | None = None,
    source_ids: list[str] | None = None,
) -> SearchFilters:
    """SearchFilters from command-line options, validated."""
    start = parse_date(after, f"--after {after!r}")
    end = parse_date(before, f"--before {before!r}")
    check_range(start, end, "--{} ")
    return SearchFilters(
        speaker=speaker or None,
        source=source or None,
        source_ids=tuple(source_ids or ()),
        after=start,
        before=end,
        kind=parse_kind(kind, f"--kind {kind!r}"),
        lesson=lesson,
    )


LevelOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--level",
        help="Search only this resolution: turn, window, topic or summary (repeatable; "
        "default: chosen from the question).",
    ),
]


def parse_levels(values: list[str] | None) -> tuple[Level, ...]:
    """Levels from ``--level`` options, validated."""
    levels: list[Level] = []
    for value in values or ():
        if value not in LEVELS:
            raise InvalidInput(f"Unknown level {value!r}; use one of {', '.join(LEVELS)}.")
        levels.append(value)
    return tuple(levels)


SpeakerOpt = Annotated[str | None, typer.Option(help="Only passages by this speaker.")]
SourceOpt = Annotated[str | None, typer.Option(help="Only sources whose title matches.")]
AfterOpt = Annotated[str | None, typer.Option(help="Recorded on or after (YYYY-MM-DD).")]
BeforeOpt = Annotated[str | None, typer.Option(help="Recorded on or before (YYYY-MM-DD).")]
