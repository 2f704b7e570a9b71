"""What a person sees in a terminal when something around Quorum breaks: real ``quorum``
processes (stdout and stderr as a terminal shows them), a Weaviate server frozen with
SIGSTOP, a session database that cannot be written, a Weaviate that is not there. Each
gets its sentence and the command ends normally: never a traceback, never an abort."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store import Store
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import EmbeddedServer, Endpoint, async_client
from retrieval.write.indexer import ingest

QUORUM = Path(sys.executable).parent / "quorum"
NOTES = "[00:00:05] Ana Ruiz: The grommet cache is flushed nightly by the ops team.\n"


def local_env(endpoint: Endpoint, data: Path, **extra: str) -> dict[str, str]:
    """``quorum`` pointed at ``endpoint`` in local mode, with its own data folder."""
    return {
        **os.environ,
        "QUORUM_WEAVIATE_MODE": "local",
        "QUORUM_WEAVIATE_URL": endpoint.url,
        "QUORUM_WEAVIATE_GRPC_PORT": str(endpoint.grpc_port),
        "QUORUM_DATA_DIR": str(data),
        "COLUMNS": "200",
        **extra,
    }


@contextlib.contextmanager
def unwritable(path: Path) -> Iterator[None]:
    """``path`` read-only even for root (immutable), or skip where that is not possible."""
    if os.geteuid() == 0:
        made = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
        if made.returncode != 0:
            pytest.skip("chattr +i is not available here")
        try:
            yield
        finally:
            subprocess.run(["chattr", "-i", str(path)], check=False)
    else:
        path.chmod(0o444)
        yield


async def test_ask_with_a_read_only_session_database_answers_without_a_traceback(
    weaviate_endpoint: Endpoint,
    store: Store,
    embedder: SentenceTransformerEmbedder,
    kb: str,
    tmp_path: Path,
) -> None:
    notes = tmp_path / "ops-sync.txt"
    notes.write_text(NOTES)
    await ingest(store, embedder, kb, [notes])
    data = tmp_path / "data"
    data.mkdir()
    async with SessionStore.open(data / "sessions.sqlite3"):
        pass  # made and migrated, as a first run leaves it
    with unwritable(data / "sessions.sqlite3"):
        done = await asyncio.to_thread(
            subprocess.run,
            [str(QUORUM), "ask", "When is the grommet cache flushed?", "--kb", kb],
            env=local_env(weaviate_endpoint, data),
            capture_output=True,
            text=True,
            timeout=180,
        )
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "nightly" in done.stdout
    assert "Traceback" not in said, said
    assert "The session database" in done.stderr and "cannot be used" in done.stderr


@contextlib.asynccontextmanager
async def own_server(tmp_path: Path) -> AsyncIterator[tuple[int, Endpoint]]:
    """A weaviate-server of the test's own (it will be frozen): its pid and endpoint."""
    server = EmbeddedServer(tmp_path / "server", startup_timeout=120)
    endpoint = await asyncio.to_thread(server.start)
    pid = int(json.loads((tmp_path / "server" / "server.json").read_text())["pid"])
    try:
        yield pid, endpoint
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
        await asyncio.to_thread(server.stop)


async def read_until(stream: asyncio.StreamReader, wanted: str, within_s: float) -> str:
    """What ``stream`` said up to and including ``wanted``."""
    seen = ""
    async with asyncio.timeout(within_s):
        while wanted not in seen:
            line = await stream.readline()
            if not line:
                break
            seen += line.decode()
    return seen


async def test_chat_with_weaviate_frozen_says_one_sentence_and_goes_on(
    embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    async with own_server(tmp_path) as (pid, endpoint):
        notes = tmp_path / "ops-sync.txt"
        notes.write_text(NOTES)
        async with WeaviateStore.connect(
            async_client(endpoint, timeout_s=10), endpoint.url
        ) as store:
            await ingest(store, embedder, "default", [notes])
        env = local_env(endpoint, tmp_path / "data", QUORUM_WEAVIATE_TIMEOUT_S="3")
        proc = await asyncio.create_subprocess_exec(
            str(QUORUM),
            "chat",
            env=env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdin and proc.stdout and proc.stderr
        try:
            proc.stdin.write(b"/help\n")
            await proc.stdin.drain()
            said = await read_until(proc.stdout, "/research", 180)  # up and reading
            os.kill(pid, signal.SIGSTOP)
            proc.stdin.write(b"When is the grommet cache flushed?\n")
            await proc.stdin.drain()
            said += await read_until(proc.stdout, "try again shortly", 120)
            proc.stdin.close()
            code = await asyncio.wait_for(proc.wait(), 120)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        said += (await proc.stdout.read()).decode() + (await proc.stderr.read()).decode()
    assert "I can't reach the archive right now" in said, said
    assert "Traceback" not in said, said
    assert code == 0, said


@pytest.mark.parametrize("command", [["search", "grommet cache"], ["ask", "What is flushed?"]])
def test_a_local_weaviate_that_is_not_there_is_one_sentence_and_a_normal_exit(
    tmp_path: Path, command: list[str]
) -> None:
    nowhere = Endpoint("127.0.0.1", 9, "127.0.0.1", 10)  # discard ports: nothing listens
    done = subprocess.run(
        [str(QUORUM), *command],
        env=local_env(nowhere, tmp_path / "data"),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 1, said  # not 134: no abort while the model was loading
    assert "Weaviate at http://127.0.0.1:9 is not reachable" in " ".join(said.split())
    assert "terminate called" not in said and "Traceback" not in said, said
