"""Zoom cloud recordings, in Quorum's terms: a webhook's signature and its replay window,
the ``endpoint.url_validation`` challenge, and a ``recording.completed`` event read into a
``Recording`` (which files to download, the source it becomes, which knowledge base).

Zoom signs each request: ``x-zm-signature`` is ``v0=`` and the hex HMAC-SHA256, keyed
with the app's Secret Token, of ``v0:{x-zm-request-timestamp}:{raw body}``. The
challenge's answer is itself an HMAC with that secret, so it is given only to a request
that is signed too (otherwise anyone could have Quorum sign a body of their choosing).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime
from typing import Any
from urllib.parse import urlsplit

from bot.config import Settings
from retrieval.errors import ConfigError

NAME = "zoom"  # its status row (``bot.connectors.status``)
REPLAY_S = 300  # Zoom's own advice: refuse a request whose timestamp is 5 minutes off
COMPLETED = "recording.completed"
DELETED = ("recording.deleted", "recording.trashed")
VALIDATION = "endpoint.url_validation"
# What is downloaded: the audio only when Zoom made it (smaller), else the video; Zoom's
# transcript (WebVTT with "Name: text" cues) when it made one.
MEDIA_TYPES = ("M4A", "MP4")
TRANSCRIPT = "TRANSCRIPT"


class BadEvent(ValueError):
    """A signed event Quorum cannot read: one sentence for the 400."""


def signature(secret: str, timestamp: str, body: bytes) -> str:
    """The ``x-zm-signature`` Zoom sends with ``body`` at ``timestamp``."""
    message = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def refusal(
    secret: str, timestamp: str | None, sig: str | None, body: bytes, now: float
) -> str | None:
    """Why a webhook request is not Zoom's (one sentence), or None when it is: signed
    with ``secret`` (compared in constant time) within ``REPLAY_S`` of ``now``."""
    if not timestamp or not sig:
        return "The request is not signed (x-zm-signature and x-zm-request-timestamp)."
    try:
        sent = int(timestamp)
    except ValueError:
        return "x-zm-request-timestamp is not a number of seconds."
    # A header byte past ASCII (aiohttp keeps it as a surrogate) matches no HMAC in hex.
    if not sig.isascii() or not hmac.compare_digest(
        signature(secret, timestamp, body).encode(), sig.encode()
    ):
        return "The signature does not match QUORUM_ZOOM_SECRET_TOKEN."
    if abs(now - sent) > REPLAY_S:
        return "The request is more than 5 minutes old (or from the future); refused as a replay."
    return None


def challenge(secret: str, event: dict[str, Any]) -> dict[str, str]:
    """The answer to ``endpoint.url_validation``: the plain token and its HMAC."""
    plain = (event.get("payload") or {}).get("plainToken")
    if not isinstance(plain, str) or not plain or len(plain) > 256:
        raise BadEvent("endpoint.url_validation has no payload.plainToken.")
    encrypted = hmac.new(secret.encode(), plain.encode(), hashlib.sha256).hexdigest()
    return {"plainToken": plain, "encryptedToken": encrypted}


def source_id(uuid: str) -> str:
    """The source a meeting's recording becomes: the same for every delivery of it (a
    Zoom uuid may hold ``/`` and ``+``, which a source id may not)."""
    return "zoom-" + hashlib.sha256(uuid.encode()).hexdigest()[:20]


@dataclass(frozen=True)
class File:
    """One file of a recording to download."""

    kind: str  # M4A, MP4 or TRANSCRIPT
    url: str
    size: int | None


@dataclass(frozen=True)
class Recording:
    """What a ``recording.completed`` event says of one meeting's recording."""

    uuid: str
    topic: str
    start: str | None  # ISO time, as Zoom sends it
    host: str  # the host's email
    token: str  # the event's download_token (valid 24 hours)
    media: File | None
    transcript: File | None

    @property
    def source_id(self) -> str:
        """The source this recording becomes."""
        return source_id(self.uuid)

    @property
    def digest(self) -> str:
        """What this recording's files are (one job at a time for the same ones)."""
        files = [f.url for f in (self.media, self.transcript) if f is not None]
        return hashlib.sha256("\0".join([self.uuid, *files]).encode()).hexdigest()

    @property
    def recorded_on(self) -> date | None:
        """The meeting's day."""
        try:
            return datetime.fromisoformat((self.start or "").replace("Z", "+00:00")).date()
        except ValueError:
            return None

    def json(self) -> str:
        """Kept with its job until the download is done (``from_json``)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Recording:
        """A recording as ``json`` kept it."""
        raw = json.loads(text)
        files = {k: File(**raw[k]) if raw.get(k) else None for k in ("media", "transcript")}
        return cls(**{**raw, **files})


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def allowed(url: str, hosts: Sequence[str]) -> bool:
    """True when ``url`` is on one of ``hosts`` or a subdomain of one, over https (plain
    http only to a loopback address: the download token never travels in clear)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    secure = parts.scheme == "https" or (parts.scheme == "http" and _loopback(host))
    return secure and any(host == h.lower() or host.endswith("." + h.lower()) for h in hosts)


