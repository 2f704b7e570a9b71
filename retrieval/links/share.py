"""Share links: signed URLs of Quorum's own pages for one source of one knowledge base.

A link is a capability, like "anyone with the link" in meeting tools. Its token names a
knowledge base, a source and an expiry, signed with HMAC-SHA256 under a secret that
never leaves the server (``QUORUM_LINK_SECRET``, else a random one kept in the data
folder). Editing any part breaks the signature, so a link reaches its one source and
nothing else; it stops working when it expires, when the source is removed (the page
then says 404), or when the secret changes (every link at once).

    {public_url}/v/{token}          the page (a recording's player and transcript, a document)
    {public_url}/v/{token}/media    the recording's media (HTTP Range)
    {public_url}/v/{token}/file     the document itself (a PDF, inline)

An *admin* link (``admin_page``: a day at most) is the same page with one more word
signed into its token: its holder may also rename the recording's speakers there (a
small form whose posts carry ``form_key(token)``, a second signature no other page can
read). A plain link never grants that, and cannot be edited into one.

Where in the source a link opens rides in the fragment, never signed and never sent to
the server: ``#t=734`` (a second), ``#page=5``, ``#u=12`` (a passage by position).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import math
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from retrieval.errors import ConfigError

SECRET_FILE = "link-secret"
_CONTEXT = b"quorum-link-v1\n"
_SIG_BYTES = 20  # 160 bits: far beyond guessing, and a shorter URL than the full 256
_ROUND_S = 3600  # expiries round up to the hour, so one hour's answers share their links
ADMIN = "admin"  # the scope an admin link's token carries
ADMIN_TTL_S = 86400.0
_FORM = b"quorum-form-v1\n"


@dataclass(frozen=True)
class Grant:
    """What a valid token grants: one source of one knowledge base, until ``expires``."""

    kb: str
    source_id: str
    expires: int  # unix seconds
    admin: bool = False  # may rename the source's speakers (``LinkSigner.admin_page``)


class BadLink(Exception):
    """A token that is malformed, tampered with or expired; ``expired`` says which."""

    def __init__(self, expired: bool = False) -> None:
        super().__init__("expired" if expired else "invalid")
        self.expired = expired


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


MIN_SECRET = 16  # characters: QUORUM_LINK_SECRET's floor, and the kept file's


def load_secret(data_dir: Path, given: str | None = None) -> bytes:
    """``given`` (``QUORUM_LINK_SECRET``), else the data folder's secret, made on first
    use (readable by its owner only). A kept secret that is empty or short (a crash
    while an older Quorum wrote it) is refused with how to fix it, never used: every
    link would be signed with it."""
    if given is not None:
        if len(given) < MIN_SECRET:
            raise ConfigError(f"QUORUM_LINK_SECRET must be at least {MIN_SECRET} characters long.")
        return given.encode()
    path = data_dir / SECRET_FILE
    try:
        secret = _read_or_make(path)
    except OSError as exc:  # the data folder is a file, unwritable, ...
        raise ConfigError(
            f"The link secret {path} cannot be used ({exc.strerror or exc}); point "
            "QUORUM_DATA_DIR at a writable folder, or set QUORUM_LINK_SECRET."
        ) from exc
    if len(secret) < MIN_SECRET:
        raise ConfigError(
            f"The link secret {path} is {'empty' if not secret else 'too short'}; delete "
            "it so Quorum makes a new one (links already shared stop working), or set "
            "QUORUM_LINK_SECRET."
        )
    return secret


def _read_or_make(path: Path) -> bytes:
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    made = secrets.token_hex(32).encode()
    # Written whole under a temporary name, flushed to disk, then linked into place: a
    # crash leaves no secret or the whole one, never an empty file (and os.link, unlike a
    # rename, fails when another process made its secret first: theirs is used).
    part = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(made)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(part, path)
        except FileExistsError:
            return path.read_bytes().strip()
        except OSError:  # a file system without hard links: replaced whole all the same
            os.replace(part, path)
        _sync_dir(path.parent)
    finally:
        part.unlink(missing_ok=True)
    return made


def _sync_dir(folder: Path) -> None:
    """Make a new name in ``folder`` durable (the directory's entry, not only the data)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LinkSigner:
    """Signs and checks page links for one public address."""

    def __init__(
        self, secret: bytes | Callable[[], bytes], public_url: str, ttl_days: float = 30.0
    ) -> None:
        # A loader is called on first use: a command that signs no link never touches it.
        self._secret = secret if isinstance(secret, bytes) else None
        self._load = secret if not isinstance(secret, bytes) else None
        self.public_url = public_url.rstrip("/")
        self.ttl_s = ttl_days * 86400

    def _key(self) -> bytes:
        if self._secret is None:
            assert self._load is not None
            self._secret = self._load()
        if not self._secret:
            raise ConfigError("The link secret is empty; set QUORUM_LINK_SECRET.")
        return self._secret

    def _sign(self, payload: bytes) -> bytes:
        return hmac.new(self._key(), _CONTEXT + payload, hashlib.sha256).digest()[:_SIG_BYTES]

    def token(
        self,
        kb: str,
        source_id: str,
        now: float | None = None,
        ttl_s: float | None = None,
        admin: bool = False,
    ) -> str:
        """A fresh token for ``source_id`` in ``kb``, valid for the configured days (or
        ``ttl_s`` seconds, never longer); ``admin`` signs the admin scope into it."""
        now = time.time() if now is None else now
        ttl = self.ttl_s if ttl_s is None else min(ttl_s, self.ttl_s)
        expires = int(math.ceil((now + ttl) / _ROUND_S) * _ROUND_S)
        fields: list[str | int] = [kb, source_id, expires, *([ADMIN] if admin else [])]
        payload = json.dumps(fields, separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._sign(payload))}"

    def admin_page(self, kb: str, source_id: str, now: float | None = None) -> str:
        """The page URL of ``source_id`` whose holder may rename its speakers, valid for a
        day (or the configured days, when fewer)."""
        return f"{self.public_url}/v/{self.token(kb, source_id, now, ADMIN_TTL_S, admin=True)}"

    def form_key(self, token: str) -> str:
        """What the page of ``token`` puts in its form and a post must bring back: signed
        for that token alone, unknowable to any other page."""
        return _b64(hmac.new(self._key(), _FORM + token.encode(), hashlib.sha256).digest()[:20])

    def page(self, kb: str, source_id: str, now: float | None = None) -> str:
        """The page URL of ``source_id`` in ``kb`` (no fragment)."""
        return f"{self.public_url}/v/{self.token(kb, source_id, now)}"

    def check(self, token: str, now: float | None = None) -> Grant:
        """The grant a token carries; BadLink when it is malformed, tampered or expired."""
        try:
            body, sig = token.split(".")
            payload, given = _unb64(body), _unb64(sig)
        except (ValueError, TypeError):
            raise BadLink() from None
        if not hmac.compare_digest(given, self._sign(payload)):
            raise BadLink()
        try:
            kb, source_id, expires, *scope = json.loads(payload)
        except (ValueError, TypeError):
            raise BadLink() from None
        if not (isinstance(kb, str) and isinstance(source_id, str) and isinstance(expires, int)):
            raise BadLink()
        if scope not in ([], [ADMIN]):
            raise BadLink()
        if expires < (time.time() if now is None else now):
            raise BadLink(expired=True)
        return Grant(kb, source_id, expires, admin=scope == [ADMIN])
