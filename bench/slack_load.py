"""Slack under load: N concurrent @mentions through the HTTP events endpoint (the real
aiohttp server Bolt runs, on a free port), each delivered twice (the second time with
``X-Slack-Retry-Num: 1``), against the Slack emulator.

The core is the real Engine (embedded Weaviate in a temp dir with the sample archive,
MiniLM, SQLite sessions, the anthropic SDK against the Claude emulator whose streamed
replies take about ``--claude-s``), or with ``--core fake`` a FakeCore that sleeps that
long in place of search + Claude. The emulators and the load generator run on their own
event loop in another thread, so the loop the bot runs on is measured alone: a ticker
task records its largest stall.

Each run is made twice, once per way of showing an answer (``--stream``): ``off``, today's
placeholder edited at most once a second, and ``all``, Slack's native streaming
(``chat.startStream``/``appendStream``/``stopStream``) below that placeholder. Beside
each other: the time to the first words of the answer the asker sees (the first edit
holding answer text, or the stream's start) and to the last (the final edit, or the
stream's end and its final rendering).

Targets: ack p99 < 100 ms, time to placeholder p99 < 1 s, every question answered once.
Run: ``.venv/bin/python bench/slack_load.py [--n 50] [--core engine|fake] [--claude-s 0.5]
[--stream off,all]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from rich.console import Console
from rich.table import Table

from adapters.slack.app import build_slack_app
from adapters.slack.events import start_http
from bench.common import percentile
from bot.config import load_settings
from bot.inflight import InFlight
from bot.models import Core, Event, PartialAnswer, ProgressEvent
from tests.emulators.anthropic import API_KEY, AnthropicEmulator, Reply
from tests.emulators.slack import BOT_TOKEN, BOT_USER, SIGNING_SECRET, Delivery, SlackEmulator
from tests.fakes import FakeCore, Script, answer

console = Console()
T = TypeVar("T")
CHANNEL = "C0GENERAL"
FIRST_WORDS = "From the archive"
ACK_P99_MS = 100.0
PLACEHOLDER_P99_S = 1.0
QUESTIONS = [
    "What are the limits of the hosted UI login page?",
    "Why did we decide to leave Auth0?",
    "How do we migrate users without password resets?",
    "Who owns the Cognito spike?",
    "What is the rollback plan?",
    "What did John say about the Management API limit?",
    "When was the Auth0 login outage?",
    "What does a custom domain need?",
]


class SideLoop:
    """An event loop in a thread, for the emulators and the load generator."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the side loop and await its result from the calling loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self.loop))

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class StallMeter:
    """The largest delay of a 5 ms sleep on the bot's loop: how long the loop was blocked."""

    def __init__(self, tick_s: float = 0.005) -> None:
        self.tick_s = tick_s
        self.worst_s = 0.0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.tick_s)
            self.worst_s = max(self.worst_s, time.perf_counter() - t0 - self.tick_s)

    def start(self) -> None:
        self.worst_s = 0.0
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _prompt(body: dict[str, Any]) -> str:
    content = body["messages"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(b.get("text", "") for b in content if isinstance(b, dict))


def claude_replies(seconds: float) -> Any:
    """Answers citing the first source, streamed over about ``seconds``."""

    def reply(body: dict[str, Any]) -> Reply:
        numbers = re.findall(r"^\[(\d+)\]", _prompt(body), flags=re.M)
        n = numbers[0] if numbers else "1"
        text = f"{FIRST_WORDS}: the team discussed this in the meeting [{n}]. " * 4
        return Reply(text=text, delay_s=seconds * 0.4, chunk_delay_s=seconds * 0.6 / 12)

    return reply


@contextlib.asynccontextmanager
async def engine_core(data_dir: Path, claude_url: str, kb: str) -> AsyncIterator[tuple[Core, str]]:
    """The real Engine on a fresh embedded Weaviate holding the sample archive."""
    from bench.common import temp_store
    from bot.engine import Engine
    from bot.llm import from_settings as llm_from_settings
    from bot.sessions import SessionStore
    from retrieval.encoding.embed import SentenceTransformerEmbedder
    from retrieval.search.search import SearchService
    from tests.sample_archive import load_sample

    settings = load_settings(
        data_dir=data_dir, anthropic_api_key=API_KEY, anthropic_base_url=claude_url
    )
    embedder = await asyncio.to_thread(SentenceTransformerEmbedder.from_path)
    async with (
        temp_store(data_dir / "weaviate") as store,
        SessionStore.open(settings.sessions_path) as sessions,
    ):
        await load_sample(store, embedder, kb)
        llm = llm_from_settings(settings)
        engine = Engine.from_settings(
            settings,
            archives=SearchService(store, embedder).archive,
            sessions=sessions,
            llm=llm,
        )
        try:
            yield engine, "real Engine: Weaviate + MiniLM + SQLite + Claude emulator"
        finally:
            if llm is not None:
                await llm.aclose()


@contextlib.asynccontextmanager
async def fake_core(data_dir: Path, n: int, seconds: float) -> AsyncIterator[tuple[Core, str]]:
    """A FakeCore that takes ``seconds`` per answer, with progress and partial events."""
    core = FakeCore(data_dir / "claims.sqlite3")
    words = [f"{FIRST_WORDS}: the team", f"{FIRST_WORDS}: the team discussed this"]
    events: tuple[Event, ...] = (
        ProgressEvent("searching 'auth'"),
        *(PartialAnswer(w) for w in words),
    )
    for _ in range(2 * (n + 1)):  # both ways of showing, each with a warm-up question
        core.enqueue(Script(answer(), events=events, delay_s=seconds / 4))
    try:
        yield core, f"FakeCore sleeping {seconds:.1f} s in place of search + Claude"
    finally:
        await core.close()


@dataclass
class Sent:
    ts: str
    at: float  # time.time() just before the first delivery
    deliveries: list[Delivery]


async def fire(slack: SlackEmulator, n: int) -> list[Sent]:
    """Post n mentions at once; deliver each event twice (the second as a retry)."""

    async def one(i: int) -> Sent:
        text = f"<@{BOT_USER}> {QUESTIONS[i % len(QUESTIONS)]} (#{i})"
        msg = slack.user_posts(CHANNEL, text, user=f"U0USER{i:03d}")
        event = slack.event(msg, "app_mention")
        at = time.time()
        first = await slack.deliver_event(event)
        retry = await slack.deliver_event(event, retry_num=1)
        return Sent(msg.ts, at, [first, retry])

    return list(await asyncio.gather(*(one(i) for i in range(n))))


async def settled(slack: SlackEmulator, sent: list[Sent], timeout_s: float) -> None:
    """Wait until every thread holds a final answer (with feedback buttons or a warning)."""

    def done() -> bool:
        for s in sent:
            replies = [m for m in slack.thread(CHANNEL, s.ts) if m.bot_id]
            final = any(
                any(b["type"] == "actions" for b in m.blocks) or ":warning:" in m.all_text()
                for m in replies
            )
            if not final:
                return False
        return True

    await slack.wait_for(done, within_s=timeout_s)


async def bench(n: int, core_kind: str, seconds: float, modes: list[str]) -> None:
    side = SideLoop()
    claude = AnthropicEmulator(default=claude_replies(seconds))
    await side.run(claude.start())
    results: list[Timings] = []
    with tempfile.TemporaryDirectory(prefix="quorum-slack-bench-") as tmp:
        opened = (
            engine_core(Path(tmp), claude.url, "slackbench")
            if core_kind == "engine"
            else fake_core(Path(tmp), n, seconds)
        )
        async with opened as (core, label):
            for mode in modes:
                console.print(f"[bold]core:[/] {label}; {n} mentions, each delivered twice")
                results.append(await one_run(side, core, Path(tmp), n, mode, label))
    await side.run(claude.stop())
    side.close()
    compare(results, n)


async def one_run(side: SideLoop, core: Core, tmp: Path, n: int, mode: str, label: str) -> Timings:
    """n concurrent mentions against a fresh Slack emulator, answers shown as ``mode``."""
    slack = SlackEmulator()
    await side.run(slack.start())
    meter = StallMeter()
    settings = load_settings(
        data_dir=tmp,
        slack_bot_token=BOT_TOKEN,
        slack_signing_secret=SIGNING_SECRET,
        slack_api_url=slack.api_url,
        slack_kb="slackbench",
        slack_stream=mode,
    )
    background = InFlight()
    session = aiohttp.ClientSession()  # as run_slack does: kept-alive connections
    app = build_slack_app(core, settings, background=background, session=session)
    runner = await start_http(app, 0, "127.0.0.1")
    slack.target = f"http://127.0.0.1:{runner.addresses[0][1]}/slack/events"
    # one warm-up question (auth.test, model load, first connections)
    await side.run(fire(slack, 1))
    await background.drain()
    slack.calls.clear()

    meter.start()
    t0 = time.time()
    sent = await side.run(fire(slack, n))
    await side.run(settled(slack, sent, timeout_s=180))
    await background.drain()
    wall = time.time() - t0
    await meter.stop()
    await runner.cleanup()
    await session.close()
    await side.run(slack.stop())
    report(slack, sent, wall, meter.worst_s, f"{label}; --stream {mode}")
    return timings(slack, sent, mode)


@dataclass
class Timings:
    """Seconds from each question to the first words of its answer and to the last."""

    mode: str
    first: list[float]
    last: list[float]
    calls: float  # Web API calls that changed the answer, per answer


def timings(slack: SlackEmulator, sent: list[Sent], mode: str) -> Timings:
    """When the asker saw words: an edit holding answer text (``off``, or a refused
    stream) or a stream's start; the last: the final edit, append or stop."""
    first, last, calls = [], [], 0
    for s in sent:
        ours = {m.ts for m in slack.thread(CHANNEL, s.ts) if m.bot_id}
        ours |= {m.ts for m in slack.deleted if m.thread_ts == s.ts}
        shown = [
            c
            for c in slack.calls
            if c.ok
            and (
                (c.method == "chat.startStream" and c.args.get("thread_ts") == s.ts)
                or (c.method in STREAM_OR_EDIT and c.args.get("ts") in ours)
            )
        ]
        words = [c.at for c in shown if FIRST_WORDS in str(c.args.get("markdown_text") or "")]
        words += [c.at for c in shown if c.method == "chat.update" and FIRST_WORDS in _text(c)]
        if words:
            first.append(min(words) - s.at)
            last.append(max(c.at for c in shown) - s.at)
        calls += len(shown)
    return Timings(mode, first, last, calls / max(1, len(sent)))


STREAM_OR_EDIT = ("chat.appendStream", "chat.stopStream", "chat.update")


def _text(call: Any) -> str:
    return str(call.args.get("text") or "") + str(call.args.get("blocks") or "")


def compare(results: list[Timings], n: int) -> None:
    table = Table(title=f"First and last words of the answer, {n} concurrent questions")
    for col in ("--stream", "first words p50", "p99", "last words p50", "p99", "calls/answer"):
        table.add_column(col, justify="right")
    for r in results:
        table.add_row(
            r.mode,
            *(f"{percentile(xs, q):.2f} s" if xs else "-" for xs in (r.first,) for q in (50, 99)),
            *(f"{percentile(xs, q):.2f} s" if xs else "-" for xs in (r.last,) for q in (50, 99)),
            f"{r.calls:.1f}",
        )
    console.print(table)


def report(slack: SlackEmulator, sent: list[Sent], wall: float, stall: float, label: str) -> None:
    acks = [d.seconds * 1000 for s in sent for d in s.deliveries]
    statuses = {d.status for s in sent for d in s.deliveries}
    placeholders, finals, answered, duplicates = [], [], 0, 0
    for s in sent:
        posts = [
            c for c in slack.called("chat.postMessage", ok=True) if c.args.get("thread_ts") == s.ts
        ]
        if posts:
            placeholders.append(min(c.at for c in posts) - s.at)
        replies = [m for m in slack.thread(CHANNEL, s.ts) if m.bot_id]
        answered += bool(replies)
        duplicates += max(0, len(replies) - 1)
        updates = [
            c.at
            for c in slack.called("chat.update", ok=True)
            if replies and c.args.get("ts") == replies[0].ts
        ]
        if updates:
            finals.append(max(updates) - s.at)
    errors = slack.errors()

    def row(name: str, value: str, target: str, ok: bool | None) -> None:
        mark = "" if ok is None else ("[green]ok[/]" if ok else "[red]miss[/]")
        table.add_row(name, value, target, mark)

    table = Table(title=f"Slack load: {len(sent)} concurrent mentions ({label})")
    for col, justify in (("metric", "left"), ("value", "right"), ("target", "right"), ("", "left")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    p50, p99 = percentile(acks, 50), percentile(acks, 99)
    row("ack latency p50", f"{p50:.1f} ms", "", None)
    row("ack latency p99", f"{p99:.1f} ms", f"< {ACK_P99_MS:.0f} ms", p99 < ACK_P99_MS)
    row("ack statuses", ", ".join(map(str, sorted(statuses))), "200", statuses == {200})
    if placeholders:
        row("time to placeholder p50", f"{percentile(placeholders, 50):.3f} s", "", None)
        ok = percentile(placeholders, 99) < PLACEHOLDER_P99_S
        row("time to placeholder p99", f"{percentile(placeholders, 99):.3f} s", "< 1 s", ok)
    if finals:
        row("time to final answer p50", f"{percentile(finals, 50):.2f} s", "", None)
        row("time to final answer p99", f"{percentile(finals, 99):.2f} s", "", None)
    row("largest event-loop stall", f"{stall * 1000:.1f} ms", "", None)
    row("answers delivered", f"{answered}/{len(sent)}", str(len(sent)), answered == len(sent))
    row("duplicate answers", str(duplicates), "0", duplicates == 0)
    row("Slack API errors", str(len(errors)), "0", not errors)
    updates_total = len(slack.called("chat.update"))
    row("chat.update calls / answer", f"{updates_total / max(1, answered):.1f}", "", None)
    row("wall time", f"{wall:.2f} s", "", None)
    console.print(table)
    if errors:
        console.print(f"[red]first error:[/] {errors[0].method} {errors[0].error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="concurrent mentions (default 50)")
    parser.add_argument(
        "--core",
        choices=("engine", "fake"),
        default="engine",
        help="the real Engine with the Claude emulator (default), or a sleeping FakeCore",
    )
    parser.add_argument("--claude-s", type=float, default=0.5, help="seconds per Claude reply")
    parser.add_argument(
        "--stream",
        default="off,all",
        help="ways of showing an answer, compared (QUORUM_SLACK_STREAM; default off,all)",
    )
    args = parser.parse_args()
    modes = [m.strip() for m in args.stream.split(",") if m.strip()]
    if not modes or any(m not in ("off", "all", "panel") for m in modes):
        parser.error("--stream takes off, all or panel, comma-separated")
    asyncio.run(bench(args.n, args.core, args.claude_s, modes))


if __name__ == "__main__":
    main()
