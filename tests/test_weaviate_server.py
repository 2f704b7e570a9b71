"""The embedded server's lifecycle: a second process on the same data dir joins the
running server instead of starting another; the last one out stops it, and when every
user is killed without a chance to clean up, the server's reaper stops it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from retrieval.store.weaviate.reaper import pid_alive
from retrieval.store.weaviate.server import EmbeddedServer, endpoint_from_url, is_ready

REPO = Path(__file__).resolve().parent.parent


def test_second_process_reuses_the_server(tmp_path: Path) -> None:
    first = EmbeddedServer(tmp_path)
    endpoint = first.start()
    try:
        state = json.loads((tmp_path / "server.json").read_text())
        script = textwrap.dedent(
            f"""
            import json
            from pathlib import Path
            from retrieval.store.weaviate.server import EmbeddedServer
            s = EmbeddedServer(Path({str(tmp_path)!r}))
            e = s.start()
            state = json.loads((s.data_dir / "server.json").read_text())
            print(json.dumps({{"port": e.port, "state": state}}))
            s.stop()
            """
        )
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
        )
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert seen["port"] == endpoint.port  # joined, not a second server
        assert seen["state"]["pid"] == state["pid"]
        assert len(seen["state"]["users"]) == 2
        assert is_ready(endpoint.url)  # still serving the first process
    finally:
        first.stop()
    assert not pid_alive(state["pid"])
    assert not (tmp_path / "server.json").exists()


def test_server_does_not_outlive_users_killed_with_sigkill(tmp_path: Path) -> None:
    """Two processes share one server; both die by SIGKILL (the OOM killer, ``kill -9``),
    running no clean-up. The server is stopped and ``server.json`` removed all the same,
    and the next process starts a fresh server."""
    script = textwrap.dedent(
        f"""
        import sys, time
        from pathlib import Path
        from retrieval.store.weaviate.server import EmbeddedServer
        EmbeddedServer(Path({str(tmp_path)!r})).start()
        print("ready", flush=True)
        time.sleep(600)
        """
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    users = []
    for _ in range(2):
        user = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env
        )
        assert user.stdout is not None and user.stdout.readline().strip() == "ready"
        users.append(user)
    state = json.loads((tmp_path / "server.json").read_text())
    assert len(state["users"]) == 2 and pid_alive(state["pid"])

    users[0].kill()
    users[0].wait()
    time.sleep(3)  # three reaper rounds: one user is still alive, the server stays
    assert pid_alive(state["pid"]) and is_ready(endpoint_from_url(f"127.0.0.1:{state['port']}").url)

    users[1].kill()
    users[1].wait()
    state_file = tmp_path / "server.json"
    deadline = time.monotonic() + 30  # the reaper stops the server, then removes the state
    while (pid_alive(state["pid"]) or state_file.exists()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not pid_alive(state["pid"]), "weaviate-server outlived every process using it"
    assert not state_file.exists()

    fresh = EmbeddedServer(tmp_path)
    endpoint = fresh.start()
    try:
        assert is_ready(endpoint.url)
    finally:
        fresh.stop()


def servers_of(data_dir: Path) -> list[int]:
    """Pids of live weaviate-servers keeping their data in ``data_dir``."""
    mark = f"PERSISTENCE_DATA_PATH={data_dir / 'weaviate'}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return [pid for pid in found if pid_alive(pid)]


def test_a_process_killed_while_its_server_starts_leaves_none(tmp_path: Path) -> None:
    """SIGKILL while waiting for a fresh server to become ready: the server is stopped."""
    script = (
        "from pathlib import Path\n"
        "from retrieval.store.weaviate.server import EmbeddedServer\n"
        f"EmbeddedServer(Path({str(tmp_path)!r})).start()\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    starter = subprocess.Popen([sys.executable, "-c", script], env=env)
    deadline = time.monotonic() + 60
    while not servers_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert servers_of(tmp_path), "the server never started"
    # Killed at once, while it waits for the server to answer (about 2 s): without a
    # reaper from the start, nothing would ever stop this server.
    starter.kill()
    starter.wait()
    deadline = time.monotonic() + 30
    while servers_of(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not servers_of(tmp_path), "weaviate-server outlived the process starting it"


def test_reaper_leaves_a_deleted_data_dir_deleted(tmp_path: Path) -> None:
    """A temporary data dir removed right after its server stops stays removed: the
    reaper, waking after its server is gone, creates nothing (no lock file, no folder)."""
    data_dir = tmp_path / "short-lived"
    server = EmbeddedServer(data_dir)
    server.start()
    server.stop()
    shutil.rmtree(data_dir)
    time.sleep(3)  # the reaper wakes every second
    assert not data_dir.exists()


def test_endpoint_from_url() -> None:
    e = endpoint_from_url("https://abc.weaviate.cloud", "key")
    assert (e.host, e.port, e.grpc_port, e.secure, e.api_key) == (
        "abc.weaviate.cloud", 443, 443, True, "key",
    )  # fmt: skip
    local = endpoint_from_url("localhost:8080")
    assert (local.url, local.grpc_port) == ("http://localhost:8080", 50051)
