"""Retrieval past one machine: a three-node Weaviate cluster keeps answering with one node
killed, and the node rejoins.

Three ``weaviate-server`` processes (the binary Quorum runs embedded) start on loopback as
one cluster (``CLUSTER_*`` gossip, ``RAFT_*`` schema consensus). Quorum reaches it as an
operator's deployment would: ``QUORUM_WEAVIATE_MODE=local`` with the URL of one node and
``QUORUM_WEAVIATE_REPLICAS=3``, so its collections keep a copy of every object on every
node and read and write at QUORUM. The sample archive goes in through ``quorum ingest``'s
path (``open_core``'s retrieval, ``retrieval.write.indexer.ingest``); questions from
``examples/eval.jsonl`` go through the engine (``Engine.ask``: search, sources, an
extractive answer, the session store), one after another.

Each question is asked once first (not counted), then the stream runs in three phases that
ask the same questions in the same order: all nodes up; another node than the one Quorum
talks to killed with SIGKILL (the Raft leader when it is one), a file ingested meanwhile
(writes at QUORUM); the node restarted, rejoining. Answered means an answer (with sources,
or "nothing found"); an error answer ("search is unavailable") or an exception is an error.
After the stream: how long the node took to be healthy again, and to catch up, i.e. until a
read at consistency ALL coordinated by it returns every source, the one written while it
was down included (a search reads one copy's index, so a node serves complete results
only once async replication has brought it what it missed).

Run: ``.venv/bin/python bench/cluster.py [--questions 90]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from weaviate.classes.config import ConsistencyLevel

from bench.cluster_nodes import LocalCluster, Node, local_cluster
from bench.common import percentile
from bot.config import load_settings
from bot.engine import Engine
from bot.models import Question, ThreadKey
from bot.wiring import open_core
from retrieval.encoding.embed import Embedder
from retrieval.service import Retrieval
from retrieval.store import Store
from retrieval.store.weaviate.schema import SOURCES
from retrieval.store.weaviate.server import async_client
from retrieval.store.weaviate.tenants import TenantNames
from retrieval.write.chunking import ChunkConfig
from retrieval.write.indexer import ingest

REPO = Path(__file__).resolve().parent.parent

KB = "bench"


@dataclass
class Phase:
    """The questions asked in one phase of the run and what came of them."""

    name: str
    latencies_ms: list[float] = field(default_factory=list)
    search_ms: list[float] = field(default_factory=list)  # the answers' search stage
    answered: int = 0
    errors: int = 0
    nothing_found: int = 0

    @property
    def asked(self) -> int:
        return len(self.latencies_ms)


@dataclass
class Result:
    """What a run measured."""

    phases: list[Phase]
    killed: str
    killed_leader: bool
    formed_s: float
    ingest_s: float
    segments: int
    write_while_down: str  # the ingest's outcome with the node down (run again if it failed)
    rejoin_s: float  # restart until every node lists every node healthy
    caught_up_s: float | None  # restart until the node holds every source (None: not yet)
    all_read: int  # sources a read at consistency ALL returned through the rejoined node
    sources: int  # sources the knowledge base holds
    load: tuple[float, float]  # the 1-minute load average when the questions began and ended

    @property
    def unanswered(self) -> int:
        return sum(p.asked - p.answered for p in self.phases)


def eval_questions() -> list[str]:
    lines = (REPO / "examples" / "eval.jsonl").read_text().splitlines()
    return [json.loads(line)["question"] for line in lines if line.strip()]


async def all_read(node: Node, kb: str) -> int:
    """How many sources a read at consistency ALL (every copy must answer) returns when the
    question goes to ``node``."""
    async with async_client(node.endpoint) as client:
        live = await TenantNames(client, client.collections.use).live(kb)  # after rebuilds
        col = client.collections.use(SOURCES).with_tenant(live)
        res = await col.with_consistency_level(ConsistencyLevel.ALL).query.fetch_objects(limit=1000)
    return len(res.objects)


async def write_down(store: Store, embedder: Embedder, chunking: ChunkConfig, path: Path) -> str:
    """Ingest ``path`` as ``quorum ingest`` does and say how it went; a failed file is
    ingested once more, as a user would run ``quorum ingest`` again. A write in the seconds
    after a node dies can fail: Weaviate's replication to it answers "the client connection
    is closing" before the cluster has noticed it is gone."""
    first = await ingest(store, embedder, KB, [path], chunking=chunking)
    if not first.failed:
        return f"ok ({first.segments} segments)"
    again = await ingest(store, embedder, KB, [path], chunking=chunking)
    outcome = "failed again" if again.failed else f"ok ({again.segments} segments)"
    return f"failed ({first.failed[0].reason}); run again: {outcome}"


