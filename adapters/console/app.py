"""The terminal front end: ``quorum chat`` (one conversation, one session) and ``quorum
demo`` (ingest the sample archive, then chat with it).

Commands in the chat: ``/sources``, ``/reset``, ``/research QUESTION`` (deep mode),
``/help``, ``/quit``. On a terminal the progress and the streamed answer are shown live;
without one (stdin piped) each line read is a question, until end of input.
"""

from __future__ import annotations

import asyncio
import getpass
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from adapters.cli.app import KbOpt, err, kb_name, out, run
from adapters.cli.terminal import failure_line, plain, render_answer
from adapters.console.voices import give_voices
from adapters.http.server import local_pages
from bot.config import Settings
from bot.engine import Engine
from bot.errors import ConfigError, QuorumError
from bot.models import Actor, Event, Mode, PartialAnswer, ProgressEvent, Question, ThreadKey
from bot.wiring import open_core, open_retrieval
from bot.write import Writer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DEMO_KB = "demo"
DEMO_QUESTIONS = (
    "Why did we move off Auth0?",
    "What went wrong during the cut-over, and how was it fixed?",
    "What did Dana ask for in her security review of the migration Lambda?",
)
HELP = (
    "Ask a question about the archive; follow-ups keep the conversation's context.\n"
    "/sources lists what is in the archive, /reset forgets this conversation,\n"
    "/research QUESTION asks for deep research, /quit leaves."
)


async def read_line(prompt: Callable[[], str | None]) -> str | None:
    """One line from stdin in a daemon thread (so Ctrl-C never waits on a blocked read);
    None at end of input."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[str | None] = loop.create_future()

    def work() -> None:
        try:
            line: str | None = prompt()
        except (EOFError, KeyboardInterrupt):
            line = None

        def deliver() -> None:
            if not done.done():
                done.set_result(line)

        if not loop.is_closed():
            loop.call_soon_threadsafe(deliver)

    threading.Thread(target=work, daemon=True).start()
    return await done


def demo_paths() -> list[Path]:
    """What the demo ingests: examples/ without its README, which describes the archive
    (and quotes its answers) rather than being part of it."""
    return sorted(p for p in EXAMPLES.iterdir() if p.is_dir())


class _LiveView:
    """A spinner with the current step, replaced by the answer as it streams."""

    def __init__(self) -> None:
        self.partial = ""
        self.spinner = Spinner("dots", text=Text("Thinking...", style="dim"))

    def step(self, text: str) -> None:
        """Show the step the core is taking."""
        self.spinner.update(text=Text(text, style="dim"))

    def __rich__(self) -> RenderableType:
        if self.partial:
            return Group(Markdown(self.partial), self.spinner)
        return self.spinner


class ConsoleChat:
    """One terminal conversation on the engine, in its own thread (session)."""

    def __init__(
        self, engine: Engine, kb: str, console: Console, *, interactive: bool | None = None
    ) -> None:
        self.engine = engine
        self.kb = kb
        self.console = console
        self.interactive = sys.stdin.isatty() if interactive is None else interactive
        self.thread = ThreadKey("console", "local", kb, uuid.uuid4().hex)
        self.user = getpass.getuser()

    def _prompt(self) -> str | None:
        if self.interactive:
            return self.console.input("[bold green]you[/] \u203a ")
        line = sys.stdin.readline()
        return line.rstrip("\n") if line else None

    async def run(self) -> None:
        """Read questions until /quit or the end of input."""
        if self.interactive:
            self.console.print(
                f"[bold]Quorum[/] on knowledge base [cyan]{self.kb}[/]. {HELP}", highlight=False
            )
        while True:
            line = await read_line(self._prompt)
            if line is None:
                return
            if not await self.handle(line.strip()):
                return

    async def handle(self, line: str) -> bool:
        """Act on one line; False to stop."""
        if not line:
            return True
        command, _, rest = line.partition(" ")
        match command.lower():
            case "/quit" | "/exit" | "/q":
                return False
            case "/help" | "/?":
                self.console.print(HELP, highlight=False)
            case "/reset":
                await self.engine.reset(self.thread)
                self.thread = ThreadKey("console", "local", self.kb, uuid.uuid4().hex)
                self.console.print("[dim]Started a new conversation.[/]")
            case "/sources":
                await self.show_sources()
            case "/research":
                if not rest.strip():
                    self.console.print("Usage: /research QUESTION", highlight=False)
                else:
                    await self.ask(rest.strip(), "deep")
            case _ if command.startswith("/"):
                self.console.print(plain(f"Unknown command {command}. {HELP}"), highlight=False)
            case _:
                await self.ask(line, "quick")
        return True

    async def ask(self, text: str, mode: Mode) -> None:
        """Ask the engine and show progress, the streamed answer, then the final answer."""
        question = Question(text=text, thread=self.thread, user=self.user, kb=self.kb, mode=mode)
        if not self.interactive:
            answer = await self.engine.ask(question)
        else:
            view = _LiveView()
            with Live(view, console=self.console, transient=True, refresh_per_second=12) as live:

                async def on_event(event: Event) -> None:
                    if isinstance(event, ProgressEvent):
                        view.step(event.text)
                    elif isinstance(event, PartialAnswer):
                        view.partial = event.text
                    live.refresh()

                answer = await self.engine.ask(question, on_event)
        render_answer(self.console, answer)
        self.console.print()

    async def show_sources(self) -> None:
        """List the knowledge base's sources."""
        try:
            infos = await self.engine.sources(self.kb)
        except QuorumError as exc:
            self.console.print(Text(str(exc), style="red"))
            return
        if not infos:
            self.console.print("The archive is empty. Add files with `quorum ingest PATH`.")
            return
        table = Table(show_edge=False)
        for col in ("title", "kind", "date", "speakers", "passages"):
            table.add_column(col)
        for i in infos:
            s = i.source
            table.add_row(
                plain(s.title, s.url),
                s.kind,
                s.recorded_at.isoformat() if s.recorded_at else "",
                plain(", ".join(s.speakers[:4]) + (" ..." if len(s.speakers) > 4 else "")),
                str(i.segments),
            )
        self.console.print(table)


