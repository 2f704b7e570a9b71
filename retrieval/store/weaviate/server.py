"""Where Weaviate runs and how Quorum reaches it.

Three modes:

- ``embedded`` (default): Quorum runs the official ``weaviate-server`` binary as a child
  process, loopback only, on free ports, data under ``<data_dir>/weaviate``. Processes
  that share a data dir share one server: ``server.json`` records its ports and the
  processes using it, guarded by ``server.lock`` (flock). The last process out stops it.
- ``local``: a server someone else runs, by URL.
- ``cloud``: Weaviate Cloud, by URL and API key.

Every connection skips the client's init checks, which would otherwise try the
internet (PyPI version check, remote health probes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import socket
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from platformdirs import user_cache_dir

from retrieval.errors import ConfigError, SearchUnavailable
from retrieval.links.links import redact_url
from retrieval.store.weaviate.reaper import (
    is_our_server,
    locked,
    pid_alive,
    read_state,
    reap_child,
    spawn,
    start_reaper,
    terminate,
)

if TYPE_CHECKING:
    import weaviate

log = logging.getLogger(__name__)

WEAVIATE_VERSION = "1.39.0"
JOIN_TIMEOUT_S = 10.0
"""How long a server named in ``server.json`` may take to answer before it is called hung:
it was ready once (the state is written only then), so it answers at once unless it is
stopped (SIGSTOP) or wedged; that takes a sentence, not a boot's minute and a half."""
Mode = Literal["embedded", "local", "cloud"]


@dataclass(frozen=True)
class Endpoint:
    """How to reach a Weaviate server."""

    host: str
    port: int
    grpc_host: str
    grpc_port: int
    secure: bool = False
    api_key: str | None = None

    @property
    def url(self) -> str:
        """The HTTP base URL, for messages and health checks."""
        return f"{'https' if self.secure else 'http'}://{self.host}:{self.port}"


def endpoint_from_url(
    url: str, api_key: str | None = None, grpc_port: int | None = None
) -> Endpoint:
    """Parse ``http://host:8080`` into an endpoint (gRPC on 50051 unless given)."""
    bad = ConfigError(
        f"QUORUM_WEAVIATE_URL must look like http://host:8080, not {redact_url(url)!r}."
    )
    try:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        given_port = parts.port  # ValueError for a port that is not a number
    except ValueError:
        raise bad from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad
    secure = parts.scheme == "https"
    port = given_port or (443 if secure else 8080)
    return Endpoint(
        host=parts.hostname,
        port=port,
        grpc_host=parts.hostname,
        grpc_port=grpc_port or (443 if secure else 50051),
        secure=secure,
        api_key=api_key,
    )


def find_binary(explicit: str | None = None) -> Path | None:
    """The weaviate-server to run: explicit setting, PATH, beside this interpreter, or
    the cached build ``make install`` leaves under the user cache dir."""
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise ConfigError(f"QUORUM_WEAVIATE_BINARY points at {path}, which does not exist.")
        return path
    on_path = shutil.which("weaviate-server")
    if on_path:
        return Path(on_path)
    beside = Path(sys.executable).parent / "weaviate-server"
    if beside.exists():
        return beside.resolve()
    cache = Path(user_cache_dir("quorum"))  # ~/.cache/quorum, as scripts/install.sh uses
    cached = cache / f"weaviate-v{WEAVIATE_VERSION}" / "weaviate-server"
    return cached if cached.exists() else None


