"""A real ``quorum serve`` process, stopped the way Docker, systemd and Kubernetes stop it:
SIGTERM while an answer is being written. The thread gets one closing line, the process
exits 0 within QUORUM_SHUTDOWN_S, and the embedded weaviate-server it started is gone."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from adapters.chat.conversation import RESTARTED
from adapters.http.problems import STOPPING
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.reaper import is_our_server
from retrieval.store.weaviate.server import Endpoint, async_client
from retrieval.write.indexer import ingest
from tests.emulators.anthropic import API_KEY, AnthropicEmulator, Reply
from tests.emulators.slack import BOT_TOKEN, SIGNING_SECRET, SlackEmulator
from tests.test_slack import GENERAL, bot_replies

QUORUM = Path(sys.executable).parent / "quorum"
SHUTDOWN_S = 6.0
START_TIMEOUT_S = 180.0  # cold imports, Weaviate and the model on a busy 2-core runner


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Served:
    """A ``quorum serve`` child process and where to reach it."""

    def __init__(self, proc: asyncio.subprocess.Process, http: str, data_dir: Path) -> None:
        self.proc, self.http, self.data_dir = proc, http, data_dir

    async def ready(self, within_s: float = START_TIMEOUT_S) -> dict[str, Any]:
        """Wait for /readyz to turn green; its last body."""
        deadline = time.monotonic() + within_s
        body: dict[str, Any] = {}
        async with aiohttp.ClientSession() as http:
            while time.monotonic() < deadline:
                assert self.proc.returncode is None, "quorum serve exited while starting"
                with contextlib.suppress(aiohttp.ClientError):
                    async with http.get(f"{self.http}/readyz") as r:
                        body = await r.json()
                        if r.status == 200:
                            return body
                await asyncio.sleep(0.5)
        raise AssertionError(f"/readyz never turned green: {body}")

    def weaviate(self) -> tuple[int, Endpoint]:
        """The embedded server's pid and endpoint, from its shared state file."""
        state = json.loads((self.data_dir / "weaviate-server" / "server.json").read_text())
        return state["pid"], Endpoint("127.0.0.1", state["port"], "127.0.0.1", state["grpc_port"])


@contextlib.asynccontextmanager
async def quorum_serve(env: dict[str, str], tmp_path: Path) -> AsyncIterator[Served]:
    """Start ``quorum serve`` with ``env``; kill it if a test leaves it running."""
    data_dir = tmp_path / "served"
    http_port = free_port()
    full = {
        **os.environ,
        "QUORUM_DATA_DIR": str(data_dir),
        "QUORUM_HTTP_PORT": str(http_port),
        "QUORUM_HTTP_HOST": "127.0.0.1",
        **env,
    }
    http_port = int(full["QUORUM_HTTP_PORT"])
    log = open(tmp_path / "serve.log", "wb")  # noqa: SIM115, ASYNC230 (closed below)
    proc = await asyncio.create_subprocess_exec(
        str(QUORUM), "serve", env=full, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL
    )
    try:
        yield Served(proc, f"http://127.0.0.1:{http_port}", data_dir)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        log.close()


@pytest.mark.parametrize(
    ("tokens", "says"),
    [
        ("tøk:kb,tok:kb", "QUORUM_API_TOKENS: token 1 is not printable ASCII"),
        ("tokA:kba,tokA:kbb", "QUORUM_API_TOKENS: token 2 repeats an earlier token"),
    ],
)
async def test_unusable_api_tokens_stop_start_up_with_one_line(
    tmp_path: Path, tokens: str, says: str
) -> None:
    async with quorum_serve({"QUORUM_API_TOKENS": tokens, "COLUMNS": "200"}, tmp_path) as served:
        code = await asyncio.wait_for(served.proc.wait(), 60)
    log = (tmp_path / "serve.log").read_text()
    assert code == 1, log
    assert says in log and "Traceback" not in log, log
    assert len(log.strip().splitlines()) == 1, log


async def test_a_port_in_use_stops_start_up_with_one_line_naming_the_setting(
    tmp_path: Path,
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"COLUMNS": "200", "QUORUM_HTTP_PORT": str(port)}
        async with quorum_serve(env, tmp_path) as served:
            code = await asyncio.wait_for(served.proc.wait(), 120)
    log = (tmp_path / "serve.log").read_text()
    assert code == 1, log
    assert f"QUORUM_HTTP_PORT: cannot listen on 127.0.0.1:{port} (Address already in use)" in log
    assert "Traceback" not in log and len(log.strip().splitlines()) == 1, log


