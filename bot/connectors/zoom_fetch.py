"""A Zoom recording's files downloaded by the job that ingests it: the webhook keeps the
event (``ZoomRecordings``, the ``zoom_recordings`` table, ``m008_zoom``) and queues a job
for ``zoom://SOURCE-ID/Topic.vtt`` (``url_of``); the worker's ``ZoomFetcher`` (a
``bot.write.Fetcher``, registered for ``zoom://``) downloads the audio (or video) and
Zoom's transcript with the event's download token (Zoom's documented bearer header, sent
to the event's host only; redirects followed by hand, each hop https on
``QUORUM_ZOOM_DOWNLOAD_HOSTS``),
each streamed to a file in a folder of the job's own under
``QUORUM_DATA_DIR/connectors/zoom``, bounded in size (``QUORUM_ZOOM_DOWNLOAD_MAX_MB``)
and time (``QUORUM_ZOOM_DOWNLOAD_TIMEOUT_S``, and ``..._STALL_S`` without a byte). A
sidecar beside them names the source (stable per meeting recording), its title, day and
host. The folder is removed when the job is done with it, whatever happened: the words
stay only in the store, the recording in the media store; the kept event goes once its
files are in, once they never will be (``Unfetchable``), when Zoom deletes the recording
(the job then gives up), or after two days (the token lasts one).

Every failure is one sentence: ``Unfetchable`` when no retry helps (an expired token, a
deleted recording, a file too large), ``FetchError`` for a cut connection or a stalled or
slow server (tried again by the job system).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import IO, Any
from urllib.parse import urljoin, urlsplit

import aiohttp

from bot.config import Settings
from bot.connectors import statuses_of
from bot.connectors.scratch import scratch_folder
from bot.connectors.zoom import NAME, File, Recording, allowed
from bot.errors import FetchError
from bot.sessions import Sessions
from bot.sessions.driver import Driver
from bot.write import Unfetchable
from retrieval.ingest.metadata import slug
from retrieval.models import Source

CHUNK = 1 << 20
CONNECT_S = 30.0
SCHEME = "zoom"  # a Zoom job's URL: zoom://SOURCE-ID/Topic.vtt
KEEP_S = 2 * 86_400.0  # a kept event whose job never took it: its token lasts 24 hours
SUFFIXES = {"M4A": ".m4a", "MP4": ".mp4", "TRANSCRIPT": ".vtt"}
WHAT = {"M4A": "audio", "MP4": "video", "TRANSCRIPT": "transcript"}
REDIRECTS = 5  # Zoom's download URL redirects to its storage: this many hops at most


def url_of(rec: Recording) -> str:
    """The URL a recording's job names: its source, and the file to add (the transcript,
    else the recording), under the meeting's topic so `quorum jobs` says which."""
    added = rec.transcript or rec.media
    assert added is not None  # ``zoom.recording`` refuses an event with neither
    return f"{SCHEME}://{rec.source_id}/{slug(rec.topic)[:80] or 'meeting'}{SUFFIXES[added.kind]}"


def _driver(sessions: Sessions) -> Driver:
    from bot.sessions.sql import SqlSessions

    if not isinstance(sessions, SqlSessions):
        raise TypeError("Zoom's events live in the SQL session store")
    return sessions.driver


class ZoomRecordings:
    """The Zoom events kept between the webhook and the job that downloads their files."""

    def __init__(self, sessions: Sessions) -> None:
        self.driver = _driver(sessions)

    async def keep(self, kb: str, rec: Recording) -> None:
        """Keep ``rec`` (a later delivery of the same recording replaces it: a fresher
        token); events older than two days go."""
        now = await self.sweep()
        await self.driver.execute(
            "INSERT INTO zoom_recordings (source_id, kb, event, received_at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (source_id) DO UPDATE SET kb = excluded.kb, event = excluded.event, "
            "received_at = excluded.received_at",
            rec.source_id,
            kb,
            rec.json(),
            now,
        )

    async def sweep(self) -> float:
        """Events older than two days go (their token lasted one); the time now."""
        now = time.time()
        await self.driver.execute("DELETE FROM zoom_recordings WHERE received_at < ?", now - KEEP_S)
        return now

    async def get(self, source_id: str) -> Recording | None:
        """The kept event of ``source_id``'s recording, or None."""
        rows = await self.driver.fetch(
            "SELECT event FROM zoom_recordings WHERE source_id = ?", source_id
        )
        return Recording.from_json(rows[0]["event"]) if rows else None

    async def drop(self, source_id: str) -> None:
        """The event is done with: its files are in, they never will be, or the recording
        was deleted in Zoom (its pending job then gives up)."""
        await self.driver.execute("DELETE FROM zoom_recordings WHERE source_id = ?", source_id)

    async def forget(self, kb: str, source: Source) -> None:
        """A ``ForgetHook``: a forgotten recording's kept event (its topic) goes too."""
        await self.driver.execute(
            "DELETE FROM zoom_recordings WHERE source_id = ? AND kb = ?", source.id, kb
        )


GONE = (
    "Zoom's event for this recording is no longer kept: the recording was deleted in Zoom, "
    "or its download token (it lasts 24 hours) expired; Zoom's Recordings page can send it again."
)


