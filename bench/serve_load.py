"""``quorum serve`` under load, on one replica and on two sharing PostgreSQL.

The set-up is a team's: one Weaviate (``bench.common.temp_server``) with the sample
archive ingested by ``quorum ingest``, one PostgreSQL (``tests.postgres_server``), two
``quorum serve`` processes with ``QUORUM_DATABASE_URL`` pointing at it, the JSON API on
each, Slack (the emulator, Events over HTTP) and Claude (the emulator, streaming
``--claude-ms`` per answer).

Each round asks N questions at once, half through ``POST /api/ask`` and half as Slack
mentions. With one replica everything goes to replica A. With two, API requests
alternate between the replicas (a load balancer) and every Slack event is delivered to
BOTH, so each answer also proves the exactly-once claim. A question is lost when no
answer arrives within ``--timeout``; a duplicate is a second bot reply in a thread, or a
stored exchange beyond one per question.

``--soak SECONDS`` then keeps a steady stream of questions going against both replicas
and samples each one's RSS and open file descriptors, to show neither grows.

Run: ``.venv/bin/python bench/serve_load.py [--questions 20] [--soak 180]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import asyncpg
from rich.console import Console
from rich.table import Table

from adapters.chat.conversation import APOLOGY
from bench.common import percentile, temp_server
from tests.emulators.anthropic import API_KEY, AnthropicEmulator, Reply
from tests.emulators.slack import BOT_TOKEN, BOT_USER, SIGNING_SECRET, Message, SlackEmulator
from tests.postgres_server import free_port, running_postgres

REPO = Path(__file__).resolve().parent.parent
QUORUM = Path(sys.executable).parent / "quorum"
TOKEN, KB = "bench", "bench"
CHANNEL = "C0GENERAL"
ANSWER = "We moved to **Cognito** because Auth0's pricing grew with monthly users [1]."


@dataclass
class Replica:
    """One ``quorum serve`` process: its API and Slack URLs."""

    name: str
    proc: asyncio.subprocess.Process
    api: str
    slack: str

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def open_files(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))


@dataclass
class Round:
    """What one round of questions gave."""

    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    lost: int = 0
    duplicates: int = 0
    seconds: float = 0.0


def questions() -> list[str]:
    lines = (REPO / "examples" / "eval.jsonl").read_text().splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


@contextlib.asynccontextmanager
async def serve(name: str, env: dict[str, str], data: Path) -> AsyncIterator[Replica]:
    """A ``quorum serve`` replica, ready (/readyz green); SIGTERM on exit."""
    http, slack = free_port(), free_port()
    env = env | {
        "QUORUM_DATA_DIR": str(data / name),
        "QUORUM_HTTP_PORT": str(http),
        "QUORUM_HTTP_HOST": "127.0.0.1",
        "QUORUM_SLACK_PORT": str(slack),
    }
    log = open(data / f"{name}.log", "wb")  # noqa: SIM115, ASYNC230 (closed below)
    proc = await asyncio.create_subprocess_exec(
        str(QUORUM), "serve", env=env, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL
    )
    replica = Replica(name, proc, f"http://127.0.0.1:{http}", f"http://127.0.0.1:{slack}")
    try:
        yield replica
    finally:
        if proc.returncode is None:
            proc.terminate()
            await proc.wait()
        log.close()


async def wait_ready(http: aiohttp.ClientSession, replica: Replica) -> None:
    while True:
        if replica.proc.returncode is not None:
            raise SystemExit(f"replica {replica.name} exited while starting; see its log")
        with contextlib.suppress(aiohttp.ClientError):
            async with http.get(f"{replica.api}/readyz") as r:
                if r.status == 200:
                    return
        await asyncio.sleep(0.5)


class Load:
    """Asks questions through the API and Slack and watches the answers arrive."""

    def __init__(self, http: aiohttp.ClientSession, slack: SlackEmulator, db_url: str) -> None:
        self.http, self.slack, self.db_url = http, slack, db_url
        self.texts = itertools.cycle(questions())
        self.serial = itertools.count()

    async def api(self, replica: Replica, out: Round, timeout_s: float) -> None:
        t = time.perf_counter()
        body = {"question": f"{next(self.texts)} (#{next(self.serial)})"}
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            async with asyncio.timeout(timeout_s):
                async with self.http.post(
                    f"{replica.api}/api/ask", json=body, headers=headers
                ) as r:
                    answer = await r.json()
            if r.status != 200 or answer.get("kind") == "error":
                out.errors += 1
                out.reasons[f"api {r.status} {answer.get('kind') or answer.get('error')}"] += 1
                return
        except TimeoutError:
            out.lost += 1
            return
        except aiohttp.ClientError as exc:
            out.errors += 1
            out.reasons[f"api {type(exc).__name__}"] += 1
            return
        out.latencies_ms.append((time.perf_counter() - t) * 1000)

    async def mention(self, replicas: list[Replica], out: Round, timeout_s: float) -> None:
        text = f"<@{BOT_USER}> {next(self.texts)} (#{next(self.serial)})"
        msg = self.slack.user_posts(CHANNEL, text)
        body = json.dumps(self.slack.event(msg, "app_mention"))
        t = time.perf_counter()

        async def deliver(replica: Replica) -> int:
            headers = self.slack.signed(body, "application/json")
            url = f"{replica.slack}/slack/events"
            async with self.http.post(url, data=body.encode(), headers=headers) as r:
                return r.status

        try:
            statuses = await asyncio.gather(*(deliver(r) for r in replicas))
        except aiohttp.ClientError as exc:
            out.errors += 1
            out.reasons[f"slack {type(exc).__name__}"] += 1
            return
        if any(s != 200 for s in statuses):
            out.errors += 1
            out.reasons[f"slack delivery {statuses}"] += 1
            return
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            replies = self.replies(msg.ts)
            if any(self.finished(m) for m in replies):
                out.latencies_ms.append((time.perf_counter() - t) * 1000)
                await asyncio.sleep(1.0)  # a second replica's answer would be here by now
                extra = len(self.replies(msg.ts)) - 1
                out.duplicates += extra
                if APOLOGY in replies[0].all_text():
                    out.errors += 1
                    out.reasons["slack apology"] += 1
                return
            await asyncio.sleep(0.05)
        out.lost += 1

    def replies(self, ts: str) -> list[Message]:
        return [m for m in self.slack.thread(CHANNEL, ts) if m.bot_id]

    @staticmethod
    def finished(msg: Message) -> bool:
        return any(b.get("type") == "actions" for b in msg.blocks)  # the buttons come last

    async def exchanges(self) -> int:
        conn = await asyncpg.connect(self.db_url)
        try:
            return int(await conn.fetchval("SELECT count(*) FROM exchanges"))
        finally:
            await conn.close()

    async def round(
        self, replicas: list[Replica], n: int, timeout_s: float, count_stored: bool = True
    ) -> Round:
        """``n`` questions at once: half API (round-robin), half Slack (to every replica).
        ``count_stored``: also count exchanges stored beyond one per question (only when
        no other round runs at the same time)."""
        out = Round()
        before = await self.exchanges() if count_stored else 0
        t = time.perf_counter()
        jobs = []
        for i in range(n):
            if i % 2 == 0:
                jobs.append(self.api(replicas[(i // 2) % len(replicas)], out, timeout_s))
            else:
                jobs.append(self.mention(replicas, out, timeout_s))
        await asyncio.gather(*jobs)
        out.seconds = time.perf_counter() - t
        if count_stored:
            stored = await self.exchanges() - before
            out.duplicates = max(out.duplicates, stored - n)  # at most one exchange each
        return out


async def ingest(env: dict[str, str], console: Console) -> None:
    console.print("ingesting the sample archive ...")
    proc = await asyncio.create_subprocess_exec(
        str(QUORUM),
        "ingest",
        str(REPO / "examples" / "recordings"),
        str(REPO / "examples" / "docs"),
        "--kb",
        KB,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
    )
    if await proc.wait() != 0:
        raise SystemExit("quorum ingest failed")


async def main(n: int, soak_s: float, claude_ms: float, timeout_s: float) -> None:
    console = Console(width=120)  # the tables stay whole when piped to a file
    chunk_s = claude_ms / 1000 / max(1, len(ANSWER.split()))
    with tempfile.TemporaryDirectory() as tmp, running_postgres() as pg:
        data = Path(tmp)
        db_url = await pg.create_database("quorum")
        async with (
            temp_server(data / "weaviate") as weaviate,
            SlackEmulator() as slack,
            AnthropicEmulator(default=Reply(text=ANSWER, chunk_delay_s=chunk_s)) as claude,
            aiohttp.ClientSession() as http,
        ):
            base = {k: v for k, v in os.environ.items() if not k.startswith(("QUORUM_", "SLACK_"))}
            env = base | {
                "QUORUM_WEAVIATE_MODE": "local",
                "QUORUM_WEAVIATE_URL": weaviate.url,
                "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate.grpc_port),
                "QUORUM_DATABASE_URL": db_url,
                "QUORUM_API_TOKENS": f"{TOKEN}:{KB}",
                "SLACK_BOT_TOKEN": BOT_TOKEN,
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "QUORUM_SLACK_API_URL": slack.api_url,
                "QUORUM_SLACK_KB": KB,
                "ANTHROPIC_API_KEY": API_KEY,
                "ANTHROPIC_BASE_URL": claude.url,
            }
            await ingest(env | {"QUORUM_DATA_DIR": str(data / "ingest")}, console)
            async with (
                serve("a", env, data) as a,
                serve("b", env, data) as b,
            ):
                t0 = time.monotonic()
                console.print("starting two replicas ...")
                await asyncio.gather(wait_ready(http, a), wait_ready(http, b))
                console.print(f"both ready after {time.monotonic() - t0:.0f} s")
                load = Load(http, slack, db_url)
                await load.round([a, b], 2, timeout_s)  # one warm-up question each path
                table = Table(title=f"quorum serve under load: {n} questions at once")
                for col in ("replicas", "answers/s", "p50 ms", "p95 ms", "p99 ms", "errors"):
                    table.add_column(col, justify="right")
                for col in ("lost", "duplicates", "RSS MB"):
                    table.add_column(col, justify="right")
                reasons: Counter[str] = Counter()
                for replicas in ([a], [a, b]):
                    r = await load.round(replicas, n, timeout_s)
                    reasons += r.reasons
                    lat = r.latencies_ms
                    table.add_row(
                        str(len(replicas)),
                        f"{len(lat) / r.seconds:.2f}",
                        f"{percentile(lat, 50):.0f}",
                        f"{percentile(lat, 95):.0f}",
                        f"{percentile(lat, 99):.0f}",
                        str(r.errors),
                        str(r.lost),
                        str(r.duplicates),
                        " + ".join(f"{x.rss_mb():.0f}" for x in replicas),
                    )
                console.print(table)
                if reasons:
                    console.print(f"errors: {dict(reasons)}")
                if soak_s > 0:
                    await soak(load, [a, b], soak_s, timeout_s, console)
            console.print(f"Claude emulator requests: {len(claude.requests)}")


async def soak(
    load: Load, replicas: list[Replica], soak_s: float, timeout_s: float, console: Console
) -> None:
    """Four questions in flight at all times for ``soak_s``; a sample every tenth of it."""
    table = Table(title=f"soak: {soak_s:.0f} s, 4 questions in flight, both replicas")
    for col in ("t s", "answered", "errors", "lost", "dup", "RSS A MB", "RSS B MB"):
        table.add_column(col, justify="right")
    table.add_column("fds A", justify="right")
    table.add_column("fds B", justify="right")
    out = Round()
    stop = time.monotonic() + soak_s
    before, asked = await load.exchanges(), 0

    async def worker() -> None:
        nonlocal asked
        while time.monotonic() < stop:
            r = await load.round(replicas, 2, timeout_s, count_stored=False)
            asked += 2
            out.latencies_ms += r.latencies_ms
            out.errors += r.errors
            out.reasons += r.reasons
            out.lost += r.lost
            out.duplicates += r.duplicates  # second replies in a Slack thread

    workers = [asyncio.create_task(worker()) for _ in range(2)]
    t0 = time.monotonic()
    a, b = replicas

    def sample() -> None:
        """One row: time, answers, errors, lost, duplicates, each replica's RSS and files."""
        table.add_row(
            f"{time.monotonic() - t0:.0f}",
            str(len(out.latencies_ms)),
            str(out.errors),
            str(out.lost),
            str(out.duplicates),
            f"{a.rss_mb():.0f}",
            f"{b.rss_mb():.0f}",
            str(a.open_files()),
            str(b.open_files()),
        )

    while time.monotonic() < stop:
        sample()
        await asyncio.sleep(max(5.0, soak_s / 10))
    await asyncio.gather(*workers)
    sample()
    console.print(table)
    stored = await load.exchanges() - before
    console.print(f"soak: {asked} questions asked, {stored} exchanges stored")
    if out.reasons:
        console.print(f"errors: {dict(out.reasons)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=20, help="questions per round")
    parser.add_argument("--soak", type=float, default=0.0, help="then a soak of SECONDS")
    parser.add_argument("--claude-ms", type=float, default=800.0, help="Claude's answer time")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds before 'lost'")
    args = parser.parse_args()
    asyncio.run(main(args.questions, args.soak, args.claude_ms, args.timeout))