async def test_sigterm_mid_answer_ends_the_thread_politely_and_stops_weaviate(
    tmp_path: Path, kb: str
) -> None:
    slow = Reply(text="This answer never arrives in time.", delay_s=60)
    async with SlackEmulator() as slack, AnthropicEmulator(default=slow) as claude:
        env = {
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "QUORUM_SLACK_API_URL": slack.api_url,
            "QUORUM_SLACK_KB": kb,
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": claude.url,
            "QUORUM_LLM_MAX_RETRIES": "0",
            "QUORUM_SHUTDOWN_S": str(SHUTDOWN_S),
        }
        async with quorum_serve(env, tmp_path) as served:
            slack.target = f"{served.http}/slack/events"  # Slack's events on serve's own port
            t0 = time.monotonic()
            ready = await served.ready()
            print(f"ready after {time.monotonic() - t0:.1f}s")
            assert ready["checks"] == {
                "weaviate": "ok",
                "database": "ok",
                "model": "ok",
                "slack": "ok",
            }
            pid, _ = served.weaviate()
            # Deep research asks Claude before it searches: the answer is in flight at once.
            command = slack.command("/research", "Why did we leave Auth0?")
            assert (await slack.deliver_command(command)).status == 200
            await slack.wait_for(lambda: claude.requests, within_s=60)

            t0 = time.monotonic()
            served.proc.send_signal(signal.SIGTERM)
            code = await asyncio.wait_for(served.proc.wait(), SHUTDOWN_S + 25)
            took = time.monotonic() - t0
            log = (tmp_path / "serve.log").read_text()
            assert code == 0, log
            assert took < SHUTDOWN_S + 20, f"{took:.1f}s"  # Weaviate's own flush is the rest
            assert "Traceback" not in log and "still running" not in log, log

        [echo] = slack.top_level(GENERAL)
        [reply] = bot_replies(slack, GENERAL, echo.ts)
        assert reply.versions[0]["text"] == "Researching the archive…"
        assert RESTARTED in reply.all_text()  # the thread's last word, not silence
        assert not is_our_server(pid, served.data_dir / "weaviate-server")
        assert not (served.data_dir / "weaviate-server" / "server.json").exists()


SSE = {"Accept": "text/event-stream"}


async def sse_events(resp: aiohttp.ClientResponse) -> list[tuple[str, dict[str, Any]]]:
    """Every event of a server-sent stream, to its end."""
    events: list[tuple[str, dict[str, Any]]] = []
    name = ""
    async for raw in resp.content:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: "):
            events.append((name, json.loads(line.removeprefix("data: "))))
    return events


async def test_api_answers_in_flight_end_with_ask_again_and_a_departed_client_stops_its_own(
    tmp_path: Path, kb: str, embedder: SentenceTransformerEmbedder
) -> None:
    words = " ".join(f"word{i}" for i in range(300))
    slow = Reply(text=f"The grommet cache is flushed nightly [1]. {words}", chunk_delay_s=0.4)
    async with AnthropicEmulator(default=slow) as claude:
        env = {
            "QUORUM_API_TOKENS": f"tok:{kb}",
            "QUORUM_DEFAULT_KB": kb,
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": claude.url,
            "QUORUM_LLM_MAX_RETRIES": "0",
            "QUORUM_SHUTDOWN_S": str(SHUTDOWN_S),
        }
        async with quorum_serve(env, tmp_path) as served, aiohttp.ClientSession() as http:
            await served.ready()
            _, endpoint = served.weaviate()
            notes = tmp_path / "ops-sync.txt"
            notes.write_text("[00:00:05] Ana Ruiz: The grommet cache is flushed nightly.\n")
            async with WeaviateStore.connect(
                async_client(endpoint, timeout_s=10), endpoint.url
            ) as store:
                await ingest(store, embedder, kb, [notes])
            ask = {"question": "When is the grommet cache flushed?"}
            auth = {"Authorization": "Bearer tok"}
            url = f"{served.http}/api/ask"

            # A client that leaves after the first words: Quorum stops asking Claude.
            async with http.post(url, json=ask, headers={**auth, **SSE}) as r:
                async for raw in r.content:
                    if raw.startswith(b"event: partial"):
                        break
            await asyncio.wait_for(_until(lambda: claude.hung_up == 1), 15)

            # SIGTERM with a stream and a JSON answer in flight: both told to ask again.
            async def streamed() -> list[tuple[str, dict[str, Any]]]:
                async with http.post(url, json=ask, headers={**auth, **SSE}) as r:
                    return await sse_events(r)

            async def plain() -> tuple[int, dict[str, Any]]:
                async with http.post(url, json=ask, headers=auth) as r:
                    return r.status, await r.json()

            asked = len(claude.requests)
            both = asyncio.gather(streamed(), plain())
            await asyncio.wait_for(_until(lambda: len(claude.requests) >= asked + 2), 60)
            t0 = time.monotonic()
            served.proc.send_signal(signal.SIGTERM)
            events, (status, body) = await asyncio.wait_for(both, SHUTDOWN_S + 5)
            told_in = time.monotonic() - t0
            code = await asyncio.wait_for(served.proc.wait(), SHUTDOWN_S + 25)
        log = (tmp_path / "serve.log").read_text()
    assert events[-1] == ("error", {"error": STOPPING}), events
    assert events[0][0] == "progress" and "partial" in [e for e, _ in events]
    assert (status, body) == (503, {"error": STOPPING})
    assert told_in < SHUTDOWN_S, f"{told_in:.1f}s"
    assert code == 0, log
    assert "Traceback" not in log, log


async def _until(done: Callable[[], bool]) -> None:
    for _ in itertools.count():
        if done():
            return
        await asyncio.sleep(0.1)
