"""Quorum's pages for a one-hour recording: how long until the page's first byte, and how
long from clicking the link until Chromium plays the media at the cited second.

The path is the user's: a one-hour WebVTT transcript (a cue every 5 s, one sentence each,
four speakers) with its recording beside it (``.m4a``, AAC, made with PyAV: quiet room
noise, so the bytes and the seeking are real), ingested into a temp data dir (embedded
Weaviate); ``quorum serve``'s HTTP server with the real core; a question answered
extractively (no model key) whose citation opens 47 minutes in. Then:

- time to first byte of the page (aiohttp, N requests, one after another), and its size;
- in Debian's Chromium (Playwright, headless): from ``goto(link)`` until the media element
  is playing with ``currentTime`` within 1 s of the cited second (cold browser context
  each time, so nothing is cached).

Run: ``.venv/bin/python bench/pages.py [--requests 10] [--opens 3]``. Bounded: about a
minute of setup (encoding and embedding an hour) on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import time
import uuid
from fractions import Fraction
from pathlib import Path

import aiohttp
import av
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.http.server import OpsServer  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.metrics import Metrics  # noqa: E402
from bot.models import Question, ThreadKey  # noqa: E402
from bot.wiring import open_core  # noqa: E402
from retrieval.write.indexer import ingest  # noqa: E402
from tests.pages_harness import CHROMIUM, CHROMIUM_ARGS  # noqa: E402

HOUR_S = 3600
CUE_S = 5
SPEAKERS = ("Priya Raman", "Marcus Lee", "Dana Kim", "John Park")
TOPICS = ("the billing export", "the search cluster", "on-call rotas", "the data retention job")
TARGET_S = 47 * 60 + 5  # the one cue the question asks about
TARGET = "The zanzibar warehouse relocation is postponed until the ninth of October."
QUESTION = "When is the zanzibar warehouse relocation?"


def _ts(s: float) -> str:
    return f"{int(s // 3600):02d}:{int(s % 3600 // 60):02d}:{s % 60:06.3f}"


def write_recording(folder: Path) -> Path:
    """An hour of transcript (.vtt) and its audio (.m4a) beside it."""
    cues = ["WEBVTT", ""]
    for i, start in enumerate(range(0, HOUR_S, CUE_S)):
        speaker = SPEAKERS[i % len(SPEAKERS)]
        text = (
            TARGET
            if start == TARGET_S
            else f"Item {i} on {TOPICS[i % len(TOPICS)]} is tracked in ticket OPS-{1000 + i}."
        )
        cues += [f"{_ts(start)} --> {_ts(start + CUE_S - 0.5)}", f"<v {speaker}>{text}", ""]
    (folder / "ops-review.vtt").write_text("\n".join(cues))
    rate = 16_000
    out = folder / "ops-review.m4a"
    rng = np.random.default_rng(3)
    with av.open(str(out), "w", format="mp4") as container:
        stream = container.add_stream("aac", rate=rate, layout="mono")
        stream.bit_rate = 32_000
        pts = 0
        for _ in range(HOUR_S * rate // 1024):
            pcm = rng.normal(0, 80, 1024).astype(np.int16).reshape(1, -1)
            frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
            frame.sample_rate, frame.pts, frame.time_base = rate, pts, Fraction(1, rate)
            pts += 1024
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out


async def ttfb(http: aiohttp.ClientSession, url: str) -> tuple[float, int]:
    t0 = time.perf_counter()
    async with http.get(url) as r:
        first = await r.content.read(1)
        took = time.perf_counter() - t0
        size = len(first) + len(await r.read())
        assert r.status == 200, r.status
    return took, size


async def until_playing(link: str, second: int, opens: int) -> list[float]:
    from playwright.async_api import async_playwright

    times = []
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for _ in range(opens):
            context = await browser.new_context(viewport={"width": 1280, "height": 800})
            page = await context.new_page()
            t0 = time.perf_counter()
            await page.goto(link)
            await page.wait_for_function(
                "(t) => { const m = document.getElementById('media');"
                " return m && !m.paused && m.readyState >= 3 && !m.seeking"
                " && Math.abs(m.currentTime - t) < 1; }",
                arg=second,
                timeout=60_000,
            )
            times.append(time.perf_counter() - t0)
            await context.close()
        await browser.close()
    return times


async def main(requests: int, opens: int) -> None:
    with tempfile.TemporaryDirectory(prefix="quorum-pages-bench-") as tmp:
        folder = Path(tmp)
        files = folder / "files"
        files.mkdir()
        t0 = time.perf_counter()
        media = await asyncio.to_thread(write_recording, files)
        made_s, media_mb = time.perf_counter() - t0, media.stat().st_size / 1e6
        settings = load_settings(data_dir=folder / "data", http_port=0)
        kb = f"b{uuid.uuid4().hex[:8]}"
        async with open_core(settings) as services:
            r = services.retrieval
            t1 = time.perf_counter()
            report = await ingest(r.store, r.embedder, kb, [files / "ops-review.vtt"])
            assert not report.failed, report.failed
            ingest_s = time.perf_counter() - t1
            server = OpsServer(settings)
            port = await server.start(0, "127.0.0.1")
            server.attach(services, services.engine, Metrics(services.llm))
            try:
                # Links are signed for QUORUM_PUBLIC_URL; here the server's own address.
                assert r.search.signer is not None
                r.search.signer.public_url = f"http://127.0.0.1:{port}"
                thread = ThreadKey("console", "local", "bench", uuid.uuid4().hex)
                answer = await services.engine.ask(Question(QUESTION, thread, "bench", kb))
                link = next(c.link for c in answer.citations if c.link)
                second = int(re.findall(r"#t=(\d+)", link)[0])
                page = link.split("#")[0]
                async with aiohttp.ClientSession() as http:
                    await ttfb(http, page)  # warm the source list cache, as a second click
                    firsts = [await ttfb(http, page) for _ in range(requests)]
                    media_first = [(await ttfb(http, page + "/media"))[0] for _ in range(3)]
                played = await until_playing(link, second, opens)
            finally:
                await server.stop()
    ms = [f * 1000 for f, _ in firsts]
    print(f"one-hour recording: {media_mb:.1f} MB .m4a (made in {made_s:.0f} s),")
    print(f"{len(report.results)} transcript ingested in {ingest_s:.0f} s; cited at {second} s")
    print(f"(asked: {QUESTION!r}); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print()
    print("| measure | median | min | max | n |")
    print("|---|---|---|---|---|")
    print(
        f"| page time to first byte | {statistics.median(ms):.0f} ms | {min(ms):.0f} ms | "
        f"{max(ms):.0f} ms | {len(ms)} |"
    )
    print(f"| page size | {firsts[0][1] / 1024:.0f} KB | | | |")
    mf = [m * 1000 for m in media_first]
    print(
        f"| media (whole file) first byte | {statistics.median(mf):.0f} ms | {min(mf):.0f} ms | "
        f"{max(mf):.0f} ms | {len(mf)} |"
    )
    pl = [p * 1000 for p in played]
    print(
        f"| link opened → playing at the cited second (Chromium) | {statistics.median(pl):.0f} ms"
        f" | {min(pl):.0f} ms | {max(pl):.0f} ms | {len(pl)} |"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=10)
    parser.add_argument("--opens", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.opens))