def say_pages(pages: str | None, settings: Settings) -> None:
    """Where the links in answers open."""
    if pages:
        out.print(f"[dim]Links in answers open Quorum's pages at {pages} while this chat runs.[/]")
    else:
        out.print(
            f"[dim]Port {settings.http_port} is taken; links open at {settings.page_url} if "
            "`quorum serve` runs there.[/]",
            highlight=False,
        )


def chat_command(kb: KbOpt = None) -> None:
    """Chat with the archive in the terminal (follow-ups keep their context)."""

    async def go(settings: Settings) -> None:
        # open_core starts loading the embedding model while Weaviate starts and the
        # user types the first question.
        async with open_core(settings) as core, local_pages(settings, core) as pages:
            say_pages(pages, settings)
            await ConsoleChat(core.engine, kb_name(settings, kb), out).run()

    run(go)


def demo_command(
    chat: Annotated[bool, typer.Option(help="Open the chat after ingesting.")] = True,
    speak: Annotated[
        bool, typer.Option(help="Give the sample recordings audio with espeak-ng (once).")
    ] = True,
) -> None:
    """Ingest the sample archive (examples/) into the "demo" knowledge base and chat with it."""

    async def go(settings: Settings) -> None:
        if not EXAMPLES.is_dir():
            raise ConfigError(
                f"The sample archive is missing ({EXAMPLES}); run `quorum demo` from a "
                "checkout of the Quorum repository."
            )
        async with open_retrieval(settings, warm=True) as r:
            t0 = time.perf_counter()
            with err.status("Ingesting the sample archive...", spinner="dots"):
                written = await Writer.of(r).add(DEMO_KB, demo_paths(), Actor("demo"))
            report = written.report
            r.search.forget_sources(DEMO_KB)
            changed = report.count("added") + report.count("updated")
            out.print(
                f"Sample archive: {len(report.results)} files in knowledge base "
                f"[cyan]{DEMO_KB}[/] ({changed} indexed, {report.count('skipped')} unchanged, "
                f"{time.perf_counter() - t0:.1f} s).",
                highlight=False,
            )
            for failed in report.failed:
                err.print(failure_line(failed.path, failed.reason), highlight=False)
            t1 = time.perf_counter()
            spoken: list[str] = []
            if speak:
                with err.status("Speaking the sample recordings with espeak-ng...", spinner="dots"):
                    spoken = await give_voices(r, DEMO_KB)
            if spoken:
                out.print(
                    f"Spoke {len(spoken)} recordings with espeak-ng, a voice per speaker "
                    f"({time.perf_counter() - t1:.0f} s, kept in {settings.media_dir}).",
                    highlight=False,
                )
            out.print("\nTry asking:")
            for q in DEMO_QUESTIONS:
                out.print(f"  [bold]{q}[/]", highlight=False)
            out.print("  ...then a follow-up, like [bold]What did he say about the cost?[/]\n")
            if not chat:
                return
            async with (
                open_core(settings, retrieval=r) as core,
                local_pages(settings, core) as pages,
            ):
                say_pages(pages, settings)
                await ConsoleChat(core.engine, DEMO_KB, out).run()

    run(go)