async def ask(engine: Engine, text: str, phase: Phase) -> None:
    """Ask ``text`` through the engine, counting the outcome and latency in ``phase``."""
    question = Question(
        text=text,
        thread=ThreadKey("bench", "local", "cluster", f"q{time.monotonic_ns()}"),
        user="bench",
        kb=KB,
    )
    t = time.perf_counter()
    try:
        answer = await engine.ask(question)
    except Exception:
        phase.errors += 1
    else:
        if answer.kind == "error":
            phase.errors += 1
        elif answer.kind == "nothing_found":
            phase.nothing_found += 1
            phase.answered += 1
        else:
            phase.answered += 1
        if "search" in answer.timings:
            phase.search_ms.append(answer.timings["search"])
    phase.latencies_ms.append((time.perf_counter() - t) * 1000)


async def caught_up(
    node: Node, sources: int, since: float, timeout_s: float
) -> tuple[float | None, int]:
    """Seconds from ``since`` until a read at consistency ALL through ``node`` finds every
    source (None if it never does within ``timeout_s``), and how many it last found. A
    search reads one copy's index (QUORUM checks the objects it found against the
    others; it does not add what that copy lacks)."""
    deadline = time.monotonic() + timeout_s
    read = 0
    while True:
        with contextlib.suppress(Exception):  # not serving yet: ask again
            read = await all_read(node, KB)
        if read == sources:
            return time.monotonic() - since, read
        if time.monotonic() > deadline:
            return None, read
        await asyncio.sleep(0.5)


@dataclass
class Stream:
    """What happened around the questions: the write made while a node was down, when the
    node was restarted and how long it took to rejoin, the load before and after."""

    write_status: Any
    restarted_at: float
    rejoin_s: float
    load: tuple[float, float]


