"""Retrieval past one machine: a three-node Weaviate cluster keeps answering with one node
killed, and the node rejoins.

Three ``weaviate-server`` processes (the binary Quorum runs embedded) start on loopback as
one cluster (``CLUSTER_*`` gossip, ``RAFT_*`` schema consensus). Quorum reaches it as an
operator's deployment would: ``QUORUM_WEAVIATE_MODE=local`` with the URL of one node and
``QUORUM_WEAVIATE_REPLICAS=3``, so its collections keep a copy of every object on every
node and read and write at QUORUM. The sample archive goes in through ``quorum ingest``'s
path (``open_core``'s retrieval, ``retrieval.indexer.ingest``); questions from
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
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table
from weaviate.classes.config import ConsistencyLevel

from bench.common import percentile, weaviate_binary
from bot.config import load_settings
from bot.models import Question, ThreadKey
from bot.wiring import open_core
from retrieval.chunking import ChunkConfig
from retrieval.embed import Embedder
from retrieval.indexer import ingest
from retrieval.schema import SOURCES
from retrieval.store import Store
from retrieval.weaviate_server import Endpoint, async_client

REPO = Path(__file__).resolve().parent.parent

KB = "bench"
PORTS_PER_NODE = 6  # http, grpc, gossip, data (gossip + 1), raft, raft rpc (raft + 1)


@dataclass
class Node:
    """One weaviate-server of the cluster: its name, ports and data."""

    name: str
    base: int  # the HTTP port; the others follow it
    data_dir: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def http(self) -> int:
        return self.base

    @property
    def grpc(self) -> int:
        return self.base + 1

    @property
    def gossip(self) -> int:
        return self.base + 2

    @property
    def raft(self) -> int:
        return self.base + 4

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http}"

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint("127.0.0.1", self.http, "127.0.0.1", self.grpc)


def _free_block(size: int) -> int:
    """A port p such that p .. p+size-1 are free on loopback now."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + size >= 65535:
            continue
        try:
            with contextlib.ExitStack() as stack:
                for port in range(base, base + size):
                    sock = stack.enter_context(socket.socket())
                    sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no block of free local ports")