def free_port_block(size: int) -> int:
    """A port p such that p .. p+size-1 are all free on loopback right now."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = int(s.getsockname()[1])
        if base + size >= 65535:
            continue
        if all(_port_free(base + i) for i in range(size)):
            return base
    raise SearchUnavailable("Could not find free local ports for the embedded Weaviate server.")


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def is_ready(url: str, timeout: float = 1.0) -> bool:
    """True when Weaviate at ``url`` answers its readiness probe."""
    try:
        with urllib.request.urlopen(f"{url}/v1/.well-known/ready", timeout=timeout) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


HYBRID_CANDIDATES = 100

# How Weaviate forgets. A deleted object is a tombstone in the memtable (and its WAL)
# until the memtable is flushed to a segment; a compaction of that segment with the
# older one holding the object then drops both. Weaviate flushes a memtable 60 s after
# its first write, and never while its WAL is under 4 KB (a small WAL is reused, not
# flushed): a removed source's words could stay on disk indefinitely. Flushed after
# FLUSH_DIRTY_S, small WALs included, a removal usually leaves every file within a
# minute, as soon as a compaction pairs its tombstones with the segment holding the
# words. When no pair comes they would stay: what bounds it is the tenant's rebuild after
# each removal (``rebuild``), which these settings no longer need to.
FLUSH_DIRTY_S = 10
FORGETTING = {
    "PERSISTENCE_MEMTABLES_FLUSH_DIRTY_AFTER_SECONDS": str(FLUSH_DIRTY_S),
    "PERSISTENCE_MAX_REUSE_WAL_SIZE": "0",
}


def node_env(
    data_dir: Path, name: str, grpc_port: int, gossip: int, data: int, raft: int, raft_rpc: int
) -> dict[str, str]:
    """A loopback weaviate-server node's environment: its data under ``data_dir``, these
    ports, no modules, no telemetry. How it forms a Raft cluster is the caller's to add."""
    return {
        "PATH": os.environ.get("PATH", ""),
        "PERSISTENCE_DATA_PATH": str(data_dir / "weaviate"),
        "AUTHENTICATION_ANONYMOUS_ACCESS_ENABLED": "true",
        "DEFAULT_VECTORIZER_MODULE": "none",
        "ENABLE_MODULES": "",
        "GO_PROFILING_DISABLE": "true",
        "DISABLE_TELEMETRY": "true",
        "PROMETHEUS_MONITORING_ENABLED": "false",
        "QUERY_DEFAULTS_LIMIT": "25",
        "QUERY_HYBRID_MAXIMUM_RESULTS": os.environ.get(
            "QUERY_HYBRID_MAXIMUM_RESULTS", str(HYBRID_CANDIDATES)
        ),
        "GRPC_PORT": str(grpc_port),
        "CLUSTER_HOSTNAME": name,
        "CLUSTER_IN_LOCALHOST": "true",
        "CLUSTER_BIND_ADDR": "127.0.0.1",
        "CLUSTER_ADVERTISE_ADDR": "127.0.0.1",
        "CLUSTER_GOSSIP_BIND_PORT": str(gossip),
        "CLUSTER_DATA_BIND_PORT": str(data),
        "RAFT_PORT": str(raft),
        "RAFT_INTERNAL_RPC_PORT": str(raft_rpc),
        "LOG_LEVEL": "warning",
        **FORGETTING,
    }


def _server_env(
    data_dir: Path, grpc_port: int, gossip: int, data: int, raft: int, raft_rpc: int
) -> dict[str, str]:
    """A lone loopback node's environment: its data under ``data_dir``, these ports."""
    return node_env(data_dir, "quorum", grpc_port, gossip, data, raft, raft_rpc) | {
        "RAFT_JOIN": f"quorum:{raft}",
        "RAFT_BOOTSTRAP_EXPECT": "1",
        # Weaviate stretches Raft's timeouts 5x for clusters on real networks; a lone
        # node on loopback then waits 5 s for a heartbeat no peer will send before it
        # elects itself. 1x: the server is ready in about 2.4 s instead of 7.9 s.
        "RAFT_TIMEOUTS_MULTIPLIER": "1",
    }


