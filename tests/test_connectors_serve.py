"""A watched folder in a real `quorum serve` process: a file dropped in becomes a source
without anyone running a command, once, and serve stops cleanly (SIGTERM); a bad setting
stops start-up with one line. (Restarts are tested in test_watch_folder.py, with the
connectors run in-process exactly as serve runs them: a serve start costs seconds.)"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.test_lifecycle import QUORUM, START_TIMEOUT_S, quorum_serve

CALL = (
    "WEBVTT\n\n00:00:01.000 --> 00:00:04.000\n<v Ana>The quibbler backups run at midnight.\n\n"
    "00:00:05.000 --> 00:00:09.000\n<v Ben>Ingrid migrates the zorbatron cluster next week.\n"
)


async def listed(data_dir: Path) -> dict[str, Any]:
    """``quorum jobs --json --connectors``, as an operator reads it."""
    proc = await asyncio.create_subprocess_exec(
        str(QUORUM),
        "jobs",
        "--json",
        "--connectors",
        env={"QUORUM_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    shown: dict[str, Any] = json.loads(out)
    return shown


async def until_listed(data_dir: Path, ok: Any, within_s: float = START_TIMEOUT_S) -> Any:
    async with asyncio.timeout(within_s):
        while True:
            if (shown := await listed(data_dir)) and ok(shown):
                return shown
            await asyncio.sleep(0.5)


async def test_a_bad_watch_setting_stops_serve_with_one_line(tmp_path: Path) -> None:
    env = {"QUORUM_WATCH": "recordings=team", "COLUMNS": "200"}
    async with quorum_serve(env, tmp_path) as served:
        code = await asyncio.wait_for(served.proc.wait(), 60)
    log = (tmp_path / "serve.log").read_text()
    assert code == 1, log
    assert "QUORUM_WATCH: " in log and "is not an absolute folder path" in log, log
    assert "Traceback" not in log and len(log.strip().splitlines()) == 1, log


async def test_a_file_dropped_in_a_watched_folder_is_ingested_by_serve_once(
    weaviate_env: Endpoint, store: WeaviateStore, kb: str, tmp_path: Path
) -> None:
    folder = tmp_path / "recordings"
    folder.mkdir()
    env = {
        "QUORUM_WATCH": f"{folder}={kb}",
        "QUORUM_WATCH_POLL_S": "0.2",
        # Serve runs the jobs itself (SQLite, no worker process): the worker path is the
        # same job as `quorum ingest`'s, tested in test_jobs.py; this keeps the test quick.
        "QUORUM_SERVE_WORKERS": "0",
    }
    async with quorum_serve(env, tmp_path) as served:
        (folder / "backups.vtt").write_text(CALL)
        shown = await until_listed(
            served.data_dir, lambda s: s["jobs"] and s["jobs"][0]["state"] == "done"
        )
        [job] = shown["jobs"]
        assert (job["file"], job["result"]) == ("backups.vtt", "added")
        [connector] = shown["connectors"]
        assert connector["name"] == f"folder:{folder}" and connector["problems"] == []
        assert [i.source.id for i in await store.list_sources(kb)] == ["backups"]
        await asyncio.sleep(1.0)  # several more polls
        shown = await listed(served.data_dir)
        assert [j["id"] for j in shown["jobs"]] == [job["id"]]  # once
        assert shown["connectors"][0]["counts"] == {
            "seen": 1,
            "queued": 1,
            "failed": 0,
            "forgotten": 0,
        }
        served.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(served.proc.wait(), 60) == 0
