"""A local emulator of Zoom for tests: its webhook sender and its cloud recording
download endpoints.

The sender posts events to ``target`` (Quorum's ``/hooks/zoom``) as Zoom does: the raw
JSON body, ``x-zm-request-timestamp`` (seconds) and ``x-zm-signature`` (``v0=`` and the
hex HMAC-SHA256 of ``v0:{timestamp}:{body}`` keyed with the app's Secret Token), and
checks the ``endpoint.url_validation`` answer as Zoom does (``encryptedToken`` is the hex
HMAC-SHA256 of ``plainToken``).

Downloads are checked as Zoom checks them: ``GET /rec/download/{file}`` needs the event's
download token, as ``Authorization: Bearer`` or ``?access_token=`` (401 without it or
with another meeting's); an expired token is a 404. A file may be served ``slow`` (a
first block, then nothing for ``stall_s``) or ``cut`` (a Content-Length, half the bytes,
then the connection closed), held (nothing until ``release`` is set), or redirected
(``redirects``: a file's ``Location``, as Zoom sends its storage's). Every download is
recorded.

    async with ZoomEmulator(SECRET) as zoom:
        zoom.target = f"{quorum}/hooks/zoom"
        event = zoom.recording("Weekly sync", "alice@example.com", m4a=..., vtt=...)
        status, body = await zoom.send(event)
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import time
import uuid as uuids
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

Mode = str  # "ok", "slow", "cut" or "held"


@dataclass
class Served:
    """One recording file Zoom holds."""

    data: bytes
    token: str
    mode: Mode = "ok"


@dataclass
class Download:
    """One download request, as the emulator saw it."""

    file: str
    status: int
    how: str  # "bearer", "query" or "none"


@dataclass
class ZoomEmulator:
    """Zoom's webhook sender and download server."""

    secret: str
    target: str = ""
    stall_s: float = 5.0
    files: dict[str, Served] = field(default_factory=dict)
    expired: set[str] = field(default_factory=set)
    downloads: list[Download] = field(default_factory=list)
    redirects: dict[str, str] = field(default_factory=dict)  # file id -> Location
    release: asyncio.Event = field(default_factory=asyncio.Event)  # "held" files wait for it
    _runner: web.AppRunner | None = None
    url: str = ""

    async def __aenter__(self) -> ZoomEmulator:
        app = web.Application()
        app.router.add_get("/rec/download/{file}", self._download)
        self._runner = web.AppRunner(app, shutdown_timeout=0.5, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    # ------------------------------------------------------------ downloads

    async def _download(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["file"]
        auth = request.headers.get("Authorization", "")
        token, how = (auth[7:], "bearer") if auth.startswith("Bearer ") else ("", "none")
        if not token and request.query.get("access_token"):
            token, how = request.query["access_token"], "query"
        served = self.files.get(name)
        if name in self.redirects:
            self.downloads.append(Download(name, 302, how))
            raise web.HTTPFound(self.redirects[name])
        status = 200
        if not token or served is None or not hmac.compare_digest(token, served.token):
            status = 401 if served is not None or not token else 404
        elif token in self.expired:
            status = 404
        self.downloads.append(Download(name, status, how))
        if status == 401:
            return web.json_response({"code": 124, "message": "Invalid access token."}, status=401)
        if status == 404:
            return web.json_response(
                {"code": 3301, "message": "This recording does not exist."}, status=404
            )
        assert served is not None
        if served.mode == "held":
            await self.release.wait()
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        resp.content_length = len(served.data)
        await resp.prepare(request)
        half = len(served.data) // 2
        if served.mode == "slow":
            await resp.write(served.data[:half])
            await asyncio.sleep(self.stall_s)
        elif served.mode == "cut":
            await resp.write(served.data[:half])
            assert request.transport is not None
            request.transport.close()
            return resp
        await resp.write(served.data[half:] if served.mode == "slow" else served.data)
        await resp.write_eof()
        return resp

    # ------------------------------------------------------------ events

    def recording(
        self,
        topic: str,
        host: str,
        *,
        m4a: bytes | None = None,
        mp4: bytes | None = None,
        vtt: bytes | None = None,
        mode: Mode = "ok",
        meeting_uuid: str | None = None,
        start: str = "2026-11-20T15:00:00Z",
    ) -> dict[str, Any]:
        """A ``recording.completed`` event of a new meeting whose files Zoom now serves
        (each in ``mode``), with its download token, as Zoom sends it."""
        meeting_uuid = meeting_uuid or _zoom_uuid()
        token = secrets.token_urlsafe(24)
        files = []
        for kind, data, rtype in (
            ("MP4", mp4, "shared_screen_with_speaker_view"),
            ("M4A", m4a, "audio_only"),
            ("TRANSCRIPT", vtt, "audio_transcript"),
        ):
            if data is None:
                continue
            fid = uuids.uuid4().hex
            self.files[fid] = Served(data, token, mode)
            files.append(
                {
                    "id": fid,
                    "meeting_id": meeting_uuid,
                    "recording_start": start,
                    "recording_end": start,
                    "file_type": kind,
                    "file_extension": "VTT" if kind == "TRANSCRIPT" else kind,
                    "file_size": len(data),
                    "play_url": f"{self.url}/rec/play/{fid}",
                    "download_url": f"{self.url}/rec/download/{fid}",
                    "status": "completed",
                    "recording_type": rtype,
                }
            )
        return {
            "event": "recording.completed",
            "event_ts": int(time.time() * 1000),
            "payload": {
                "account_id": "AAAAAABBBB",
                "object": {
                    "id": 81234567890,
                    "uuid": meeting_uuid,
                    "host_id": "z8yAAAAA8bbbQ",
                    "host_email": host,
                    "topic": topic,
                    "type": 2,
                    "start_time": start,
                    "timezone": "UTC",
                    "duration": 5,
                    "total_size": sum(f["file_size"] for f in files),
                    "recording_count": len(files),
                    "share_url": f"{self.url}/rec/share/x",
                    "recording_files": files,
                },
            },
            "download_token": token,
        }

    def deleted(
        self, completed: dict[str, Any], event: str = "recording.deleted"
    ) -> dict[str, Any]:
        """The ``recording.deleted`` (or ``trashed``) event of a recording sent before."""
        obj = completed["payload"]["object"]
        return {
            "event": event,
            "event_ts": int(time.time() * 1000),
            "payload": {
                "account_id": "AAAAAABBBB",
                "operator": obj["host_email"],
                "object": {k: obj[k] for k in ("uuid", "id", "host_id", "host_email", "topic")},
            },
        }

    def expire(self, event: dict[str, Any]) -> None:
        """The event's download token has expired (24 hours have passed)."""
        self.expired.add(event["download_token"])

    def sign(self, body: bytes, timestamp: str, secret: str | None = None) -> str:
        """``x-zm-signature`` as Zoom computes it."""
        key = (secret or self.secret).encode()
        message = b"v0:" + timestamp.encode() + b":" + body
        return "v0=" + hmac.new(key, message, hashlib.sha256).hexdigest()

    async def send(
        self,
        event: dict[str, Any],
        *,
        secret: str | None = None,
        at: float | None = None,
        signature: str | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """POST ``event`` to ``target`` as Zoom does (signed with ``secret``, at time
        ``at``); the status and the JSON answer."""
        body = json.dumps(event, separators=(",", ":")).encode()
        timestamp = str(int(at if at is not None else time.time()))
        headers = {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": "Zoom Marketplace/1.0a",
            "x-zm-request-timestamp": timestamp,
            "x-zm-signature": self.sign(body, timestamp, secret)
            if signature is None
            else signature,
        }
        async with aiohttp.ClientSession() as http:
            async with http.post(self.target, data=body, headers=headers) as resp:
                try:
                    answer = await resp.json(content_type=None)
                except (ValueError, aiohttp.ContentTypeError):
                    answer = {}
                return resp.status, answer if isinstance(answer, dict) else {}

    async def validate(self) -> bool:
        """Zoom's ``endpoint.url_validation``: True when the endpoint answers it right."""
        plain = secrets.token_urlsafe(16)
        status, answer = await self.send(
            {
                "event": "endpoint.url_validation",
                "event_ts": int(time.time() * 1000),
                "payload": {"plainToken": plain},
            }
        )
        want = hmac.new(self.secret.encode(), plain.encode(), hashlib.sha256).hexdigest()
        return status == 200 and answer == {"plainToken": plain, "encryptedToken": want}


def _zoom_uuid() -> str:
    """A meeting instance's uuid as Zoom spells it (base64: may hold ``/`` and ``+``)."""
    import base64

    return base64.b64encode(b"/+" + secrets.token_bytes(14)).decode()
