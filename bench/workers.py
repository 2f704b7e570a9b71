"""Ingest workers as a team runs them (one machine, SQLite): ``quorum serve`` as the bot
with no worker of its own, ``quorum worker`` processes, files queued with ``quorum ingest
--no-wait``; every figure is read from the jobs' own records or measured at the bot's API.

- pickup latency: a file queued while a worker is idle, queued → running (p50/p95);
- the queue's own cost per job (insert, claim, heartbeat, finish against the same SQLite
  file) against what the file itself costs (a small document, a recording);
- throughput: small documents and two recordings, with one worker and with two;
- the bot's answer latency (``POST /api/ask``, extractive: no model configured) p50/p95
  idle and while a worker transcribes, and the bot's RSS meanwhile.

Run: ``.venv/bin/python bench/workers.py [--docs 40] [--asks 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.table import Table

from bench.common import percentile, temp_server
from bot.jobs import JobTable
from bot.sessions import SessionStore
from tests.media_fixtures import speak
from tests.test_jobs import SAID
from tests.test_lifecycle import free_port

QUORUM = Path(sys.executable).parent / "quorum"
out = Console()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def quorum(env: dict[str, str], *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(QUORUM), *args, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await proc.communicate()
    if proc.returncode:
        raise SystemExit(f"quorum {' '.join(args)} failed: {stderr.decode()[-400:]}")
    return stdout.decode()


@contextlib.asynccontextmanager
async def process(env: dict[str, str], log: Path, *args: str) -> AsyncIterator[int]:
    with log.open("ab") as f:
        proc = await asyncio.create_subprocess_exec(str(QUORUM), *args, env=env, stdout=f, stderr=f)
        try:
            yield proc.pid
        finally:
            proc.terminate()
            await proc.wait()


async def finished(data: Path, ids: list[int], within_s: float = 1800) -> list[dict[str, float]]:
    """Wait for jobs ``ids`` to end; their created/started/finished times."""
    deadline = time.monotonic() + within_s
    async with SessionStore.open(data / "sessions.sqlite3") as s:
        table = JobTable(s.driver)
        while time.monotonic() < deadline:
            jobs = await table.many(ids)
            if all(j.state in ("done", "failed", "cancelled") for j in jobs):
                return [
                    {
                        "created": j.created_at,
                        "started": j.started_at or 0,
                        "ended": j.finished_at or 0,
                    }
                    for j in jobs
                ]
            await asyncio.sleep(0.2)
    raise SystemExit("jobs did not finish in time")


def ids_of(listing: str) -> list[int]:
    return [int(line.split("\t")[0]) for line in listing.splitlines() if line.strip()]


async def queue_cost(data: Path, n: int = 200) -> float:
    """Milliseconds of the queue's own statements per job (insert, claim, two heartbeats,
    finish) on the same SQLite file, with no file behind them."""
    async with SessionStore.open(data / "bench-queue.sqlite3") as s:
        table = JobTable(s.driver)
        t0 = time.perf_counter()
        for i in range(n):
            job, _ = await table.insert("add", "write", "bench", "cli", "", f"/f{i}", f"k{i}")
            claimed = await table.claim("write", "w", 30.0)
            assert claimed is not None
            await table.beat(job.id, "w", 0.5)
            await table.beat(job.id, "w", 1.0)
            await table.finish(job.id, "w", "done", result="added")
        return (time.perf_counter() - t0) / n * 1000


async def asks(http: aiohttp.ClientSession, url: str, n: int) -> list[float]:
    """``n`` questions asked one after another; each one's seconds."""
    took: list[float] = []
    for i in range(n):
        t0 = time.perf_counter()
        body = {"question": f"Who owns the billing checklist? ({i})"}
        async with http.post(
            f"{url}/api/ask", json=body, headers={"Authorization": "Bearer tok"}
        ) as r:
            assert r.status == 200, await r.text()
            await r.read()
        took.append(time.perf_counter() - t0)
    return took