def _get_json(url: str, timeout: float = 2.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return json.loads(resp.read())


class LocalCluster:
    """``size`` weaviate-server processes on loopback forming one cluster, data under
    ``root``. Start, kill a node (SIGKILL), restart it, stop all."""

    def __init__(self, root: Path, binary: Path, size: int = 3, timeout_s: float = 120.0):
        self.root = root
        self.binary = binary
        self.timeout_s = timeout_s
        base = _free_block(PORTS_PER_NODE * size)
        self.nodes = [
            Node(f"node{i}", base + PORTS_PER_NODE * i, root / f"node{i}") for i in range(size)
        ]

    def _env(self, node: Node, join: list[Node]) -> dict[str, str]:
        return {
            "PATH": os.environ.get("PATH", ""),
            "PERSISTENCE_DATA_PATH": str(node.data_dir / "weaviate"),
            "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED": "true",
            "DEFAULT_VECTORIZER_MODULE": "none",
            "ENABLE_MODULES": "",
            "GO_PROFILING_DISABLE": "true",
            "DISABLE_TELEMETRY": "true",
            "PROMETHEUS_MONITORING_ENABLED": "false",
            "QUERY_DEFAULTS_LIMIT": "25",
            "GRPC_PORT": str(node.grpc),
            "CLUSTER_HOSTNAME": node.name,
            "CLUSTER_IN_LOCALHOST": "true",
            "CLUSTER_BIND_ADDR": "127.0.0.1",
            "CLUSTER_ADVERTISE_ADDR": "127.0.0.1",
            "CLUSTER_GOSSIP_BIND_PORT": str(node.gossip),
            "CLUSTER_DATA_BIND_PORT": str(node.gossip + 1),
            "CLUSTER_JOIN": ",".join(f"127.0.0.1:{n.gossip}" for n in join),
            "RAFT_PORT": str(node.raft),
            "RAFT_INTERNAL_RPC_PORT": str(node.raft + 1),
            "RAFT_JOIN": ",".join(f"{n.name}:{n.raft}" for n in self.nodes),
            "RAFT_BOOTSTRAP_EXPECT": str(len(self.nodes)),
            "LOG_LEVEL": "warning",
        }

    def _spawn(self, node: Node, join: list[Node]) -> None:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        cmd = [str(self.binary), "--host", "127.0.0.1", "--port", str(node.http)]
        cmd += ["--scheme", "http"]
        with open(node.data_dir / "weaviate.log", "ab") as log:
            node.proc = subprocess.Popen(
                cmd,
                env=self._env(node, join),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def start(self) -> None:
        """Start every node (the first alone, the others joining it) and wait until each
        is ready and sees all of them healthy."""
        first, *others = self.nodes
        self._spawn(first, [])
        for node in others:
            self._spawn(node, [first])
        self.wait(self.formed)

    def wait(self, done: Callable[[], bool], what: str = "the cluster to form") -> float:
        """Seconds until ``done()`` holds; fails naming ``what`` and the logs on timeout."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < self.timeout_s:
            for node in self.nodes:
                if node.proc is not None and node.proc.poll() is not None:
                    log = (node.data_dir / "weaviate.log").read_text(errors="replace")
                    last = log.strip().splitlines()[-1][:300] if log.strip() else ""
                    raise RuntimeError(f"{node.name} exited ({node.proc.returncode}): {last}")
            if done():
                return time.monotonic() - t0
            time.sleep(0.2)
        raise RuntimeError(f"timed out waiting for {what}; logs under {self.root}")

    def formed(self) -> bool:
        """Every node answers and lists every node as healthy."""
        return all(self.healthy(n) == len(self.nodes) for n in self.nodes)

    def healthy(self, node: Node) -> int:
        """How many nodes ``node`` lists as HEALTHY (0 when it does not answer)."""
        try:
            if not self.ready(node):
                return 0
            nodes = _get_json(f"{node.url}/v1/nodes")["nodes"]
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            return 0
        return sum(1 for n in nodes if n.get("status") == "HEALTHY")

    @staticmethod
    def ready(node: Node) -> bool:
        try:
            with urllib.request.urlopen(f"{node.url}/v1/.well-known/ready", timeout=1) as r:
                return bool(r.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def leader(self) -> str | None:
        """The node that leads Raft (schema changes), as the first live node sees it."""
        for node in self.nodes:
            try:
                stats = _get_json(f"{node.url}/v1/cluster/statistics")["statistics"]
            except (urllib.error.URLError, OSError, ValueError, KeyError):
                continue
            for s in stats:
                if s.get("status") == "HEALTHY" and s.get("raft", {}).get("state") == "Leader":
                    return str(s.get("name"))
        return None

    def kill(self, node: Node) -> None:
        """SIGKILL: no flush, no goodbye to the others."""
        assert node.proc is not None
        node.proc.send_signal(signal.SIGKILL)
        node.proc.wait()
        node.proc = None

    def restart(self, node: Node) -> None:
        """Start a killed node again on its ports and data, joining the live ones."""
        self._spawn(node, [n for n in self.nodes if n is not node and n.proc is not None])

    def stop(self) -> None:
        """SIGTERM every live node; SIGKILL what has not stopped after 20 s."""
        for node in self.nodes:
            if node.proc is not None and node.proc.poll() is None:
                node.proc.terminate()
        for node in self.nodes:
            if node.proc is not None:
                try:
                    node.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    node.proc.kill()
                    node.proc.wait()
                node.proc = None


@contextlib.contextmanager
def local_cluster(root: Path, size: int = 3) -> Iterator[LocalCluster]:
    """A started ``LocalCluster`` of the product's weaviate-server, stopped on exit. A start
    that fails (another program took one of the free ports picked) is tried again on others,
    twice at most."""
    for attempt in range(3):
        cluster = LocalCluster(root / f"try{attempt}", weaviate_binary(), size)
        try:
            cluster.start()
        except RuntimeError:
            cluster.stop()
            if attempt == 2:
                raise
            continue
        break
    try:
        yield cluster
    finally:
        cluster.stop()


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
        col = client.collections.use(SOURCES).with_tenant(kb)
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
            restarted_at = 0.0
            phases = [Phase("before"), Phase(f"{victim.name} killed"), Phase("rejoining")]

            async def ask(text: str, phase: Phase) -> None:
                question = Question(
                    text=text,
                    thread=ThreadKey("bench", "local", "cluster", f"q{time.monotonic_ns()}"),
                    user="bench",
                    kb=KB,
                )
                t = time.perf_counter()
                try:
                    answer = await core.engine.ask(question)
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

            # Each phase asks the same questions in the same order, all asked once before
            # (caches warm alike), so the phases differ only in the cluster's state.
            on_step("asking each question once to warm up (not counted)")
            for text in questions[: min(len(questions), max(1, n_questions // 3))]:
                await ask(text, Phase("warm-up"))
            write: asyncio.Task[Any] | None = None
            load_start = os.getloadavg()[0]
            rejoin: asyncio.Task[float] | None = None
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
                        asyncio.to_thread(
                            cluster.wait,
                            cluster.formed,
                            f"{victim.name} to rejoin",
                        )
                    )
                nth = min(2, i * 3 // n_questions)
                await ask(questions[(i - nth * n_questions // 3) % len(questions)], phases[nth])
                on_question()
            load_end = os.getloadavg()[0]
            assert write is not None and rejoin is not None
            write_status = await write
            rejoin_s = await rejoin
            sources = len(await r.store.list_sources(KB))
            on_step(f"reading every source at consistency ALL through {victim.name}")
            # A search reads one copy's index (QUORUM checks the objects it found against
            # the others; it does not add what that copy lacks).
            caught_up_s: float | None = None
            deadline = time.monotonic() + catch_up_timeout_s
            read = 0
            while True:
                with contextlib.suppress(Exception):  # not serving yet: ask again
                    read = await all_read(victim, KB)
                if read == sources:
                    caught_up_s = time.monotonic() - restarted_at
                    break
                if time.monotonic() > deadline:
                    break
                await asyncio.sleep(0.5)
    return Result(
        phases=phases,
        killed=victim.name,
        killed_leader=victim.name == leader,
        formed_s=formed_s,
        ingest_s=ingest_s,
        segments=report.segments,
        write_while_down=write_status,
        rejoin_s=rejoin_s,
        caught_up_s=caught_up_s,
        all_read=read,
        sources=sources,
        load=(load_start, load_end),
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
