"""Soak of ``quorum serve`` as users and an operator meet it (``bench/soak.py --serve``):
a real ``quorum serve`` process with the Slack platform (the Slack emulator) and the JSON
API, Claude emulated with a slow stream. For ``--seconds``: API clients ask (JSON, and
server-sent events of which every other client hangs up after the first words), admins
share files in Slack (new names, and new versions of their own), and half-way through
the process gets SIGTERM and is started again on the same data.

The table: questions answered, told to ask again (SIGTERM), refused while restarting,
and lost (no answer and no error: a cut stream, an empty reply); clients that left;
uploads reported added or updated, and lost (reported but not listed by /api/sources)
or duplicated (a source listed twice); tracebacks in the serve log; the serve
process's RSS after warm-up and at the end of each run. Targets: 0 lost, 0 duplicated,
0 tracebacks, RSS flat (within 20%).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

import aiohttp
from rich.console import Console
from rich.table import Table

from tests.emulators.anthropic import API_KEY, AnthropicEmulator, Reply
from tests.emulators.slack import ALICE, BOT_TOKEN, BOT_USER, SIGNING_SECRET, SlackEmulator
from tests.test_lifecycle import free_port
from tests.test_slack import GENERAL, bot_replies

QUORUM = Path(sys.executable).parent / "quorum"
KB = "soakserve"
TOKEN = "tok-soak"
SHUTDOWN_S = 8.0
QUESTION = "When is the grommet cache flushed?"


def vtt(n: int, version: int) -> bytes:
    lines = [
        f"00:00:{s:02d}.000 --> 00:00:{s + 4:02d}.000\n<v Ana>In file {n} version {version} "
        f"the grommet cache is flushed at step {s}.\n"
        for s in range(0, 50, 5)
    ]
    return ("WEBVTT\n\n" + "\n".join(lines)).encode()


def rss_mb(pid: int) -> float:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Serve:
    """One ``quorum serve`` run on the soak's data folder."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.env, self.log = env, log
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self, http: aiohttp.ClientSession, url: str) -> None:
        out = self.log.open("ab")
        self.proc = await asyncio.create_subprocess_exec(
            str(QUORUM), "serve", env=self.env, stdout=out, stderr=out,
            stdin=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        out.close()
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError):
                async with http.get(f"{url}/readyz") as r:
                    if r.status == 200:
                        return
            await asyncio.sleep(0.5)
        raise RuntimeError(f"quorum serve never got ready; see {self.log}")

    async def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return await asyncio.wait_for(self.proc.wait(), SHUTDOWN_S + 30)


async def ask(http: aiohttp.ClientSession, url: str, n: int, counts: Counter[str]) -> None:
    """One API client: JSON, or a stream that every other time leaves after the first words."""
    auth = {"Authorization": f"Bearer {TOKEN}"}
    body = {"question": QUESTION}
    try:
        if n % 3 == 0:
            async with http.post(f"{url}/api/ask", json=body, headers=auth) as r:
                data = await r.json()
                if r.status == 200 and data.get("text"):
                    counts["answered"] += 1
                elif r.status == 503 and "ask again" in data.get("error", ""):
                    counts["told to ask again"] += 1
                else:
                    counts[f"lost (JSON, HTTP {r.status})"] += 1
            return
        leave = n % 3 == 1
        async with http.post(
            f"{url}/api/ask", json=body, headers={**auth, "Accept": "text/event-stream"}
        ) as r:
            if r.status == 503:
                counts["told to ask again"] += 1
                return
            last = ""
            async for raw in r.content:
                line = raw.decode()
                if line.startswith("event: "):
                    last = line.split(" ", 1)[1].strip()
                    if leave and last == "partial":
                        counts["clients that left"] += 1
                        return
            kind = {"answer": "answered", "error": "told to ask again"}.get(last)
            counts[kind or f"lost (stream ended after {last or 'nothing'!r})"] += 1
    except (aiohttp.ClientConnectorError, ConnectionRefusedError):
        counts["refused while restarting"] += 1
    except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError) as exc:
        counts[f"lost ({type(exc).__name__})"] += 1


