"""The quick answer pipeline's own time, the model excluded: 20 questions (conversations
with follow-ups) on the sample archive, p50/p95 per step, on each model backend. Target:
p95 of the overhead (everything but search and the model) under 40 ms.

    .venv/bin/python bench/answer.py [--rounds 5] [--backend claude|openai|both]

It starts its own Weaviate in a temporary directory, ingests examples/ (not its README),
and points the real SDK of each backend at the emulator of its API (anthropic at the
Messages API, openai at Chat Completions, as for Ollama or vLLM), which answers at once,
so "llm" is the SDK and a local HTTP round trip, not a model. Steps:

- history, store: the SQLite session store (load the thread, save the exchange)
- rewrite: the follow-up rewrite (an emulator call) or nothing for a first question
- search: embed the query + Weaviate hybrid search
- expand: neighbouring windows from Weaviate (one query per hit, concurrent)
- assemble: merge passages, budget, order, number
- relevance: the passages' sentences compared with the question (nothing-found gate)
- render: citations parsed, checked and linked
- align: each citation resolved to the sentence it relies on (with --claude-ms 0 this
  includes encoding the passages' sentences, which otherwise happens while Claude writes)
- revise: asking Claude once more when a claim has no support (the canned answer here
  often has none), and aligning the revision
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.common import percentile, temp_store
from bot.answer.answer import AnswerConfig
from bot.cite.vectors import SentenceVectors
from bot.engine import Engine
from bot.llm import Model, claude_model, openai_model
from bot.models import Question, ThreadKey
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.write.indexer import ingest
from tests.emulators.anthropic import AnthropicEmulator, Reply
from tests.emulators.openai import OpenAIEmulator

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
KB = "bench_answer"
FAST = "claude-fast"
CONVERSATIONS: list[list[str]] = [
    ["Why did we move off Auth0?", "What did he say about the cost?"],
    ["What did John say about the migration Lambda?", "Why does it need USER_PASSWORD_AUTH?"],
    ["What went wrong during the cut-over?", "How long did it last?"],
    ["What is the rollback plan?"],
    ["When was the cut-over scheduled?"],
    ["What were the load test results?"],
    ["What did Dana say about the Lambda's security?"],
    ["How much does Cognito cost compared to Auth0?", "And Keycloak?"],
    ["What is the Model Context Protocol?", "What are its main building blocks?"],
    ["Who gets paged for auth incidents?"],
    ["What are the action items from the retro?"],
    ["What token lifetimes did we choose?"],
    ["How did we handle SAML customers?"],
]
STEPS = (
    "history",
    "rewrite",
    "search",
    "expand",
    "assemble",
    "relevance",
    "render",
    "align",
    "revise",
    "store",
    "llm",
    "total",
)
console = Console()


def replier(writing_s: float) -> Callable[[dict[str, Any]], Reply]:
    """Replies after ``writing_s``: the rewrite echoes the question, the answer cites [1]
    and [2]."""

    def reply(body: dict[str, Any]) -> Reply:
        content = str(body["messages"][-1]["content"])
        if body["model"] == FAST:
            last = re.search(r"Last question: (.*)", content)
            return Reply(text=last.group(1) if last else "query")
        text = "The team moved for cost and reliability [1], as planned [2]."
        return Reply(text=text, delay_s=writing_s)

    return reply


Samples = dict[str, list[float]]


async def measure(
    backend: str,
    store: Any,
    sessions: SessionStore,
    embedder: SentenceTransformerEmbedder,
    rounds: int,
    writing_s: float,
    cold: bool,
) -> tuple[Samples, dict[str, int]]:
    """Every question ``rounds`` times (after a warm-up round) on one backend."""
    emu = (AnthropicEmulator if backend == "claude" else OpenAIEmulator)(default=replier(writing_s))
    async with emu:
        llm: Model
        if backend == "claude":
            llm = claude_model(
                api_key=emu.api_key or "", base_url=emu.url, model="answer", fast_model=FAST
            )
        else:
            llm = openai_model(
                api_key=emu.api_key, base_url=emu.url, model="answer", fast_model=FAST
            )

        def make_engine(vectors: SentenceTransformerEmbedder | SentenceVectors) -> Engine:
            return Engine(
                archives=SearchService(store, embedder).archive,
                sessions=sessions,
                llm=llm,
                config=AnswerConfig(),
                embedder=vectors,  # as wired in the product: alignment uses MiniLM
            )

        engine = make_engine(embedder)
        samples: Samples = {s: [] for s in (*STEPS, "overhead")}
        kinds: dict[str, int] = {}
        for r in range(rounds + 1):
            for c, convo in enumerate(CONVERSATIONS):
                thread = ThreadKey("bench", "local", "c", f"{backend}-{r}-{c}")
                for text in convo:
                    q = Question(text=text, thread=thread, user="bench", kb=KB)
                    if cold:  # no sentence vectors remembered from earlier rounds
                        engine = make_engine(SentenceVectors(embedder))
                    answer = await engine.ask(q)
                    if r == 0:
                        continue  # warm-up: model, connections, caches
                    kinds[answer.kind] = kinds.get(answer.kind, 0) + 1
                    t = answer.timings
                    for step in STEPS:
                        samples[step].append(t.get(step, 0.0))
                    samples["overhead"].append(
                        t["total"] - t.get("search", 0.0) - t.get("llm", 0.0) - t.get("revise", 0.0)
                    )
        await llm.aclose()
    return samples, kinds


def report(backend: str, rounds: int, samples: Samples, kinds: dict[str, int]) -> float:
    """Print one backend's table; its p95 overhead."""
    n = len(samples["total"])
    table = Table(
        title=f"Quick answer pipeline, {n} questions ({rounds} rounds), {backend} emulated"
    )
    for col in ("step", "p50 ms", "p95 ms", "mean ms", "max ms"):
        table.add_column(col, justify="right" if col != "step" else "left")
    for step in (*STEPS, "overhead"):
        vals = samples[step]
        label = "overhead (total - search - llm - revise)" if step == "overhead" else step
        table.add_row(
            label,
            f"{statistics.median(vals):.1f}",
            f"{percentile(vals, 95):.1f}",
            f"{statistics.fmean(vals):.1f}",
            f"{max(vals):.1f}",
        )
    console.print(table)
    p95 = percentile(samples["overhead"], 95)
    verdict = "[green]met[/]" if p95 < 40 else "[red]missed[/]"
    console.print(
        f"{backend}: answers {kinds}; target p95 overhead < 40 ms: {p95:.1f} ms, {verdict}"
    )
    return p95


