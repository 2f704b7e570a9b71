"""Deep research overhead: Quorum's own time per research step, without search and Claude.

A fresh embedded Weaviate server in a temp dir holds the sample archive (``examples/``);
the Anthropic emulator runs in-process with instant replies, scripted for five tool-using
turns (seven tool calls, two turns with parallel calls) and a final answer; the real SDK
talks to it through ``Model``. Each run is timed turn by turn (``ResearchResult.turns``):

- step: the turn's wall time (Claude's reply, the tool calls, numbering and rendering)
- archive: time inside Archive calls (the union of their intervals: parallel calls overlap)
- Claude call: ``LLM.create`` (SDK + HTTP + the emulator)
- HTTP round trip: the same request body POSTed to the emulator with a bare aiohttp
  client, measured separately (what any client would pay for this emulator)
- own = step - archive - Claude call: validation, progress, numbering, rendering, the
  message list, the trace
- own + client = step - archive - HTTP round trip: as above plus the SDK and Model

Target: own p95 < 50 ms per step. Run: ``.venv/bin/python bench/research.py [--runs 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from rich.console import Console
from rich.table import Table

from bench.common import percentile, temp_store
from bot.llm import claude_model
from bot.models import Event, Question, ThreadKey
from bot.research.loop import Researcher, ResearchResult
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import KbArchive, SearchService
from retrieval.write.indexer import ingest
from tests.emulators.anthropic import API_KEY, AnthropicEmulator, Reply, ToolUse

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TARGET_P95_MS = 50.0
KB = "bench_research"
console = Console()


def script(emu: AnthropicEmulator) -> None:
    """Five tool-using turns and a final answer."""
    emu.enqueue(
        Reply.tools(
            ToolUse("list_sources", {}),
            ToolUse("topic_timeline", {"query": "how did the auth plan evolve", "limit": 8}),
            text="First what exists, and the timeline.",
        )
    )
    emu.enqueue(
        Reply.tools(
            ToolUse(
                "search",
                {"query": "migration Lambda USER_PASSWORD_AUTH", "speaker": "John Park"},
            )
        )
    )
    emu.enqueue(Reply.tools(ToolUse("expand_context", {"segment_id": 2, "before": 2, "after": 2})))
    emu.enqueue(
        Reply.tools(
            ToolUse(
                "get_transcript",
                {"source_id": "2024-02-27-cutover-retro", "start_s": "0:00", "end_s": "5:00"},
            )
        )
    )
    emu.enqueue(
        Reply.tools(
            ToolUse(
                "search",
                {"query": "rollback plan", "source_ids": ["auth-migration-plan", "on-call"]},
            ),
            ToolUse("search", {"query": "go/no-go criteria", "limit": 5}),
        )
    )
    emu.enqueue(
        Reply(text="The plan moved from Auth0 to Cognito [1], with a lazy migration [3][5].")
    )


async def round_trips(emu: AnthropicEmulator, bodies: list[dict[str, Any]]) -> list[float]:
    """Milliseconds to POST each body to the emulator with a bare HTTP client."""
    headers = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
    out: list[float] = []
    emu.default = Reply(text="ok")
    async with aiohttp.ClientSession() as http:
        for body in bodies:
            data = json.dumps(body).encode()
            t = time.perf_counter()
            async with http.post(f"{emu.url}/v1/messages", data=data, headers=headers) as r:
                await r.read()
            out.append((time.perf_counter() - t) * 1000)
    emu.default = None
    return out


async def one_run(
    researcher: Researcher, archive: KbArchive, emu: AnthropicEmulator
) -> tuple[ResearchResult, list[float]]:
    emu.reset()
    script(emu)
    events: list[Event] = []

    async def sink(event: Event) -> None:
        events.append(event)

    q = Question("How did our auth plan evolve?", ThreadKey("bench", "w", "c", "t"), "u", KB)
    result = await researcher.run(q, archive, [], sink)
    assert emu.pending == 0 and all(r.status == 200 for r in emu.requests), "script out of step"
    assert len(result.trace) == 7 and not any(s.is_error for s in result.trace)
    rtts = await round_trips(emu, [r.body for r in emu.requests])
    return result, rtts


async def main(runs: int, warmup: int) -> None:
    with tempfile.TemporaryDirectory(prefix="quorum-bench-research-") as tmp:
        with console.status("loading the embedding model and ingesting examples/"):
            embedder = await asyncio.to_thread(SentenceTransformerEmbedder.from_path)
        async with temp_store(Path(tmp)) as store:
            with console.status("ingesting examples/"):
                report = await ingest(store, embedder, KB, [EXAMPLES])
            if report.failed:
                raise SystemExit(f"ingest failed: {report.failed}")
            archive = SearchService(store, embedder).archive(KB)
            emu = AnthropicEmulator()
            await emu.start()
            llm = claude_model(
                api_key=API_KEY, base_url=emu.url, model="claude-sonnet-5-5", fast_model="x"
            )
            try:
                await measure(Researcher(llm), archive, emu, runs, warmup, report.segments)
            finally:
                await llm.aclose()
                await emu.stop()


async def measure(
    researcher: Researcher,
    archive: KbArchive,
    emu: AnthropicEmulator,
    runs: int,
    warmup: int,
    segments: int,
) -> None:
    rows: dict[str, list[float]] = {
        k: [] for k in ("step", "archive", "claude", "rtt", "own", "own_client", "run", "run_own")
    }
    with console.status(f"{warmup} warm-up and {runs} measured runs"):
        for i in range(warmup + runs):
            result, rtts = await one_run(researcher, archive, emu)
            if i < warmup:
                continue
            for turn, rtt in zip(result.turns, rtts, strict=True):
                if not turn.calls:
                    continue  # the final answer: no tools
                rows["step"].append(turn.total_ms)
                rows["archive"].append(turn.archive_ms)
                rows["claude"].append(turn.llm_ms)
                rows["rtt"].append(rtt)
                rows["own"].append(turn.total_ms - turn.archive_ms - turn.llm_ms)
                rows["own_client"].append(turn.total_ms - turn.archive_ms - rtt)
            t = result.answer.timings
            rows["run"].append(t["total"])
            rows["run_own"].append(t["total"] - t["archive"] - t["llm"])
    table = Table(
        title=f"Deep research overhead: {runs} runs x 5 steps (7 tool calls), "
        f"examples/ ({segments} segments), instant emulator"
    )
    table.add_column("per step (ms)")
    for col in ("p50", "p95", "max", "mean"):
        table.add_column(col, justify="right")
    labels = {
        "step": "step wall time",
        "archive": "  in Archive calls",
        "claude": "  Claude call (SDK+HTTP+emu)",
        "rtt": "  bare HTTP round trip",
        "own": "own: step-archive-Claude",
        "own_client": "own+SDK: step-archive-HTTP",
        "run": "whole run (6 requests)",
        "run_own": "whole run, Quorum own",
    }
    for key, label in labels.items():
        v = rows[key]
        style = "bold" if key in ("own", "own_client") else None
        table.add_row(
            label,
            f"{statistics.median(v):.2f}",
            f"{percentile(v, 95):.2f}",
            f"{max(v):.2f}",
            f"{statistics.fmean(v):.2f}",
            style=style,
        )
    console.print(table)
    p95 = percentile(rows["own"], 95)
    verdict = "[green]PASS[/]" if p95 < TARGET_P95_MS else "[red]FAIL[/]"
    console.print(
        f"Quorum's own time per step p95 {p95:.2f} ms (target < {TARGET_P95_MS:g} ms): {verdict}; "
        f"with the SDK and Model p95 {percentile(rows['own_client'], 95):.2f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=20, help="measured runs (default 20)")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured runs first")
    ns = parser.parse_args()
    asyncio.run(main(ns.runs, ns.warmup))
