"""``quorum serve`` as an operator runs it: how long until /healthz and /readyz answer,
whether the first answer after /readyz is green is as fast as later ones, and how long a
SIGTERM takes to stop everything; and how long a one-shot ``quorum search`` takes, with
each embedding backend (ONNX Runtime, the default, and torch).

The path is the user's: ``quorum ingest`` of the sample archive into a temp data dir
(embedded Weaviate), then, per backend (``QUORUM_EMBED_BACKEND``):

- ``quorum search`` one-shots with no server running (cold: each starts its own embedded
  ``weaviate-server``, which its reaper stops after it; the next waits until it has);
- ``quorum serve`` with the JSON API alone (no platform, no Claude key: extractive
  answers), timed to /healthz and /readyz;
- ``quorum search`` one-shots while serve runs (warm: they share its ``weaviate-server``);
- distinct questions from ``examples/eval.jsonl`` through ``POST /api/ask`` one after
  another, then SIGTERM. Each question is new to the process (nothing cached), so the
  first answer pays only what a cold start would add.

Questions differ in cost (one encodes 10 sentences, another 140), so serve is started
``--rounds`` times with the questions rotated by one each time: each round's first
question is also asked later in another round, and the first answer is compared with
that same question asked later (the ratio), besides the later answers' median. The serve
process's CPU per answer is printed too: unlike wall time it hardly moves with the load.

Targets: ``quorum search`` < 3 s, /readyz green < 10 s. The load average is printed: on a
shared machine every figure here moves with it.

Run: ``.venv/bin/python bench/serve_start.py [--questions 6] [--searches 3]
[--rounds 2] [--backends onnx,torch]``.
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.table import Table

from bench.machine import process_cpu

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


async def stopped(data_dir: Path, timeout_s: float = 30.0) -> None:
    """Wait until no weaviate-server runs on ``data_dir``: a one-shot leaves its server to
    the reaper, which stops it within a second or two."""
    deadline = time.monotonic() + timeout_s
    while weaviate_alive(data_dir):
        if time.monotonic() > deadline:
            raise SystemExit(f"a weaviate-server on {data_dir} is still running")
        await asyncio.sleep(0.1)


async def wait_for(http: aiohttp.ClientSession, url: str, t0: float) -> float:
    while True:
        try:
            async with http.get(url) as r:
                if r.status == 200:
                    return time.monotonic() - t0
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.1)


@dataclass
class Run:
    """One backend's figures."""

    cold_search_s: list[float] = field(default_factory=list)
    warm_search_s: list[float] = field(default_factory=list)
    alive_s: list[float] = field(default_factory=list)
    ready_s: list[float] = field(default_factory=list)
    first_ms: list[float] = field(default_factory=list)
    later_ms: list[float] = field(default_factory=list)
    first_cpu_ms: list[float] = field(default_factory=list)
    later_cpu_ms: list[float] = field(default_factory=list)
    # per question: [(asked first?, wall ms, serve's CPU ms)], over every round
    asked: dict[str, list[tuple[bool, float, float]]] = field(default_factory=dict)
    stop_s: list[float] = field(default_factory=list)
    codes: list[int | None] = field(default_factory=list)
    left: bool = False

    def paired(self, cpu: bool = False) -> list[float]:
        """For each question asked first in one round and later in another: first / later
        (wall time, or the serve process's CPU time)."""
        out = []
        for runs in self.asked.values():
            first = [c if cpu else ms for is_first, ms, c in runs if is_first]
            later = [c if cpu else ms for is_first, ms, c in runs if not is_first]
            if first and later:
                out.append(statistics.median(first) / statistics.median(later))
        return out


async def one_search(env: dict[str, str], question: str) -> float:
    """Wall seconds of one ``quorum search`` process, start to exit."""
    t = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        str(QUORUM),
        "search",
        question,
        "--kb",
        "bench",
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()[-2000:]
    return time.perf_counter() - t


async def main(n: int, searches: int, rounds: int, backends: list[str]) -> None:
    console = Console()
    questions = [
        json.loads(line)["question"]
        for line in (REPO / "examples" / "eval.jsonl").read_text().splitlines()
        if line.strip()
    ]
    runs: dict[str, Run] = {}
    loads: list[float] = []
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

        # Each backend gets questions none of the others asked (nothing cached anywhere).
        pool = iter(questions)
        for backend in backends:
            loads.append(os.getloadavg()[0])
            console.print(f"{backend}: quorum search (cold), quorum serve, answers ...")
            runs[backend] = await one_backend(
                env | {"QUORUM_EMBED_BACKEND": backend}, data, pool, n, searches, rounds
            )
    report(console, runs, n, loads)