class EmbeddedServer:
    """A ``weaviate-server`` child process shared by every Quorum process on one data dir."""

    def __init__(self, data_dir: Path, binary: Path | None = None, startup_timeout: float = 90.0):
        self.data_dir = data_dir
        self.binary = binary
        self.startup_timeout = startup_timeout
        self._state_file = data_dir / "server.json"
        self._lock_file = data_dir / "server.lock"
        self._endpoint: Endpoint | None = None
        self._pid: int | None = None  # the server this process started, if any

    def _locked(self) -> contextlib.AbstractContextManager[None]:
        return locked(self._lock_file)

    def _read_state(self) -> dict[str, Any] | None:
        return read_state(self._state_file)

    def _write_state(self, state: dict[str, Any]) -> None:
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(self._state_file)

    def start(self) -> Endpoint:
        """Start the server, or join the one already serving this data dir (blocking)."""
        with self._locked():
            state = self._read_state()
            # A stale server.json may name a pid the system has since given to another
            # program: waiting for that to become ready would cost the whole timeout.
            if state and is_our_server(pid := int(state["pid"]), self.data_dir):
                endpoint = Endpoint("127.0.0.1", state["port"], "127.0.0.1", state["grpc_port"])
                if self._wait_ready(endpoint, pid, JOIN_TIMEOUT_S):
                    state["users"] = [p for p in state["users"] if pid_alive(p)] + [os.getpid()]
                    self._write_state(state)
                    self._endpoint = endpoint
                    return endpoint
                if pid_alive(pid):  # alive and not answering: another server beside it
                    # on the same data would fail too, after another boot's wait
                    raise SearchUnavailable(
                        f"The Weaviate server of {self.data_dir} (pid {pid}, {endpoint.url}) "
                        f"is running but has not answered for {JOIN_TIMEOUT_S:g} seconds; "
                        f"if it stays so, stop it (kill {pid}) and Quorum starts a fresh one."
                    )
            state = self._spawn()
            self._write_state(state)
        self._endpoint = Endpoint("127.0.0.1", state["port"], "127.0.0.1", state["grpc_port"])
        return self._endpoint

    def revive(self) -> bool:
        """Restart the server if it has died, on the same ports, so that every process's
        client reconnects by itself; True when it was restarted. Whichever process using
        it notices first restarts it (under the lock) and owns the new one."""
        if self._endpoint is None:
            return False
        if self._pid is not None:
            reap_child(self._pid)  # our own dead child: no zombie left behind
        with self._locked():
            state = self._read_state()
            if not state or is_our_server(int(state["pid"]), self.data_dir):
                return False
            users = [p for p in state.get("users", []) if pid_alive(p) and p != os.getpid()]
            # The six ports start at the HTTP port (see _spawn): the same ones again.
            fresh = self._spawn(base=int(state["port"]))
            fresh["users"] = [*users, os.getpid()]
            self._write_state(fresh)
        log.warning(
            "weaviate-server pid %s had stopped; restarted it as pid %s", state["pid"], fresh["pid"]
        )
        return True

    async def watch(self, interval_s: float = 2.0, max_backoff_s: float = 60.0) -> None:
        """Check every ``interval_s`` that the server lives and restart it if not, backing
        off (doubling, up to ``max_backoff_s``) while restarts fail. Runs until cancelled."""
        wait = interval_s
        while True:
            await asyncio.sleep(wait)
            try:
                await asyncio.to_thread(self.revive)
            except Exception:
                wait = min(max_backoff_s, wait * 2)
                log.warning("could not restart weaviate-server; next try in %.0fs", wait)
                log.debug("restart failed", exc_info=True)
            else:
                wait = interval_s

    def _spawn(self, base: int | None = None) -> dict[str, Any]:
        binary = self.binary or find_binary()
        if binary is None:
            raise ConfigError(
                "No weaviate-server binary: run `make install`, put weaviate-server on PATH, "
                "or set QUORUM_WEAVIATE_BINARY."
            )
        base = free_port_block(6) if base is None else base
        port, grpc_port, gossip, data, raft, raft_rpc = range(base, base + 6)
        env = _server_env(self.data_dir, grpc_port, gossip, data, raft, raft_rpc)
        cmd = [str(binary), "--host", "127.0.0.1", "--port", str(port), "--scheme", "http"]
        log_path = self.data_dir / "weaviate.log"
        # A pid, not a ``Popen``: the server may outlive this process (``stop(linger=True)``).
        pid = spawn(cmd, env, log_path)
        # At once, not once ready: a process killed while waiting must not leave it behind
        # (the reaper waits on server.lock, held until server.json names its users).
        start_reaper(self.data_dir, pid)
        endpoint = Endpoint("127.0.0.1", port, "127.0.0.1", grpc_port)
        if not self._wait_ready(endpoint, pid):
            terminate(pid)
            tail = log_path.read_text(errors="replace")[-800:]
            raise SearchUnavailable(
                f"The embedded Weaviate server did not become ready at {endpoint.url} "
                f"(log: {log_path}): {tail.strip().splitlines()[-1] if tail.strip() else ''}"
            )
        self._pid = pid
        log.info("started weaviate-server pid=%s at %s", pid, endpoint.url)
        return {"pid": pid, "port": port, "grpc_port": grpc_port, "users": [os.getpid()]}

    def _wait_ready(self, endpoint: Endpoint, pid: int, timeout_s: float | None = None) -> bool:
        deadline = time.monotonic() + (self.startup_timeout if timeout_s is None else timeout_s)
        while time.monotonic() < deadline:
            if is_ready(endpoint.url, timeout=0.5):
                return True
            if not pid_alive(pid):
                return False
            reap_child(pid)  # a child that died: no zombie left behind
            time.sleep(0.02)
        return False

    def stop(self, *, linger: bool = False) -> None:
        """Leave the shared server; stop it if no other live process uses it.

        With ``linger`` the last user out leaves a server it started to its reaper, which
        stops it within about a second: a one-shot command exits without waiting for
        Weaviate's shutdown (a quarter of a second), and a command started meanwhile
        finds the server still up and uses it instead of booting another."""
        if self._endpoint is None:
            return
        self._endpoint = None
        with self._locked():
            state = self._read_state()
            if not state:
                return
            users = [p for p in state["users"] if p != os.getpid() and pid_alive(p)]
            if users or linger:
                state["users"] = users
                self._write_state(state)
                return
            terminate(int(state["pid"]))
            self._pid = None
            self._state_file.unlink(missing_ok=True)


def async_client(endpoint: Endpoint, *, timeout_s: float = 30.0) -> weaviate.WeaviateAsyncClient:
    """An async client for ``endpoint`` that never calls out to the internet."""
    # Imported here: the client library takes a second to import, which a process
    # starting the embedded server spends while the server boots (``open``).
    import weaviate
    from weaviate.classes.init import AdditionalConfig, Auth, Timeout

    auth = Auth.api_key(endpoint.api_key) if endpoint.api_key else None
    return weaviate.use_async_with_custom(
        http_host=endpoint.host,
        http_port=endpoint.port,
        http_secure=endpoint.secure,
        grpc_host=endpoint.grpc_host,
        grpc_port=endpoint.grpc_port,
        grpc_secure=endpoint.secure,
        auth_credentials=auth,
        skip_init_checks=True,
        additional_config=AdditionalConfig(
            timeout=Timeout(init=5, query=timeout_s, insert=max(timeout_s, 60))
        ),
    )
