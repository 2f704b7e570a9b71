"""``quorum ask`` beside a frozen Weaviate (its server stopped with SIGSTOP: connections
are accepted, nothing is ever answered) says so in one sentence within seconds, instead
of waiting three minutes: its own embedded server named with how to get a fresh one, a
server reached by URL named with what to check."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from retrieval.store.weaviate.server import (
    JOIN_TIMEOUT_S,
    EmbeddedServer,
    Endpoint,
    find_binary,
)
from retrieval.store.weaviate.settings import DATA_DIR_NAMES

QUORUM = Path(sys.executable).parent / "quorum"


@pytest.fixture
def frozen(tmp_path: Path) -> Iterator[tuple[Path, int, Endpoint]]:
    """A data dir whose embedded server is running but stopped (SIGSTOP)."""
    data = tmp_path / "data"
    binary = find_binary(os.environ.get("QUORUM_WEAVIATE_BINARY"))
    assert binary is not None, "weaviate-server not found: run `make install` first."
    server = EmbeddedServer(data / DATA_DIR_NAMES[0], binary)
    endpoint = server.start()
    pid = server._pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        yield data, pid, endpoint
    finally:
        os.kill(pid, signal.SIGCONT)
        server.stop()


def ask(data: Path, **env: str) -> str:
    done = subprocess.run(
        [str(QUORUM), "ask", "Why did we move off Auth0?"],
        env={**os.environ, "QUORUM_DATA_DIR": str(data), "COLUMNS": "1000", **env},
        capture_output=True,
        text=True,
        timeout=JOIN_TIMEOUT_S + 50,  # a bound, not a speed: it took three minutes
    )
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "Traceback" not in said and len(said.strip().splitlines()) == 1, said
    return said


def test_ask_beside_its_frozen_embedded_store_says_so_within_seconds(
    frozen: tuple[Path, int, Endpoint],
) -> None:
    data, pid, _ = frozen
    said = ask(data)
    assert f"(pid {pid}," in said and "has not answered" in said and f"kill {pid}" in said


def test_ask_beside_a_frozen_store_by_url_says_so_within_seconds(
    frozen: tuple[Path, int, Endpoint],
) -> None:
    data, _, endpoint = frozen
    said = ask(
        data,
        QUORUM_WEAVIATE_MODE="local",
        QUORUM_WEAVIATE_URL=endpoint.url,
        QUORUM_WEAVIATE_GRPC_PORT=str(endpoint.grpc_port),
    )
    assert f"Weaviate at {endpoint.url} accepts connections but has not answered" in said
