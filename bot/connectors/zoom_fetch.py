"""A Zoom recording's files downloaded for its ``fetch`` job (``bot.jobs.runner``): the
audio (or video) and Zoom's transcript, with the event's download token (Zoom's
documented bearer header), each streamed to a file in a folder of the job's own under
``QUORUM_DATA_DIR/connectors/zoom``, bounded in size (``QUORUM_ZOOM_DOWNLOAD_MAX_MB``)
and time (``QUORUM_ZOOM_DOWNLOAD_TIMEOUT_S``, and ``..._STALL_S`` without a byte). A
sidecar beside them names the source (stable per meeting recording), its title, day and
host. The folder is removed when the job is done with it, whatever happened: the words
stay only in the store, the recording in the media store.

Every failure is one ``FetchError`` sentence: an expired token or a deleted recording (no
retry helps), a cut connection, a stalled or slow server (tried again by the job system).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any

import aiohttp

from bot.config import Settings
from bot.connectors.status import ConnectorStatuses
from bot.connectors.zoom import NAME, File, Recording
from bot.errors import FetchError
from bot.jobs.records import Job

CHUNK = 1 << 20
CONNECT_S = 30.0
SWEEP_S = 86_400.0  # a folder a killed worker left behind goes after a day
SUFFIXES = {"M4A": ".m4a", "MP4": ".mp4", "TRANSCRIPT": ".vtt"}
WHAT = {"M4A": "audio", "MP4": "video", "TRANSCRIPT": "transcript"}


class ZoomFetcher:
    """Downloads what a Zoom ``fetch`` job names (a ``bot.jobs.runner.Fetcher``)."""

    def __init__(self, settings: Settings, statuses: ConnectorStatuses | None = None) -> None:
        self.statuses = statuses  # a failed download is Zoom's last error, and counted
        self.staging = settings.data_dir / "connectors" / "zoom"
        self.max_bytes = settings.zoom_download_max_mb * 1024 * 1024
        self.timeout = aiohttp.ClientTimeout(
            total=settings.zoom_download_timeout_s,
            sock_connect=CONNECT_S,
            sock_read=settings.zoom_download_stall_s,
        )

    @contextlib.asynccontextmanager
    async def fetched(self, job: Job) -> AsyncIterator[Path]:
        """The recording's files downloaded, with their sidecar; the file to add (the
        transcript when Zoom made one, its recording beside it as the page's media)."""
        if not job.detail:
            raise FetchError("the job no longer says what to download; Zoom sends it again")
        try:
            rec = Recording.from_json(job.detail)
        except (ValueError, TypeError, KeyError):
            raise FetchError("the job's Zoom event could not be read", retry=False) from None
        folder = await asyncio.to_thread(self._folder)
        try:
            stem = folder / rec.source_id
            paths: dict[str, Path] = {}
            try:
                async with aiohttp.ClientSession(timeout=self.timeout) as http:
                    for f in (rec.transcript, rec.media):
                        if f is not None:
                            paths[f.kind] = stem.with_suffix(SUFFIXES[f.kind])
                            await self._download(http, f, paths[f.kind], rec.token)
            except FetchError as exc:
                if self.statuses is not None:
                    await self.statuses.count(NAME, "failed")
                    await self.statuses.error(NAME, f"{rec.topic}: {exc}.")
                raise
            await asyncio.to_thread(_write_sidecar, stem, rec)
            yield paths.get("TRANSCRIPT") or next(iter(paths.values()))
        finally:
            await asyncio.to_thread(shutil.rmtree, folder, True)

    def _folder(self) -> Path:
        self.staging.mkdir(parents=True, exist_ok=True)
        for old in self.staging.iterdir():
            with contextlib.suppress(OSError):
                if old.is_dir() and time.time() - old.stat().st_mtime > SWEEP_S:
                    shutil.rmtree(old, ignore_errors=True)
        return Path(tempfile.mkdtemp(prefix="job-", dir=self.staging))

    async def _download(self, http: aiohttp.ClientSession, f: File, to: Path, token: str) -> None:
        """``f`` streamed to ``to`` with the download token; FetchError says why not."""
        what, done = WHAT[f.kind], 0
        mb = self.max_bytes // (1024 * 1024)
        try:
            async with http.get(f.url, headers={"Authorization": f"Bearer {token}"}) as resp:
                if resp.status in (401, 403, 404, 410):
                    raise FetchError(
                        f"Zoom refused the {what} download (HTTP {resp.status}): its download "
                        "token has expired (it lasts 24 hours) or the recording was deleted",
                        retry=False,
                    )
                if resp.status >= 400:
                    raise FetchError(f"Zoom answered HTTP {resp.status} to the {what} download")
                if (resp.content_length or 0) > self.max_bytes:
                    raise FetchError(
                        f"the {what} is larger than QUORUM_ZOOM_DOWNLOAD_MAX_MB ({mb} MB)",
                        retry=False,
                    )
                out = await asyncio.to_thread(to.open, "wb")
                try:
                    async for chunk in resp.content.iter_chunked(CHUNK):
                        done += len(chunk)
                        if done > self.max_bytes:
                            raise FetchError(
                                f"the {what} is larger than QUORUM_ZOOM_DOWNLOAD_MAX_MB ({mb} MB)",
                                retry=False,
                            )
                        await asyncio.to_thread(_write, out, chunk)
                finally:
                    await asyncio.to_thread(out.close)
        except TimeoutError:
            raise FetchError(
                f"the {what} download from Zoom stalled or ran out of time after "
                f"{done / 1e6:.1f} MB (QUORUM_ZOOM_DOWNLOAD_STALL_S, ..._TIMEOUT_S)"
            ) from None
        except aiohttp.ClientPayloadError:
            raise FetchError(
                f"the {what} download from Zoom was cut off after {done / 1e6:.1f} MB"
            ) from None
        except aiohttp.ClientError as exc:
            raise FetchError(f"could not download the {what} from Zoom ({exc})") from None


def _write(out: IO[bytes], chunk: bytes) -> None:
    out.write(chunk)


def _write_sidecar(stem: Path, rec: Recording) -> None:
    """The source's metadata beside its files (``retrieval.ingest.metadata``): the same
    for every delivery of the recording, so a second one is the same source, unchanged."""
    meta: dict[str, Any] = {
        "id": rec.source_id,
        "title": rec.topic,
        "kind": "video" if rec.media is not None and rec.media.kind == "MP4" else "audio",
        "description": f"Zoom meeting hosted by {rec.host}" if rec.host else "Zoom meeting",
    }
    if rec.recorded_on is not None:
        meta["recorded_at"] = rec.recorded_on.isoformat()
    if rec.transcript is None and rec.host:
        meta["speakers"] = [rec.host]  # no transcript names anyone: the host held it
    stem.with_name(stem.name + ".meta.json").write_text(json.dumps(meta), encoding="utf-8")
