"""A page link serves only what Quorum holds: after ingest, a symlink swapped in for the
recording, the PDF, or the recording beside a transcript, a link planted beside a
transcript before ingest, a link or a ``.gz`` in the media store itself — the link still
plays the copy Quorum kept (or 404s), never the file the link names (here the link
secret and the session database, what an attacker wants)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from typer.testing import CliRunner

from adapters.cli.main import app
from bot.config import load_settings
from retrieval.embed import SentenceTransformerEmbedder
from retrieval.kept_media import ChangedWhileRead, MediaStore
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
    assert [p for p in (tmp_path / "media").rglob("*") if p.is_file()] == []