async def stream_through_kill(
    engine: Engine,
    r: Retrieval,
    cluster: LocalCluster,
    victim: Node,
    questions: list[str],
    phases: list[Phase],
    n_questions: int,
    written_while_down: Path,
    on_step: Callable[[str], None],
    on_question: Callable[[], None],
) -> Stream:
    """Ask ``n_questions`` in three phases: all nodes up, ``victim`` killed with SIGKILL
    (a file ingested meanwhile), ``victim`` restarted and rejoining."""
    write: asyncio.Task[Any] | None = None
    rejoin: asyncio.Task[float] | None = None
    restarted_at = 0.0
    load_start = os.getloadavg()[0]
    for i in range(n_questions):
        if i == n_questions // 3:
            on_step(f"SIGKILL {victim.name}; ingesting a file while it is down")
            cluster.kill(victim)
            write = asyncio.create_task(
                write_down(r.store, r.embedder, r.chunking, written_while_down)
            )
        if i == 2 * n_questions // 3:
            assert write is not None
            await asyncio.gather(write, return_exceptions=True)
            on_step(f"restarting {victim.name}; waiting for it to rejoin")
            cluster.restart(victim)
            restarted_at = time.monotonic()
            rejoin = asyncio.create_task(
                asyncio.to_thread(cluster.wait, cluster.formed, f"{victim.name} to rejoin")
            )
        nth = min(2, i * 3 // n_questions)
        await ask(engine, questions[(i - nth * n_questions // 3) % len(questions)], phases[nth])
        on_question()
    load_end = os.getloadavg()[0]
    assert write is not None and rejoin is not None
    return Stream(await write, restarted_at, await rejoin, (load_start, load_end))


async def run(
    root: Path,
    n_questions: int,
    paths: list[Path],
    written_while_down: Path,
    on_step: Callable[[str], None] = lambda _: None,
    on_question: Callable[[], None] = lambda: None,
    catch_up_timeout_s: float = 180.0,
) -> Result:
    """Form the cluster, ingest ``paths``, ask ``n_questions`` with a node killed a third
    of the way in and restarted two thirds in; ingest ``written_while_down`` while it is
    down."""
    on_step("starting three weaviate-server nodes")
    t0 = time.monotonic()
    with local_cluster(root / "weaviate") as cluster:
        formed_s = time.monotonic() - t0
        entry = cluster.nodes[0]  # what QUORUM_WEAVIATE_URL names
        leader = await asyncio.to_thread(cluster.leader)
        # Kill the Raft leader when it is not the node Quorum talks to: the harder case.
        victim = next((n for n in cluster.nodes[1:] if n.name == leader), cluster.nodes[-1])
        settings = load_settings(
            data_dir=root / "quorum",
            weaviate_mode="local",
            weaviate_url=entry.url,
            weaviate_grpc_port=entry.grpc,
            weaviate_replicas=len(cluster.nodes),
            anthropic_api_key=None,
        )
        async with open_core(settings) as core:
            r = core.retrieval
            on_step("ingesting the sample archive (replication factor 3)")
            t = time.monotonic()
            report = await ingest(r.store, r.embedder, KB, paths, chunking=r.chunking)
            ingest_s = time.monotonic() - t
            if report.failed:
                raise RuntimeError(f"ingest failed: {report.failed[0].reason}")
            questions = eval_questions()
            phases = [Phase("before"), Phase(f"{victim.name} killed"), Phase("rejoining")]

            # Each phase asks the same questions in the same order, all asked once before
            # (caches warm alike), so the phases differ only in the cluster's state.
            on_step("asking each question once to warm up (not counted)")
            for text in questions[: min(len(questions), max(1, n_questions // 3))]:
                await ask(core.engine, text, Phase("warm-up"))
            stream = await stream_through_kill(
                core.engine, r, cluster, victim, questions, phases, n_questions,
                written_while_down, on_step, on_question,
            )  # fmt: skip
            sources = len(await r.store.list_sources(KB))
            on_step(f"reading every source at consistency ALL through {victim.name}")
            caught_up_s, read = await caught_up(
                victim, sources, stream.restarted_at, catch_up_timeout_s
            )
    return Result(
        phases=phases,
        killed=victim.name,
        killed_leader=victim.name == leader,
        formed_s=formed_s,
        ingest_s=ingest_s,
        segments=report.segments,
        write_while_down=stream.write_status,
        rejoin_s=stream.rejoin_s,
        caught_up_s=caught_up_s,
        all_read=read,
        sources=sources,
        load=stream.load,
    )


def tables(result: Result) -> tuple[Table, Table]:
    """The run as two tables: each phase's questions and latency; the cluster's events."""
    t = Table(
        title="Three-node Weaviate, one node killed mid-stream (QUORUM reads and writes)",
        caption=f"{os.cpu_count()} cores; 1-minute load average {result.load[0]:.1f} when "
        f"the questions began, {result.load[1]:.1f} when they ended. Answer = Engine.ask "
        "without Claude (search, sources, extractive answer, session store).",
    )
    t.add_column("phase")
    for col in ("questions", "answered", "nothing found", "errors"):
        t.add_column(col, justify="right")
    for col in ("answer p50", "answer p95", "search p50", "search p95"):
        t.add_column(f"{col} ms", justify="right")
    everyone = Phase(
        "all",
        [ms for p in result.phases for ms in p.latencies_ms],
        [ms for p in result.phases for ms in p.search_ms],
        sum(p.answered for p in result.phases),
        sum(p.errors for p in result.phases),
        sum(p.nothing_found for p in result.phases),
    )
    for p in [*result.phases, everyone]:
        t.add_row(
            p.name,
            str(p.asked),
            str(p.answered),
            str(p.nothing_found),
            str(p.errors),
            *(f"{percentile(v, q):.0f}" for v in (p.latencies_ms, p.search_ms) for q in (50, 95)),
        )
    events = Table(title="The cluster")
    events.add_column("event")
    events.add_column("result")
    leader = " (the Raft leader)" if result.killed_leader else ""
    for what, value in (
        ("cluster formed in", f"{result.formed_s:.1f} s"),
        ("sample archive ingested in", f"{result.ingest_s:.1f} s ({result.segments} segments)"),
        ("killed with SIGKILL", result.killed + leader),
        ("ingest while it was down", result.write_while_down),
        ("healthy again after restart in", f"{result.rejoin_s:.1f} s"),
        (
            "caught up (read at ALL through it finds every source) in",
            "not yet" if result.caught_up_s is None else f"{result.caught_up_s:.1f} s",
        ),
        ("read at ALL through it", f"{result.all_read} of {result.sources} sources"),
    ):
        events.add_row(what, value)
    return t, events


async def main(n: int) -> None:
    console = Console()
    examples = REPO / "examples"
    with (
        tempfile.TemporaryDirectory() as tmp,
        Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
        ) as progress,
    ):
        task = progress.add_task("questions", total=n)

        def step(text: str) -> None:
            progress.console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] {text}")
            progress.update(task, description=text.split(";")[0])

        result = await run(
            Path(tmp),
            n,
            [examples / "recordings", examples / "docs"],
            examples / "handbook",
            on_step=step,
            on_question=lambda: progress.advance(task),
        )
    console.print(*tables(result))
    if result.unanswered:
        raise SystemExit(f"{result.unanswered} question(s) were not answered.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=90, help="questions in the stream")
    args = parser.parse_args()
    if args.questions < 3:
        parser.error("--questions must be at least 3 (one per phase).")
    asyncio.run(main(args.questions))