def _file(found: list[dict[str, Any]], kind: str, hosts: Sequence[str]) -> File | None:
    for f in found:
        url = f.get("download_url")
        if f.get("file_type") != kind or not isinstance(url, str):
            continue
        if not allowed(url, hosts):
            # Signed, yet naming another host: a leaked secret must not make Quorum
            # fetch (and index) whatever an attacker points it at.
            raise BadEvent(f"{kind}'s download URL is not on QUORUM_ZOOM_DOWNLOAD_HOSTS; refused.")
        if f.get("status", "completed") == "completed":
            size = f.get("file_size")
            return File(kind, url, size if isinstance(size, int) else None)
    return None


def meeting(event: dict[str, Any]) -> dict[str, Any]:
    """The event's ``payload.object`` (the meeting), or BadEvent."""
    obj = (event.get("payload") or {}).get("object")
    if not isinstance(obj, dict) or not isinstance(obj.get("uuid"), str) or not obj["uuid"]:
        raise BadEvent(f"{event.get('event')} has no payload.object.uuid.")
    return obj


def recording(event: dict[str, Any], hosts: Sequence[str]) -> Recording:
    """A ``recording.completed`` event read (its files on ``hosts``); BadEvent says what
    it lacks."""
    obj = meeting(event)
    token = event.get("download_token")
    if not isinstance(token, str) or not token:
        raise BadEvent("recording.completed has no download_token (subscribe to it with one).")
    files = [f for f in obj.get("recording_files") or [] if isinstance(f, dict)]
    media = next((m for kind in MEDIA_TYPES if (m := _file(files, kind, hosts))), None)
    transcript = _file(files, TRANSCRIPT, hosts)
    if media is None and transcript is None:
        raise BadEvent("recording.completed lists no audio, video or transcript to download.")
    topic = obj.get("topic")
    return Recording(
        uuid=obj["uuid"],
        topic=topic.strip()[:200] if isinstance(topic, str) and topic.strip() else "Zoom meeting",
        start=obj.get("start_time") if isinstance(obj.get("start_time"), str) else None,
        host=str(obj.get("host_email") or ""),
        token=token,
        media=media,
        transcript=transcript,
    )


def host_kbs(value: str | None) -> dict[str, str]:
    """``QUORUM_ZOOM_KBS`` (``host-email:kb,...``) as a mapping; a ConfigError names a
    malformed pair."""
    found: dict[str, str] = {}
    for raw in (value or "").split(","):
        if not raw.strip():
            continue
        host, _, kb = raw.strip().rpartition(":")
        if "@" not in host or not kb.strip():
            raise ConfigError(
                f"QUORUM_ZOOM_KBS: {raw.strip()!r} is not host-email:kb "
                "(comma-separated for several)."
            )
        found[host.strip().lower()] = kb.strip()
    return found


def kb_of(settings: Settings, host: str) -> str:
    """The knowledge base a recording hosted by ``host`` goes to."""
    return host_kbs(settings.zoom_kbs).get(host.lower()) or settings.zoom_kb or settings.default_kb