async def run(rounds: int, writing_s: float, cold: bool, backends: list[str]) -> None:
    embedder = SentenceTransformerEmbedder.from_path()
    results: dict[str, tuple[Samples, dict[str, int]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        async with (
            temp_store(Path(tmp) / "weaviate") as store,
            SessionStore.open(Path(tmp) / "sessions.sqlite3") as sessions,
        ):
            paths = sorted(p for p in EXAMPLES.iterdir() if p.name.lower() != "readme.md")
            t0 = time.perf_counter()
            ingested = await ingest(store, embedder, KB, paths)
            console.print(
                f"ingested {len(ingested.results)} files, {ingested.segments} segments "
                f"in {time.perf_counter() - t0:.1f} s"
            )
            for backend in backends:
                results[backend] = await measure(
                    backend, store, sessions, embedder, rounds, writing_s, cold
                )
    for backend, (samples, kinds) in results.items():
        report(backend, rounds, samples, kinds)
    if len(results) > 1:
        line = ", ".join(
            f"{b} llm p50 {statistics.median(s['llm']):.1f} ms / total p50 "
            f"{statistics.median(s['total']):.1f} ms"
            for b, (s, _) in results.items()
        )
        console.print(f"side by side: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="Timed passes over the questions.")
    parser.add_argument(
        "--claude-ms",
        type=float,
        default=0.0,
        help="Delay before the emulated model answers (a real one takes seconds; the "
        "citation alignment's sentence vectors are computed meanwhile).",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="Forget sentence vectors before each question (as for a passage never seen).",
    )
    parser.add_argument(
        "--backend",
        choices=["claude", "openai", "both"],
        default="both",
        help="Which model API's emulator answers (both: one table each, same archive).",
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore", DeprecationWarning)
    backends = ["claude", "openai"] if args.backend == "both" else [args.backend]
    asyncio.run(run(args.rounds, args.claude_ms / 1000, args.cold, backends))


if __name__ == "__main__":
    main()
