"""``quorum serve`` as an operator runs it: how long until /healthz and /readyz answer,
whether the first answer after /readyz is green is as fast as later ones, and how long a
SIGTERM takes to stop everything.

The path is the user's: ``quorum ingest`` of the sample archive into a temp data dir
(embedded Weaviate), then ``quorum serve`` with the JSON API alone (no platform, no Claude
key: extractive answers), distinct questions from ``examples/eval.jsonl`` through
``POST /api/ask`` one after another, then SIGTERM. Each question is new to the process
(nothing cached), so the first answer pays only what a cold start would add.

Run: ``.venv/bin/python bench/serve_start.py [--questions 6]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
QUORUM = Path(sys.executable).parent / "quorum"
TOKEN = "bench"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def weaviate_alive(data_dir: Path) -> bool:
    """True when a weaviate-server on this data dir is still running."""
    needle = f"PERSISTENCE_DATA_PATH={data_dir / 'weaviate-server' / 'weaviate'}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if b"weaviate" in (proc / "cmdline").read_bytes() and needle in (
                proc / "environ"
            ).read_bytes().split(b"\0"):
                return True
        except OSError:
            continue
    return False


async def wait_for(http: aiohttp.ClientSession, url: str, t0: float) -> float:
    while True:
        try:
            async with http.get(url) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)


async def main(n: int) -> None:
    console = Console()
    questions = [
        json.loads(line)["question"]
        for line in (REPO / "examples" / "eval.jsonl").read_text().splitlines()
        if line.strip()
    ][:n]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("QUORUM_", "SLACK_"))}
        env.pop("ANTHROPIC_API_KEY", None)
        env.pop("DISCORD_TOKEN", None)
        env |= {"QUORUM_DATA_DIR": str(data), "QUORUM_API_TOKENS": f"{TOKEN}:bench"}
        console.print("ingesting the sample archive ...")
        ingest = await asyncio.create_subprocess_exec(
            str(QUORUM),
            "ingest",
            str(REPO / "examples" / "recordings"),
            str(REPO / "examples" / "docs"),
            "--kb",
            "bench",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
        )
        assert await ingest.wait() == 0, "ingest failed"

        port = free_port()
        env |= {"QUORUM_HTTP_PORT": str(port), "QUORUM_HTTP_HOST": "127.0.0.1"}
        url = f"http://127.0.0.1:{port}"
        t0 = time.monotonic()
        serve = await asyncio.create_subprocess_exec(
            str(QUORUM), "serve", env=env, stderr=asyncio.subprocess.DEVNULL
        )
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with aiohttp.ClientSession() as http:
            alive = await wait_for(http, f"{url}/healthz", t0)
            ready = await wait_for(http, f"{url}/readyz", t0)
            latencies = []
            for q in questions:
                t = time.perf_counter()
                async with http.post(f"{url}/api/ask", json={"question": q}, headers=headers) as r:
                    body = await r.json()
                    assert r.status == 200 and body["kind"] in ("extractive", "nothing_found")
                latencies.append((time.perf_counter() - t) * 1000)
        t = time.monotonic()
        serve.send_signal(signal.SIGTERM)
        code = await serve.wait()
        stop_s = time.monotonic() - t
        left = weaviate_alive(data)

    later = latencies[1:]
    table = Table(title=f"quorum serve: start, first answer, stop ({n} distinct questions)")
    for col in ("measure", "value"):
        table.add_column(col, justify="right" if col == "value" else "left")
    table.add_row("/healthz answers after", f"{alive:.1f} s")
    table.add_row("/readyz green after", f"{ready:.1f} s")
    table.add_row("first answer after /readyz", f"{latencies[0]:.0f} ms")
    if later:
        table.add_row("later answers, median", f"{statistics.median(later):.0f} ms")
        table.add_row("later answers, max", f"{max(later):.0f} ms")
    table.add_row("SIGTERM to exit", f"{stop_s:.1f} s")
    table.add_row("exit code", str(code))
    table.add_row("weaviate-server left running", "yes" if left else "no")
    console.print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=6)
    asyncio.run(main(parser.parse_args().questions))
