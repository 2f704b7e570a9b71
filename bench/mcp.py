"""The MCP door against the JSON API: the same ``search`` and ``ask`` calls on one real
``quorum serve`` (its own Weaviate with the sample archive ingested by ``quorum
ingest``, SQLite, Claude's emulator streaming each answer in about ``--claude-ms``),
``--clients`` at once, each making ``--calls`` calls in a row, after one unmeasured round
of the same calls on both doors (the core's caches then favour neither).

An MCP client is the SDK's own (``mcp.Client`` over Streamable HTTP, one connection per
client, opened before the clock starts); an API client is one aiohttp session posting
``/api/search`` and ``/api/ask``. A call's latency is from sending it to holding the
parsed result; the CPU time the server process and this one (the clients) spent per
call is shown beside it. Target: MCP within 1.1x of the API's p50 and p95.

Run: ``.venv/bin/python bench/mcp.py [--clients 20] [--calls 5] [--claude-ms 500]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run as a script, this file's folder comes first on the path, and its name would hide
# the MCP SDK's package: drop the folder (``bench.*`` is found from the repository).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).parent.resolve()]

import argparse  # noqa: E402
import asyncio  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import AsyncIterator, Awaitable, Callable  # noqa: E402

import aiohttp  # noqa: E402
import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from bench.common import percentile, temp_server  # noqa: E402
from bench.serve_load import ingest, questions, serve, wait_ready  # noqa: E402
from tests.emulators.anthropic import API_KEY, AnthropicEmulator, Reply  # noqa: E402

TOKEN, KB = "bench", "bench"
ANSWER = "We moved to **Cognito** because Auth0's pricing grew with monthly users [1]."

Call = Callable[[str], Awaitable[None]]


@contextlib.asynccontextmanager
async def mcp_client(url: str) -> AsyncIterator[Client]:
    """The SDK's client on ``/mcp`` with the bench's token."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
            yield client


async def run_clients(n: int, calls: int, makers: list[Call], asks: list[str]) -> list[float]:
    """``n`` clients at once, each making ``calls`` calls; every latency in ms."""
    out: list[float] = []

    async def one(i: int, call: Call) -> None:
        for j in range(calls):
            t0 = time.perf_counter()
            await call(asks[(i * calls + j) % len(asks)])
            out.append((time.perf_counter() - t0) * 1000)

    await asyncio.gather(*(one(i, makers[i]) for i in range(n)))
    return out


def cpu_s(pid: int) -> float:
    """A process's CPU time so far (user + system), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def main(n: int, calls: int, claude_ms: float) -> None:
    console = Console(width=120)
    chunk_s = claude_ms / 1000 / max(1, len(ANSWER.split()))
    asks = questions()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        async with (
            temp_server(data / "weaviate") as weaviate,
            AnthropicEmulator(default=Reply(text=ANSWER, chunk_delay_s=chunk_s)) as claude,
            aiohttp.ClientSession() as http,
        ):
            base = {k: v for k, v in os.environ.items() if not k.startswith(("QUORUM_", "SLACK_"))}
            env = base | {
                "QUORUM_WEAVIATE_MODE": "local",
                "QUORUM_WEAVIATE_URL": weaviate.url,
                "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate.grpc_port),
                "QUORUM_API_TOKENS": f"{TOKEN}:{KB}",
                "ANTHROPIC_API_KEY": API_KEY,
                "ANTHROPIC_BASE_URL": claude.url,
            }
            await ingest(env | {"QUORUM_DATA_DIR": str(data / "ingest")}, console)
            async with serve("a", env, data) as replica:
                await wait_ready(http, replica)
                url = replica.api
                auth = {"Authorization": f"Bearer {TOKEN}"}
                async with contextlib.AsyncExitStack() as stack:
                    clients = [await stack.enter_async_context(mcp_client(url)) for _ in range(n)]
                    sessions = [
                        await stack.enter_async_context(aiohttp.ClientSession(headers=auth))
                        for _ in range(n)
                    ]

                    def api(path: str, key: str, s: aiohttp.ClientSession) -> Call:
                        async def call(text: str) -> None:
                            async with s.post(f"{url}{path}", json={key: text}) as r:
                                assert r.status == 200, await r.text()
                                await r.json()

                        return call

                    def tool(name: str, key: str, c: Client) -> Call:
                        async def call(text: str) -> None:
                            result = await c.call_tool(name, {key: text})
                            assert not result.is_error, result.content

                        return call

                    plans = {
                        ("search", "API"): [api("/api/search", "query", s) for s in sessions],
                        ("search", "MCP"): [tool("search", "query", c) for c in clients],
                        ("ask", "API"): [api("/api/ask", "question", s) for s in sessions],
                        ("ask", "MCP"): [tool("ask", "question", c) for c in clients],
                    }
                    # One unmeasured round of every plan first: the core remembers sentence
                    # vectors and sources, and whichever door went first would pay for both.
                    for makers in plans.values():
                        await run_clients(n, calls, makers, asks)
                    table = Table(
                        title=f"{n} clients at once, {calls} calls each, on one quorum serve"
                    )
                    for col in ("call", "door", "calls", "p50 ms", "p95 ms", "x API p50", "x p95"):
                        table.add_column(col, justify="right")
                    table.add_column("server CPU ms/call", justify="right")
                    table.add_column("client CPU ms/call", justify="right")
                    base_ms: dict[str, tuple[float, float]] = {}
                    for (name, door), makers in plans.items():
                        server0, client0 = cpu_s(replica.proc.pid), time.process_time()
                        lat = await run_clients(n, calls, makers, asks)
                        server = (cpu_s(replica.proc.pid) - server0) * 1000 / len(lat)
                        client = (time.process_time() - client0) * 1000 / len(lat)
                        p50, p95 = percentile(lat, 50), percentile(lat, 95)
                        ref = base_ms.setdefault(name, (p50, p95))
                        table.add_row(
                            name,
                            door,
                            str(len(lat)),
                            f"{p50:.0f}",
                            f"{p95:.0f}",
                            f"{p50 / ref[0]:.2f}",
                            f"{p95 / ref[1]:.2f}",
                            f"{server:.1f}",
                            f"{client:.1f}",
                        )
                    console.print(table)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--claude-ms", type=float, default=500.0)
    args = parser.parse_args()
    asyncio.run(main(args.clients, args.calls, args.claude_ms))