async def share(slack: SlackEmulator, n: int, version: int) -> str:
    """An admin shares ``file-n.vtt`` (version ``version``); its final reply."""
    file = slack.share_file(f"file-{n}.vtt", vtt(n, version))
    msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> add this", user=ALICE)
    await slack.deliver_event(slack.event(msg, "app_mention", files=[file]))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        replies = bot_replies(slack, GENERAL, msg.ts)
        if replies and not replies[-1].text.endswith("…"):
            return replies[-1].text
        await asyncio.sleep(0.5)
    return ""


async def soak_serve(seconds: float, data: Path) -> None:
    counts: Counter[str] = Counter()
    rss: list[tuple[float, float]] = []
    uploaded: set[str] = set()
    words = " ".join(f"word{i}" for i in range(120))
    slow = Reply(text=f"The grommet cache is flushed nightly [1]. {words}", chunk_delay_s=0.1)
    async with SlackEmulator() as slack, AnthropicEmulator(default=slow) as claude:
        slack_port, http_port = free_port(), free_port()
        slack.target = f"http://127.0.0.1:{slack_port}/slack/events"
        url = f"http://127.0.0.1:{http_port}"
        env = {
            **os.environ,
            "QUORUM_DATA_DIR": str(data),
            "QUORUM_HTTP_PORT": str(http_port),
            "QUORUM_HTTP_HOST": "127.0.0.1",
            "QUORUM_API_TOKENS": f"{TOKEN}:{KB}",
            "SLACK_BOT_TOKEN": BOT_TOKEN,
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "QUORUM_SLACK_API_URL": slack.api_url,
            "QUORUM_SLACK_PORT": str(slack_port),
            "QUORUM_SLACK_KB": KB,
            "QUORUM_SLACK_ADMINS": ALICE,
            "ANTHROPIC_API_KEY": API_KEY,
            "ANTHROPIC_BASE_URL": claude.url,
            "QUORUM_LLM_MAX_RETRIES": "0",
            "QUORUM_SHUTDOWN_S": str(SHUTDOWN_S),
        }
        log = data / "serve.log"
        serve = Serve(env, log)
        async with aiohttp.ClientSession() as http:
            await serve.start(http, url)
            said = await share(slack, 0, 0)  # something to answer from
            uploaded.add("file-0")
            assert serve.proc is not None
            warm = rss_mb(serve.proc.pid)
            start, n, restarted = time.monotonic(), 0, False
            clients: set[asyncio.Task[None]] = set()
            while time.monotonic() - start < seconds:
                n += 1
                task = asyncio.create_task(ask(http, url, n, counts))
                clients.add(task)
                task.add_done_callback(clients.discard)
                if n % 8 == 0:
                    version = n // 8
                    said = await share(slack, version % 4, version)
                    if said.startswith(("Added", "Updated")):
                        counts["uploads reported " + said.split()[0].lower()] += 1
                        uploaded.add(f"file-{version % 4}")
                    else:
                        counts[f"uploads not added: {said[:50]}"] += 1
                if not restarted and time.monotonic() - start > seconds / 2:
                    await asyncio.sleep(1.0)  # answers in flight
                    assert serve.proc is not None
                    rss.append((warm, rss_mb(serve.proc.pid)))
                    counts["exit codes != 0"] += await serve.stop() != 0
                    await serve.start(http, url)
                    warm, restarted = rss_mb(serve.proc.pid), True
                await asyncio.sleep(0.3)
            await asyncio.gather(*clients, return_exceptions=True)
            assert serve.proc is not None
            rss.append((warm, rss_mb(serve.proc.pid)))
            async with http.get(
                f"{url}/api/sources", headers={"Authorization": f"Bearer {TOKEN}"}
            ) as r:
                listed = [s["id"] for s in (await r.json())["sources"]]
            counts["exit codes != 0"] += await serve.stop() != 0
    counts["uploads lost"] = len(uploaded - set(listed))
    counts["sources duplicated"] = len(listed) - len(set(listed))
    counts["tracebacks in the serve log"] = log.read_text().count("Traceback")
    counts["Claude streams the client closed"] = claude.hung_up

    table = Table(title=f"Soak of quorum serve: {seconds:.0f} s, SIGTERM and restart half-way")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key in sorted(counts):
        table.add_row(key, str(counts[key]))
    for run, (first, last) in enumerate(rss, 1):
        table.add_row(
            f"serve RSS run {run}: after warm-up / at its end (MB)", f"{first:.0f} / {last:.0f}"
        )
    Console().print(table)
