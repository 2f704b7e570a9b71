"""Soak: minutes of questions and ingests through the real core (``open_core``: embedded
Weaviate with its watchdog, the session store, extractive answers), with the Weaviate
server killed (``kill -9``) every so often. Prints answers, errors while Weaviate was down
and after it came back, ingests, orphan segments and RSS.

    .venv/bin/python bench/soak.py [--seconds 180] [--kill-every 45]
    .venv/bin/python bench/soak.py --serve [--seconds 120]

``--serve`` soaks a real ``quorum serve`` instead (``bench/soak_serve.py``): API clients
that hang up, uploads in Slack, and a SIGTERM half-way; lost, duplicated, tracebacks, RSS.

Targets: 0 orphan segments, 0 errors after a restart (a question asked while the server
is down gets the "can't reach the archive" sentence; the next ones are answered), RSS
flat (end within 20% of the value after warm-up).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import tempfile
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.machine import server_pid
from bot.config import load_settings
from bot.models import Question, ThreadKey
from bot.wiring import open_core
from retrieval.errors import QuorumError
from retrieval.write.indexer import ingest

KB = "soak"
QUESTIONS = (
    "What did Ana say about the grommet cache?",
    "When is the quillet service restarted?",
    "Who owns the pager rotation?",
    "What happened in meeting 3?",
)


def rss_mb() -> float:
    """This process's resident set size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def write_meeting(folder: Path, n: int, version: int) -> Path:
    path = folder / f"2024-03-{n % 28 + 1:02d}-meeting-{n}.txt"
    path.write_text(
        "".join(
            f"[00:{m:02d}:00] Ana Ruiz: In meeting {n} version {version} the grommet cache is "
            f"flushed at step {m}; the quillet service restarts nightly; Bo owns the pager.\n"
            for m in range(40)
        )
    )
    return path


async def soak(seconds: float, kill_every: float) -> None:
    data = Path(tempfile.mkdtemp(prefix="quorum-soak-"))
    folder = data / "files"
    folder.mkdir()
    settings = load_settings(data_dir=data, weaviate_mode="embedded", anthropic_api_key=None)
    counts: Counter[str] = Counter()
    down_since: float | None = None
    async with open_core(settings) as core:
        engine, store = core.engine, core.retrieval.store
        await ingest(store, core.retrieval.embedder, KB, [write_meeting(folder, 0, 0)])
        rss_start = rss_mb()
        start = last_kill = time.monotonic()
        n = 0
        while time.monotonic() - start < seconds:
            n += 1
            if time.monotonic() - last_kill > kill_every:
                pid = server_pid(data / "weaviate-server")
                if pid:
                    os.kill(pid, signal.SIGKILL)
                    counts["kills"] += 1
                    down_since = last_kill = time.monotonic()
            thread = ThreadKey("console", "soak", "c", str(n % 5))
            question = Question(QUESTIONS[n % len(QUESTIONS)], thread, "soak", KB)
            answer = await engine.ask(question)
            if answer.kind == "error":
                counts["errors while down" if down_since else "errors after restart"] += 1
            else:
                counts[answer.kind] += 1
                down_since = None
            if n % 10 == 0:
                try:
                    report = await ingest(
                        store,
                        core.retrieval.embedder,
                        KB,
                        [write_meeting(folder, n % 7, n)],
                    )
                    counts["ingests"] += 1
                    counts["ingest failures"] += len(report.failed)
                except QuorumError:
                    counts["ingests refused (Weaviate down)"] += 1
            await asyncio.sleep(0.2)
        await asyncio.sleep(3)
        listed = sum(i.segments for i in await store.list_sources(KB))
        # Killed writes may leave segments of dead generations behind (never read); the
        # next ingest's cleanup removes them. Both counts, so neither hides the other.
        left = await store.count(KB) - listed
        await store.clean_orphans(KB, min_age_s=0)
        listed = sum(i.segments for i in await store.list_sources(KB))
        orphans = await store.count(KB) - listed
        rss_end = rss_mb()

    table = Table(title=f"Soak: {seconds:.0f} s, Weaviate killed every {kill_every:.0f} s")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in sorted(counts):
        table.add_row(key, str(counts[key]))
    table.add_row("dead segments left by killed writes (not searchable)", str(left))
    table.add_row("orphan segments after the next ingest's cleanup", str(orphans))
    table.add_row("RSS after warm-up / at end (MB)", f"{rss_start:.0f} / {rss_end:.0f}")
    Console().print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--kill-every", type=float, default=45.0)
    parser.add_argument("--serve", action="store_true", help="Soak a real quorum serve.")
    args = parser.parse_args()
    if args.serve:
        from bench.soak_serve import soak_serve

        data = Path(tempfile.mkdtemp(prefix="quorum-soak-serve-"))
        asyncio.run(soak_serve(args.seconds, data))
        return
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # Each question asked while Weaviate is down logs its traceback; the table counts them.
    logging.getLogger("quorum.engine").setLevel(logging.CRITICAL)
    asyncio.run(soak(args.seconds, args.kill_every))


if __name__ == "__main__":
    main()
