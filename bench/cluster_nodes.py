"""Three ``weaviate-server`` nodes on loopback as one Weaviate cluster, for
bench/cluster.py and tests/test_cluster.py: the same binary Quorum runs, each node with
its own data and ports, formed with Raft; a node can be killed (SIGKILL) and restarted."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import weaviate_binary
from retrieval.store.weaviate.server import Endpoint, free_port_block, node_env

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
        base = free_port_block(PORTS_PER_NODE * size)
        self.nodes = [
            Node(f"node{i}", base + PORTS_PER_NODE * i, root / f"node{i}") for i in range(size)
        ]

    def _env(self, node: Node, join: list[Node]) -> dict[str, str]:
        ports = (node.grpc, node.gossip, node.gossip + 1, node.raft, node.raft + 1)
        return node_env(node.data_dir, node.name, *ports) | {
            "CLUSTER_JOIN": ",".join(f"127.0.0.1:{n.gossip}" for n in join),
            "RAFT_JOIN": ",".join(f"{n.name}:{n.raft}" for n in self.nodes),
            "RAFT_BOOTSTRAP_EXPECT": str(len(self.nodes)),
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