async def one_backend(
    env: dict[str, str], data: Path, pool: Iterator[str], n: int, searches: int, rounds: int
) -> Run:
    """Cold searches, then serve ``rounds`` times (questions rotated by one each round):
    /healthz, /readyz, warm searches (first round), answers, SIGTERM."""
    run = Run()
    for _ in range(searches):
        await stopped(data)  # cold: the last command's server has gone
        run.cold_search_s.append(await one_search(env, next(pool)))
    await stopped(data)
    asked = [next(pool) for _ in range(n)]
    for r in range(rounds):
        order = asked[r % n :] + asked[: r % n]
        await one_serve(env, data, pool, order, searches if r == 0 else 0, run)
    run.left = weaviate_alive(data)
    return run


async def one_serve(
    env: dict[str, str], data: Path, pool: Iterator[str], order: list[str], searches: int, run: Run
) -> None:
    """One ``quorum serve``: ready, ``searches`` warm one-shots, ``order`` asked, SIGTERM."""
    port = free_port()
    env = env | {"QUORUM_HTTP_PORT": str(port), "QUORUM_HTTP_HOST": "127.0.0.1"}
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    serve = await asyncio.create_subprocess_exec(
        str(QUORUM), "serve", env=env, stderr=asyncio.subprocess.DEVNULL
    )
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession() as http:
        run.alive_s.append(await wait_for(http, f"{url}/healthz", t0))
        run.ready_s.append(await wait_for(http, f"{url}/readyz", t0))
        for _ in range(searches):
            run.warm_search_s.append(await one_search(env, next(pool)))
        for i, question in enumerate(order):
            t, cpu = time.perf_counter(), process_cpu(serve.pid)
            async with http.post(
                f"{url}/api/ask", json={"question": question}, headers=headers
            ) as r:
                body = await r.json()
                assert r.status == 200 and body["kind"] in ("extractive", "nothing_found")
            ms, cpu_ms = (time.perf_counter() - t) * 1000, (process_cpu(serve.pid) - cpu) * 1000
            (run.first_ms if i == 0 else run.later_ms).append(ms)
            (run.first_cpu_ms if i == 0 else run.later_cpu_ms).append(cpu_ms)
            run.asked.setdefault(question, []).append((i == 0, ms, cpu_ms))
    t = time.monotonic()
    serve.send_signal(signal.SIGTERM)
    run.codes.append(await serve.wait())
    run.stop_s.append(time.monotonic() - t)


def _span(values: list[float], unit: str, fmt: str = ".1f") -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:{fmt}} {unit}"
    return f"{statistics.median(values):{fmt}} {unit} ({min(values):{fmt}}-{max(values):{fmt}})"


def _ratio(first: list[float], later: list[float]) -> str:
    if not first or not later:
        return "-"
    return f"{statistics.median(first) / statistics.median(later):.2f} x"


def report(console: Console, runs: dict[str, Run], n: int, loads: list[float]) -> None:
    """One column per backend."""
    table = Table(
        title=f"quorum search one-shots and quorum serve start ({n} distinct questions; "
        f"load average {', '.join(f'{x:.1f}' for x in loads)} on {os.cpu_count()} cores)"
    )
    table.add_column("measure")
    for backend in runs:
        table.add_column(backend, justify="right")
    rows: list[tuple[str, Callable[[Run], str]]] = [
        (
            "quorum search, cold (starts Weaviate), median (range)",
            lambda r: _span(r.cold_search_s, "s"),
        ),
        (
            "quorum search, warm (serve's Weaviate), median (range)",
            lambda r: _span(r.warm_search_s, "s"),
        ),
        ("/healthz answers after", lambda r: _span(r.alive_s, "s")),
        ("/readyz green after", lambda r: _span(r.ready_s, "s")),
        ("first answer after /readyz", lambda r: _span(r.first_ms, "ms", ".0f")),
        ("later answers, median (range)", lambda r: _span(r.later_ms, "ms", ".0f")),
        ("first / later median", lambda r: _ratio(r.first_ms, r.later_ms)),
        ("first / same question asked later", lambda r: _span(r.paired(), "x", ".2f")),
        ("serve CPU, first answer", lambda r: _span(r.first_cpu_ms, "ms", ".0f")),
        ("serve CPU, later answers, median", lambda r: _span(r.later_cpu_ms, "ms", ".0f")),
        ("serve CPU, first / same question later", lambda r: _span(r.paired(True), "x", ".2f")),
        ("SIGTERM to exit", lambda r: _span(r.stop_s, "s")),
        ("exit codes", lambda r: ", ".join(str(c) for c in r.codes)),
        ("weaviate-server left running", lambda r: "yes" if r.left else "no"),
    ]
    for label, cell in rows:
        table.add_row(label, *(cell(r) for r in runs.values()))
    console.print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=6)
    parser.add_argument("--searches", type=int, default=3, help="one-shots, cold and warm")
    parser.add_argument("--rounds", type=int, default=2, help="serve runs, questions rotated")
    parser.add_argument("--backends", default="onnx,torch", help="comma-separated")
    args = parser.parse_args()
    asyncio.run(main(args.questions, args.searches, args.rounds, args.backends.split(",")))
