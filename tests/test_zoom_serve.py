"""Zoom against a real `quorum serve` process and the worker process it runs (the
production path: the job's download happens in `quorum worker`, which registers the
``zoom://`` fetcher itself): Zoom's row is in `quorum jobs` before any event, the
challenge is answered, a recording becomes a source, and SIGTERM stops it all cleanly."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.emulators.zoom import ZoomEmulator
from tests.test_connectors_serve import listed, until_listed
from tests.test_lifecycle import quorum_serve
from tests.test_zoom import HOST, LINES, SECRET, zoom_vtt


async def test_a_zoom_recording_reaches_serve_and_its_worker_and_becomes_a_source(
    weaviate_env: Endpoint, store: WeaviateStore, kb: str, tmp_path: Path
) -> None:
    env = {
        "QUORUM_ZOOM_SECRET_TOKEN": SECRET,
        "QUORUM_ZOOM_KB": kb,
        "QUORUM_ZOOM_DOWNLOAD_HOSTS": "127.0.0.1",
        "QUORUM_SERVE_WORKERS": "1",
    }
    vtt = zoom_vtt(LINES, tuple(4.0 * n for n in range(len(LINES))))
    async with ZoomEmulator(SECRET) as zoom, quorum_serve(env, tmp_path) as served:
        await served.ready()
        zoom.target = f"{served.http}/hooks/zoom"
        before = await listed(served.data_dir)
        [row] = [c for c in before["connectors"] if c["name"] == "zoom"]
        assert row["kb"] == kb and row["last_run"] is None  # there before its first event
        assert await zoom.validate()

        status, answer = await zoom.send(zoom.recording("Serve sync", HOST, vtt=vtt))
        assert status == 200 and answer["status"] == "queued"
        shown = await until_listed(
            served.data_dir,
            lambda s: any(j["id"] == answer["job"] and j["state"] == "done" for j in s["jobs"]),
        )
        [job] = [j for j in shown["jobs"] if j["id"] == answer["job"]]
        assert (job["file"], job["result"]) == ("serve-sync.vtt", "added")
        [row] = [c for c in shown["connectors"] if c["name"] == "zoom"]
        assert row["counts"]["seen"] == 1 and row["problems"] == []
        assert [i.source.title for i in await store.list_sources(kb)] == ["Serve sync"]
        served.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(served.proc.wait(), 60) == 0
