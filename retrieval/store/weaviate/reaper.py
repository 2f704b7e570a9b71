"""Stops an embedded ``weaviate-server`` once every process that used it has died.

The last Quorum process out stops the server itself (``EmbeddedServer.stop``), but a
process killed with SIGKILL, by the OOM killer, or a script's SIGTERM with no handler
runs no clean-up, and the server would outlive it forever. So each server gets a reaper:
a tiny process of its own (standard library only, started as a script) that checks every
second, under the data dir's ``server.lock``, whether any process listed in
``server.json`` is alive; when none is, it stops the server and removes ``server.json``,
so the next Quorum process starts afresh. It exits when its server does.

Also holds the process helpers ``server`` shares with it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

INTERVAL_S = 1.0


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists (a zombie counts until its parent reaps it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def is_our_server(pid: int, data_dir: Path) -> bool:
    """True when ``pid`` is alive and is a weaviate-server keeping its data in ``data_dir``."""
    if not pid_alive(pid):
        return False
    proc = Path(f"/proc/{pid}")
    if not proc.is_dir():  # no procfs (macOS): ask ps for the command line
        try:
            done = subprocess.run(
                ["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True, timeout=5
            )
        except (OSError, subprocess.SubprocessError):
            return True  # cannot tell; the readiness wait decides
        return "weaviate" in done.stdout
    try:
        if b"weaviate" not in (proc / "cmdline").read_bytes():
            return False
        environ = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"PERSISTENCE_DATA_PATH={data_dir / 'weaviate'}".encode() in environ


def terminate(pid: int, proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM, wait up to 20 s for a clean shutdown (it flushes its data), then SIGKILL."""
    if proc is not None and proc.pid == pid:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, 15)
    deadline = time.monotonic() + 20
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if pid_alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)


@contextlib.contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """The data dir's ``server.lock``, held exclusively (flock)."""
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_state(state_file: Path) -> dict[str, Any] | None:
    """``server.json``: the server's pid, ports and users; None when absent or unreadable."""
    try:
        state: dict[str, Any] = json.loads(state_file.read_text())
    except (OSError, ValueError):
        return None
    return state


def start_reaper(data_dir: Path, server_pid: int) -> int:
    """Start the reaper of ``server_pid`` in a session of its own (Ctrl-C in a terminal
    must not stop it); its pid. Not a ``Popen``: it may well outlive this process."""
    argv = [sys.executable, "-I", str(Path(__file__).resolve()), str(data_dir), str(server_pid)]
    null = os.open(os.devnull, os.O_RDWR)
    try:
        actions = [(os.POSIX_SPAWN_DUP2, null, fd) for fd in (0, 1, 2)]
        return os.posix_spawn(
            sys.executable, argv, dict(os.environ), file_actions=actions, setsid=True
        )
    finally:
        os.close(null)


def reap(data_dir: Path, server_pid: int, interval_s: float = INTERVAL_S) -> None:
    """Watch ``server_pid`` until it exits, stopping it when no user of it is left."""
    state_file, lock_file = data_dir / "server.json", data_dir / "server.lock"
    while True:
        time.sleep(interval_s)
        if not pid_alive(server_pid):
            return
        # Never create anything: the last user may be deleting the data dir right now
        # (a temporary folder), and a lock file made here would leave it "not empty".
        try:
            fd = os.open(lock_file, os.O_RDWR)
        except OSError:  # the data dir is gone: no one can find this server any more
            if is_our_server(server_pid, data_dir):
                terminate(server_pid, None)
            return
        with os.fdopen(fd, "r+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            state = read_state(state_file)
            ours = state is not None and int(state.get("pid", -1)) == server_pid
            users = [p for p in state.get("users", []) if pid_alive(p)] if state and ours else []
            if users:
                continue
            if is_our_server(server_pid, data_dir):
                terminate(server_pid, None)
            if ours:
                state_file.unlink(missing_ok=True)
            return


if __name__ == "__main__":
    reap(Path(sys.argv[1]), int(sys.argv[2]))
