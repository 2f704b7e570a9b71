"""The embedded server's lifecycle: a second process on the same data dir joins the
running server instead of starting another; the last one out stops it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from retrieval.weaviate_server import EmbeddedServer, _pid_alive, endpoint_from_url, is_ready

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
            from retrieval.weaviate_server import EmbeddedServer
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
    assert not _pid_alive(state["pid"])
    assert not (tmp_path / "server.json").exists()


def test_endpoint_from_url() -> None:
    e = endpoint_from_url("https://abc.weaviate.cloud", "key")
    assert (e.host, e.port, e.grpc_port, e.secure, e.api_key) == (
        "abc.weaviate.cloud", 443, 443, True, "key",
    )  # fmt: skip
    local = endpoint_from_url("localhost:8080")
    assert (local.url, local.grpc_port) == ("http://localhost:8080", 50051)