async def main(docs: int, n_asks: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        async with temp_server(root / "weaviate") as weaviate:
            data = root / "data"
            env = {
                **os.environ,
                "QUORUM_DATA_DIR": str(data),
                "QUORUM_WEAVIATE_MODE": "local",
                "QUORUM_WEAVIATE_URL": weaviate.url,
                "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate.grpc_port),
                "QUORUM_SERVE_WORKERS": "0",
                "QUORUM_API_TOKENS": "tok:default",
                "QUORUM_HTTP_HOST": "127.0.0.1",
                "QUORUM_HTTP_PORT": str(free_port()),
            }
            for key in ("ANTHROPIC_API_KEY", "QUORUM_LLM", "QUORUM_DATABASE_URL"):
                env.pop(key, None)
            files = root / "files"
            files.mkdir()
            out.print("Making recordings with espeak-ng…")
            short = speak(files / "planning.wav", SAID * 2, gap_s=1.5)
            long = speak(files / "all-hands.wav", SAID * 6, gap_s=1.5)
            second = speak(files / "retro.wav", SAID * 2, gap_s=2.0)
            await quorum(env, "ingest", str(files / "planning.wav"))  # something to answer from
            url = f"http://127.0.0.1:{env['QUORUM_HTTP_PORT']}"
            rows: list[tuple[str, str]] = []
            async with (
                process(env, root / "serve.log", "serve") as bot,
                aiohttp.ClientSession() as http,
            ):
                while True:
                    with contextlib.suppress(aiohttp.ClientError):
                        async with http.get(f"{url}/readyz") as r:
                            if r.status == 200:
                                break
                    await asyncio.sleep(0.5)
                rss_idle = rss_mb(bot)
                await asks(http, url, 3)  # warm
                idle = await asks(http, url, n_asks)

                # Pickup latency: one small file at a time, a worker idle.
                async with process(env, root / "w1.log", "worker"):
                    await asyncio.sleep(8)  # started and polling
                    picks: list[float] = []
                    doc_s: list[float] = []
                    for i in range(10):
                        note = files / f"pick-{i}.md"
                        note.write_text(f"# Pick {i}\n\nThe code word is pk{i}zz.\n")
                        [t] = await finished(
                            data, ids_of(await quorum(env, "ingest", str(note), "--no-wait"))
                        )
                        picks.append(t["started"] - t["created"])
                        doc_s.append(t["ended"] - t["started"])
                    # A recording's own cost, and the bot while a worker transcribes.
                    ids = ids_of(await quorum(env, "ingest", str(long.path), "--no-wait"))
                    await asyncio.sleep(3)
                    busy = await asks(http, url, n_asks)
                    rss_busy = rss_mb(bot)
                    [rec] = await finished(data, ids)
                rec_s = rec["ended"] - rec["started"]

                # Throughput: documents and two recordings, one worker then two.
                through: dict[int, float] = {}
                for workers in (1, 2):
                    batch = files / f"batch-{workers}"
                    batch.mkdir()
                    for i in range(docs):
                        (batch / f"doc-{i:03d}.md").write_text(
                            f"# Doc {i}\n\nWord w{workers}x{i}.\n"
                        )
                    for rec_path in (short.path, second.path):
                        (batch / f"{workers}-{rec_path.name}").write_bytes(
                            rec_path.read_bytes() + bytes(workers)
                        )
                    ids = ids_of(await quorum(env, "ingest", str(batch), "--no-wait"))
                    async with contextlib.AsyncExitStack() as stack:
                        for w in range(workers):
                            await stack.enter_async_context(
                                process(env, root / f"t{workers}-{w}.log", "worker")
                            )
                        ended = await finished(data, ids)
                    first = min(t["started"] for t in ended)
                    through[workers] = max(t["ended"] for t in ended) - first
                rss_after = rss_mb(bot)
            cost_ms = await queue_cost(root)

        def ms(values: list[float]) -> str:
            p50, p95 = percentile(values, 50) * 1000, percentile(values, 95) * 1000
            return f"p50 {p50:.0f} ms, p95 {p95:.0f} ms"

        doc_p50 = max(1e-9, percentile(doc_s, 50))
        ratio = percentile(busy, 95) / percentile(idle, 95)
        rows += [
            ("pickup latency, queued → running (idle SQLite worker)", ms(picks)),
            ("the queue's own cost per job (insert, claim, 2 beats, finish)", f"{cost_ms:.1f} ms"),
            ("a small document's job (worker time)",
             f"{ms(doc_s)} (queue: {100 * cost_ms / 1000 / doc_p50:.1f} % of p50)"),
            (f"a recording's job ({long.duration_s / 60:.1f} min of speech)",
             f"{rec_s:.1f} s (queue: {100 * cost_ms / 1000 / rec_s:.3f} %)"),
            (f"throughput, {docs} documents + 2 recordings, 1 worker", f"{through[1]:.1f} s"),
            (f"throughput, {docs} documents + 2 recordings, 2 workers", f"{through[2]:.1f} s"),
            ("bot answer (POST /api/ask, extractive), idle", ms(idle)),
            ("bot answer while a worker transcribes", f"{ms(busy)} ({ratio:.2f}× idle p95)"),
            ("bot RSS: ready / while a worker transcribes / after",
             f"{rss_idle:.0f} / {rss_busy:.0f} / {rss_after:.0f} MB"),
        ]  # fmt: skip
        table = Table(title=f"Ingest workers ({os.cpu_count()} cores, SQLite)")
        table.add_column("measure")
        table.add_column("result")
        for name, value in rows:
            table.add_row(name, value)
        out.print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=40)
    parser.add_argument("--asks", type=int, default=20)
    args = parser.parse_args()
    asyncio.run(main(args.docs, args.asks))