class ZoomFetcher:
    """Downloads the files a ``zoom://`` job names (a ``bot.write.Fetcher``)."""

    def __init__(self, settings: Settings, sessions: Sessions) -> None:
        self.recordings = ZoomRecordings(sessions)
        self.statuses = statuses_of(sessions)  # a failed download: Zoom's last error
        self.staging = settings.data_dir / "connectors" / "zoom"
        self.hosts = settings.zoom_download_hosts
        self.max_bytes = settings.zoom_download_max_mb * 1024 * 1024
        self.timeout = aiohttp.ClientTimeout(
            total=settings.zoom_download_timeout_s,
            sock_connect=CONNECT_S,
            sock_read=settings.zoom_download_stall_s,
        )

    @contextlib.asynccontextmanager
    async def __call__(self, url: str) -> AsyncIterator[Path]:
        """The recording's files downloaded, with their sidecar; the file to add (the
        transcript when Zoom made one, its recording beside it as the page's media)."""
        source_id = url.removeprefix(f"{SCHEME}://").partition("/")[0]
        await self.recordings.sweep()  # a job that never ran leaves its event behind
        rec = await self.recordings.get(source_id)
        if rec is None:
            raise Unfetchable(GONE)
        folder = await asyncio.to_thread(scratch_folder, self.staging, "job-")
        try:
            stem = folder / rec.source_id
            paths: dict[str, Path] = {}
            try:
                async with aiohttp.ClientSession(timeout=self.timeout) as http:
                    for f in (rec.transcript, rec.media):
                        if f is not None:
                            paths[f.kind] = stem.with_suffix(SUFFIXES[f.kind])
                            await self._download(http, f, paths[f.kind], rec.token)
                if await self.recordings.get(source_id) is None:  # deleted while downloading
                    raise Unfetchable(GONE)
            except (FetchError, Unfetchable) as exc:
                if isinstance(exc, Unfetchable):  # no retry will want the event
                    await self.recordings.drop(rec.source_id)
                await self.statuses.count(NAME, "failed")
                await self.statuses.error(NAME, f"{rec.topic}: {exc}")
                raise
            await asyncio.to_thread(_write_sidecar, stem, rec)
            yield paths.get("TRANSCRIPT") or next(iter(paths.values()))
            await self.recordings.drop(rec.source_id)
        finally:
            await asyncio.to_thread(shutil.rmtree, folder, True)

    async def _download(self, http: aiohttp.ClientSession, f: File, to: Path, token: str) -> None:
        """``f`` streamed to ``to`` with the download token; FetchError says why not."""
        what, done = WHAT[f.kind], 0
        mb = self.max_bytes // (1024 * 1024)
        try:
            async with self._get(http, f.url, token, what) as resp:
                if resp.status in (401, 403, 404, 410):
                    raise Unfetchable(
                        f"Zoom refused the {what} download (HTTP {resp.status}): its download "
                        "token has expired (it lasts 24 hours) or the recording was deleted."
                    )
                if resp.status >= 400:
                    raise FetchError(f"Zoom answered HTTP {resp.status} to the {what} download.")
                if (resp.content_length or 0) > self.max_bytes:
                    raise Unfetchable(
                        f"The {what} is larger than QUORUM_ZOOM_DOWNLOAD_MAX_MB ({mb} MB)."
                    )
                out = await asyncio.to_thread(to.open, "wb")
                try:
                    async for chunk in resp.content.iter_chunked(CHUNK):
                        done += len(chunk)
                        if done > self.max_bytes:
                            raise Unfetchable(
                                f"The {what} is larger than QUORUM_ZOOM_DOWNLOAD_MAX_MB ({mb} MB)."
                            )
                        await asyncio.to_thread(_write, out, chunk)
                finally:
                    await asyncio.to_thread(out.close)
        except TimeoutError:
            raise FetchError(
                f"The {what} download from Zoom stalled or ran out of time after "
                f"{_amount(done)} (QUORUM_ZOOM_DOWNLOAD_STALL_S, ..._TIMEOUT_S)."
            ) from None
        except aiohttp.ClientPayloadError:
            raise FetchError(
                f"The {what} download from Zoom was cut off after {_amount(done)}."
            ) from None
        except aiohttp.ClientError as exc:
            raise FetchError(f"Could not download the {what} from Zoom ({exc}).") from None

    @contextlib.asynccontextmanager
    async def _get(
        self, http: aiohttp.ClientSession, url: str, token: str, what: str
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """``url``'s answer, its redirects followed by hand: each hop on
        ``QUORUM_ZOOM_DOWNLOAD_HOSTS`` (https), the token sent to the first host only."""
        first = urlsplit(url).netloc
        for _ in range(REDIRECTS + 1):
            headers = {"Authorization": f"Bearer {token}"} if urlsplit(url).netloc == first else {}
            async with http.get(url, headers=headers, allow_redirects=False) as resp:
                if resp.status not in (301, 302, 303, 307, 308):
                    yield resp
                    return
                url = urljoin(url, resp.headers.get("Location", ""))
            if not allowed(url, self.hosts):
                raise Unfetchable(
                    f"Zoom redirected the {what} download to {urlsplit(url).netloc or url}, "
                    "which is not https on QUORUM_ZOOM_DOWNLOAD_HOSTS; refused."
                )
        raise Unfetchable(f"Zoom redirected the {what} download more than {REDIRECTS} times.")


def _amount(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} KB"


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
