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
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

INTERVAL_S = 1.0


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` runs. A zombie does not: a server whose user exited was
    handed to PID 1, and where that is no init (a container, a VM's agent) nothing ever
    reaps it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:  # gone since, or no procfs to ask (macOS: a zombie reads as alive)
        return not Path("/proc/self").exists()
    return stat.rpartition(b")")[2].split()[:1] != [b"Z"]


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


def reap_child(pid: int) -> None:
    """Collect ``pid``'s exit status if it is a dead child of this process, so it leaves
    no zombie behind (and reads as gone where there is no procfs to tell a zombie by);
    nothing for any other pid."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def terminate(pid: int) -> None:
    """SIGTERM, wait up to 20 s for a clean shutdown (it flushes its data), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        reap_child(pid)
        if not pid_alive(pid):
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    while pid_alive(pid) and time.monotonic() < deadline + 5:
        reap_child(pid)
        time.sleep(0.02)


def spawn(argv: list[str], env: dict[str, str], log_path: Path) -> int:
    """Start ``argv`` in a session of its own (Ctrl-C in a terminal must not stop it),
    output appended to ``log_path``, input from nothing; its pid."""
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        actions = [
            (os.POSIX_SPAWN_DUP2, null, 0),
            (os.POSIX_SPAWN_DUP2, log, 1),
            (os.POSIX_SPAWN_DUP2, log, 2),
        ]
        return os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True)
    finally:
        os.close(log)
        os.close(null)


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
                terminate(server_pid)
            return
        with os.fdopen(fd, "r+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            state = read_state(state_file)
            ours = state is not None and int(state.get("pid", -1)) == server_pid
            users = [p for p in state.get("users", []) if pid_alive(p)] if state and ours else []
            if users:
                continue
            if is_our_server(server_pid, data_dir):
                terminate(server_pid)
            if ours:
                state_file.unlink(missing_ok=True)
            return


if __name__ == "__main__":
    reap(Path(sys.argv[1]), int(sys.argv[2]))
