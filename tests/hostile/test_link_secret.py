"""The link secret kept in the data folder: an empty or short one (a crash between
creating and writing it) stops ``quorum serve`` with one sentence instead of a server
whose every page and search fails while ``/readyz`` says ready; a new one is written
whole (temporary file, fsync, link into place), so processes starting together all read
the same full secret."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from retrieval.errors import ConfigError
from retrieval.links.share import SECRET_FILE, load_secret
from retrieval.store.weaviate.server import Endpoint
from tests.test_lifecycle import quorum_serve


@pytest.mark.parametrize("kept", [b"", b"\n", b"0123456789"])
async def test_serve_refuses_to_start_on_an_empty_or_short_secret(
    weaviate_env: Endpoint, tmp_path: Path, kept: bytes
) -> None:
    data = tmp_path / "served"
    data.mkdir()
    (data / SECRET_FILE).write_bytes(kept)
    async with quorum_serve({"COLUMNS": "1000"}, tmp_path) as served:
        code = await asyncio.wait_for(served.proc.wait(), 60)
    log = (tmp_path / "serve.log").read_text()
    assert code == 1, log
    assert f"The link secret {data / SECRET_FILE} is" in log and "delete it" in log, log
    assert "Traceback" not in log and len(log.strip().splitlines()) == 1, log


@pytest.mark.parametrize("kept", [b"", b"\n"])
def test_ask_says_one_sentence_on_an_empty_secret(
    weaviate_env: Endpoint, tmp_path: Path, kept: bytes
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / SECRET_FILE).write_bytes(kept)
    env = {
        **os.environ,
        "QUORUM_DATA_DIR": str(data),
        "QUORUM_PUBLIC_URL": "http://127.0.0.1:9",
        "COLUMNS": "1000",
    }
    done = subprocess.run(
        [str(Path(sys.executable).parent / "quorum"), "ask", "What was decided?"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert f"The link secret {data / SECRET_FILE} is empty; delete it" in said, said
    assert "went wrong" not in said and "Traceback" not in said, said
    assert len(said.strip().splitlines()) == 1, said


def test_a_kept_secret_that_is_too_short_is_never_used(tmp_path: Path) -> None:
    (tmp_path / SECRET_FILE).write_bytes(b"")
    with pytest.raises(ConfigError, match="is empty; delete it"):
        load_secret(tmp_path)
    (tmp_path / SECRET_FILE).write_bytes(b"abc")
    with pytest.raises(ConfigError, match="is too short; delete it"):
        load_secret(tmp_path)


MAKE = (
    "import sys; from pathlib import Path; from retrieval.links.share import load_secret; "
    "print(load_secret(Path(sys.argv[1])).decode())"
)


def test_processes_starting_together_read_one_whole_secret(tmp_path: Path) -> None:
    for round_ in range(3):
        data = tmp_path / f"data{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", MAKE, str(data)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(6)
        ]
        seen = [p.communicate(timeout=60) for p in procs]
        assert all(p.returncode == 0 for p in procs), seen
        secrets_read = {out.strip() for out, _ in seen}
        assert len(secrets_read) == 1 and len(secrets_read.pop()) == 64, seen
        assert [p.name for p in data.iterdir()] == [SECRET_FILE]  # no temporary file left
