"""A page link serves only what Quorum holds: after ingest, a symlink swapped in for the
recording, the PDF, or the recording beside a transcript, a link planted beside a
transcript before ingest, a link or a ``.gz`` in the media store itself — the link still
plays the copy Quorum kept (or 404s), never the file the link names (here the link
secret and the session database, what an attacker wants). A stream against a caller that
does not behave: one that never reads is dropped (its descriptor freed), and a kept file
that shrinks mid-stream ends the connection rather than leave the player waiting."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
import pytest_asyncio
from typer.testing import CliRunner

from adapters.cli.main import app
from adapters.http import pages
from bot.config import load_settings
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.links.kept_media import TRIED, ChangedWhileRead, MediaStore, Opened
from retrieval.models import Original
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.conftest import _PREFIXES, EXAMPLES
from tests.media_fixtures import speak
from tests.pages_harness import Served, serving

VTT = """WEBVTT

00:00:01.000 --> 00:00:04.000
<v Priya>The heliotrope vendor contract renews in March.
"""


@dataclass
class World:
    served: Served
    kb: str
    files: Path
    data: Path
    originals: dict[str, bytes]  # file name -> the bytes ingested

    def secrets(self) -> list[Path]:
        """Files of the data dir a page must never serve."""
        return [self.data / "link-secret", self.data / "sessions.sqlite3"]


def cli_ingest(endpoint: Endpoint, data: Path, files: Path, kb: str) -> tuple[int, str, str]:
    """``quorum ingest FILES --kb KB`` with this data dir, against the session Weaviate."""
    with pytest.MonkeyPatch.context() as env:
        for name in [n for n in os.environ if n.startswith(_PREFIXES)]:
            env.delenv(name)
        env.setenv("QUORUM_DATA_DIR", str(data))
        env.setenv("QUORUM_WEAVIATE_MODE", "local")
        env.setenv("QUORUM_WEAVIATE_URL", endpoint.url)
        env.setenv("QUORUM_WEAVIATE_GRPC_PORT", str(endpoint.grpc_port))
        result = CliRunner().invoke(app, ["ingest", str(files), "--kb", kb])
    return result.exit_code, result.stdout, result.stderr


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[World]:
    """A recording, a PDF and a transcript beside its recording, ingested from disk; a
    link to the link secret beside another transcript before ingest."""
    folder = tmp_path_factory.mktemp("hostile-media")
    kb = f"t{uuid.uuid4().hex[:12]}"
    data = folder / "data"
    settings = load_settings(data_dir=data)
    files = folder / "files"
    files.mkdir()
    speak(files / "call.wav", ["The budget review moves to Friday."])
    shutil.copy(EXAMPLES / "docs" / "auth-migration-plan.pdf", files / "plan.pdf")
    (files / "vendor.vtt").write_text(VTT)
    speak(files / "vendor.wav", ["The vendor call was recorded here."])
    (files / "planted.vtt").write_text(VTT.replace("heliotrope", "marigold"))
    async with serving(settings, weaviate_endpoint, store, embedder) as served:
        (files / "planted.wav").symlink_to(data / "link-secret")
        originals = {p.name: p.read_bytes() for p in files.iterdir() if not p.is_symlink()}
        # `quorum ingest`, as a user runs it (in a thread: it runs its own event loop).
        code, out, err = await asyncio.to_thread(cli_ingest, weaviate_endpoint, data, files, kb)
        assert code == 0, err + out
        yield World(served, kb, files, data, originals)


async def fetch(world: World, source_id: str, route: str, **headers: str) -> tuple[int, bytes]:
    link = world.served.signer.page(world.kb, source_id) + route
    async with world.served.http.get(link, headers=headers) as r:
        return r.status, await r.read()


def swap_for_link(path: Path, target: Path) -> None:
    path.unlink()
    path.symlink_to(target)


def assert_no_secret(world: World, body: bytes) -> None:
    for secret in world.secrets():
        data = secret.read_bytes()
        assert data[:64] not in body, f"{secret.name} was served"


async def test_a_link_swapped_in_for_a_recording_after_ingest_still_plays_the_kept_copy(
    world: World,
) -> None:
    status, before = await fetch(world, "call", "/media")
    assert status == 200 and before == world.originals["call.wav"]
    for secret in world.secrets():
        swap_for_link(world.files / "call.wav", secret)
        status, body = await fetch(world, "call", "/media")
        assert status == 200 and body == world.originals["call.wav"]
        assert_no_secret(world, body)


async def test_a_link_swapped_in_for_a_document_after_ingest_still_serves_the_kept_pdf(
    world: World,
) -> None:
    swap_for_link(world.files / "plan.pdf", world.data / "link-secret")
    status, body = await fetch(world, "plan", "/file")
    assert status == 200 and body == world.originals["plan.pdf"]
    assert_no_secret(world, body)


async def test_a_link_beside_a_transcript_serves_the_recording_kept_at_ingest_or_nothing(
    world: World,
) -> None:
    # call.vtt next to call.wav: the transcript is the source, the recording its media.
    status, body = await fetch(world, "vendor", "/media")
    assert status == 200 and body == world.originals["vendor.wav"]
    swap_for_link(world.files / "vendor.wav", world.data / "sessions.sqlite3")
    status, body = await fetch(world, "vendor", "/media")
    assert status == 200 and body == world.originals["vendor.wav"]

    # A link already there at ingest is never taken for the recording.
    status, body = await fetch(world, "planted", "")
    assert status == 200 and b"marigold" in body and b"id=media" not in body
    status, body = await fetch(world, "planted", "/media")
    assert status == 404
    assert_no_secret(world, body)


async def test_a_link_or_a_precompressed_sibling_in_the_store_itself_is_never_served(
    world: World,
) -> None:
    media = world.served.services.retrieval.media
    source = next(
        i.source
        for i in await world.served.services.retrieval.store.list_sources(world.kb)
        if i.source.id == "call"
    )
    [kept] = media.copies(world.kb, source.content_hash)
    secret = world.data.joinpath("link-secret").read_bytes()
    for sibling in (".gz", ".br"):  # beside the kept copy, and beside the ingested file
        kept.with_name(kept.name + sibling).write_bytes(secret)
        (world.files / f"plan.pdf{sibling}").write_bytes(secret)
    status, body = await fetch(world, "call", "/media", **{"Accept-Encoding": "gzip, br"})
    assert status == 200 and body == world.originals["call.wav"]
    assert_no_secret(world, body)
    status, body = await fetch(world, "plan", "/file", **{"Accept-Encoding": "gzip, br"})
    assert status == 200 and body == world.originals["plan.pdf"]

    held = kept.read_bytes()
    kept.unlink()
    kept.symlink_to(world.data / "link-secret")
    try:
        status, body = await fetch(world, "call", "/media")
        assert status == 404
        assert_no_secret(world, body)
    finally:
        kept.unlink()
        kept.write_bytes(held)


async def test_range_requests_are_answered_from_the_kept_copy(world: World) -> None:
    wav = world.originals["call.wav"]
    status, body = await fetch(world, "call", "/media", Range="bytes=10-19")
    assert status == 206 and body == wav[10:20]
    status, body = await fetch(world, "call", "/media", Range="bytes=-5")
    assert status == 206 and body == wav[-5:]
    status, _ = await fetch(world, "call", "/media", Range=f"bytes={len(wav) + 10}-")
    assert status == 416
    link = world.served.signer.page(world.kb, "call") + "/media"
    async with world.served.http.head(link) as r:
        assert r.status == 200 and r.headers["Content-Length"] == str(len(wav))
        assert await r.read() == b""


async def test_a_range_that_does_not_parse_or_is_invalid_gets_the_whole_file(
    world: World,
) -> None:
    wav = world.originals["call.wav"]
    for header in (
        f"bytes={'9' * 5000}-",  # int() refuses so many digits: was a 500 and a traceback
        f"bytes=0-{'9' * 19}",
        "bytes=5-3",  # an end before its start (RFC 9110: ignored, not 416)
        "bytes=\u0661\u0660-\u0661\u0669",  # Arabic-Indic digits: not a range
    ):
        status, body = await fetch(world, "call", "/media", Range=header)
        assert (status, body == wav) == (200, True), header[:40]
    status, body = await fetch(world, "call", "/media", Range=f"bytes=10-{'9' * 18}")
    assert status == 206 and body == wav[10:]


def test_a_file_swapped_between_reading_and_keeping_is_not_kept(tmp_path: Path) -> None:
    secret = tmp_path / "link-secret"
    secret.write_text("0123456789abcdef0123456789abcdef")
    pdf = tmp_path / "plan.pdf"
    read = b"%PDF-1.4 what ingest read"
    pdf.write_bytes(read)
    digest = hashlib.sha256(read).hexdigest()
    swap_for_link(pdf, secret)  # after ingest read it, before the store copies it
    store = MediaStore(tmp_path / "media")
    with pytest.raises(ChangedWhileRead):
        store.keep("kb", "0" * 64, Original(pdf, digest))
    assert [p for p in (tmp_path / "media").rglob("*") if p.is_file() and p.name != TRIED] == []


BIG = 32 * 1024 * 1024  # far more than the kernel's socket buffers hold


@contextlib.contextmanager
def kept_call_of(world: World, size: int) -> Iterator[Path]:
    """The kept copy of "call" made ``size`` bytes long for the test, then put back."""
    media = world.served.services.retrieval.media
    hashes = {p.stem for p in media.root.joinpath(world.kb).glob("*.wav")}
    assert len(hashes) == 2  # call and vendor
    kept = next(
        p
        for h in hashes
        for p in media.copies(world.kb, h)
        if p.read_bytes() == world.originals["call.wav"]
    )
    held = kept.read_bytes()
    kept.write_bytes(os.urandom(size))
    try:
        yield kept
    finally:
        kept.write_bytes(held)


@contextlib.asynccontextmanager
async def stalled_get(
    world: World,
) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """A GET of "call"'s media from a client with a tiny receive buffer that reads nothing
    until told."""
    url = urlsplit(world.served.signer.page(world.kb, "call") + "/media")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, (url.hostname, url.port))
    reader, writer = await asyncio.open_connection(sock=sock, limit=4096)
    writer.write(f"GET {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\n\r\n".encode())
    await writer.drain()
    try:
        yield reader, writer
    finally:
        writer.close()


async def body_of(reader: asyncio.StreamReader) -> tuple[int, int]:
    """(Content-Length, bytes of body read until the server closed the connection)."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    got = 0
    while chunk := await reader.read(1 << 16):
        got += len(chunk)
    return length, got


