"""A one-shot command against the embedded server: the server starts booting before the
command has parsed its arguments, the command exits without waiting for Weaviate's
shutdown, and the server is gone moments later all the same (its reaper stops it), on a
machine whose PID 1 never reaps an orphan (a zombie server counts as stopped)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from retrieval.store.weaviate.reaper import pid_alive, spawn
from tests.test_weaviate_server import servers_of

REPO = Path(__file__).resolve().parent.parent


def _servers_of(data_dir: Path) -> list[int]:
    """Pids of running weaviate-servers of a Quorum data dir."""
    return servers_of(data_dir / "weaviate-server")


def _quorum(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")},
        "QUORUM_DATA_DIR": str(data_dir),
        "PYTHONPATH": str(REPO),
    }
    code = "import sys; from adapters.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _gone_within(data_dir: Path, seconds: float) -> bool:
    """Whether, within ``seconds``, no server runs on ``data_dir`` and its ``server.json``
    is gone (the reaper removes it just after the server has exited)."""
    state = data_dir / "weaviate-server" / "server.json"
    deadline = time.monotonic() + seconds
    while (_servers_of(data_dir) or state.exists()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _servers_of(data_dir) and not state.exists()


def test_a_one_shot_leaves_no_server_behind_and_the_next_one_works(tmp_path: Path) -> None:
    first = _quorum(tmp_path, "search", "what did we decide", "--kb", "team")
    assert first.returncode == 0, first.stderr
    assert "Nothing found" in first.stdout, first.stdout + first.stderr
    assert "Traceback" not in first.stderr, first.stderr
    assert "ResourceWarning" not in first.stderr, first.stderr
    # Whether or not a second command found it still up, none outlives the commands.
    second = _quorum(tmp_path, "sources", "--kb", "team")
    assert second.returncode == 0, second.stderr
    assert _gone_within(tmp_path, 15), f"a server outlived the commands: {_servers_of(tmp_path)}"


def test_a_command_that_fails_before_opening_the_store_leaves_no_server(
    tmp_path: Path,
) -> None:
    """The server booted ahead of the arguments' check is stopped when the check fails."""
    done = _quorum(tmp_path, "search", "   ", "--kb", "team")
    assert done.returncode == 1
    assert "The query is empty" in done.stderr
    assert "Traceback" not in done.stderr
    assert (tmp_path / "weaviate-server" / "weaviate.log").exists()  # it had started booting
    assert _gone_within(tmp_path, 15), "a server booted for a failed command was left"


def test_help_boots_no_server(tmp_path: Path) -> None:
    done = _quorum(tmp_path, "search", "--help")
    assert done.returncode == 0
    assert not (tmp_path / "weaviate-server").exists()


def test_a_zombie_is_not_a_running_server(tmp_path: Path) -> None:
    """An exited child nobody has reaped yet (what PID 1 leaves of an orphaned server when
    it is no init) reads as stopped, so no one waits on it."""
    pid = spawn(["/bin/true"], {}, tmp_path / "log")
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child never exited"
        time.sleep(0.01)
    assert not pid_alive(pid)
    os.waitpid(pid, 0)
    assert not pid_alive(pid)