def open_on(path: Path) -> int:
    """How many of this process's descriptors are open on ``path``."""
    fds = Path("/proc/self/fd")
    return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == str(path))


async def test_a_caller_that_never_reads_is_dropped_and_its_descriptor_freed(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pages, "WRITE_TIMEOUT_S", 0.5)
    with kept_call_of(world, BIG) as kept:
        async with stalled_get(world) as (reader, _):
            await asyncio.sleep(1.0)  # the stream stalls, then times out
            for _ in range(50):
                if open_on(kept) == 0:
                    break
                await asyncio.sleep(0.1)
            assert open_on(kept) == 0
            length, got = await asyncio.wait_for(body_of(reader), 10)
            assert length == BIG and got < BIG  # cut off, not completed


async def test_a_kept_file_that_shrinks_mid_stream_ends_the_connection(world: World) -> None:
    with kept_call_of(world, BIG) as kept:
        async with stalled_get(world) as (reader, _):
            await asyncio.sleep(0.3)
            os.truncate(kept, 1024 * 1024)
            # Before: the body stopped short of Content-Length on an open connection, and
            # the player waited for the rest for ever.
            length, got = await asyncio.wait_for(body_of(reader), 10)
            assert length == BIG and got < BIG


async def test_a_request_dropped_while_its_file_opens_leaves_no_descriptor(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, done = threading.Event(), threading.Event()
    real = MediaStore.open

    def slow_open(self: MediaStore, *args: Any) -> Opened | None:  # a slow disk
        gate.wait(10)
        try:
            return real(self, *args)
        finally:
            done.set()

    monkeypatch.setattr(MediaStore, "open", slow_open)
    with kept_call_of(world, 1024) as kept:
        link = world.served.signer.page(world.kb, "call") + "/media"
        with pytest.raises(asyncio.TimeoutError):  # the player gives up while it opens
            async with world.served.http.get(link, timeout=aiohttp.ClientTimeout(total=0.5)):
                pass
        await asyncio.sleep(0.3)  # the server notices the hang-up and cancels the request
        gate.set()
        # Only once the thread has opened the file can its descriptor be counted.
        assert await asyncio.to_thread(done.wait, 10)
        for _ in range(50):
            if open_on(kept) == 0:
                break
            await asyncio.sleep(0.1)
        assert open_on(kept) == 0
