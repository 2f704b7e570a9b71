"""What ``quorum ingest`` keeps for the pages, run as a user runs it: a relative path is
resolved once, at ingest (serve, started elsewhere, plays the file that was ingested, not
one of the same name in its own folder); README's ``call.vtt`` next to ``call.m4a`` is one
source, the person's transcript, with the recording as its media; a container browsers
cannot play is kept as an AAC rendition; the store keeps to its size and is emptied of a
source when it is removed."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import av
import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from adapters.http.server import OpsServer
from bot.config import load_settings
from bot.metrics import MeteredCore, Metrics
from bot.wiring import open_core
from retrieval.links.kept_media import TRIED, render_audio
from retrieval.store.weaviate.server import Endpoint
from tests.media_fixtures import hiss, speak, to_video

runner = CliRunner()

VTT = """WEBVTT

00:00:02.000 --> 00:00:06.000
<v Priya>The heliotrope contract renews in March.
"""


def quorum(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def served(kb: str, source_id: str, route: str) -> tuple[int, str, bytes]:
    """``quorum serve``'s pages, started in the current folder: (status, type, body)."""

    async def go() -> tuple[int, str, bytes]:
        import aiohttp

        settings = load_settings()
        server = OpsServer(settings)
        port = await server.start(0, "127.0.0.1")
        try:
            async with open_core(settings) as services:
                metrics = Metrics(services.llm)
                server.attach(services, MeteredCore(services.engine, metrics), metrics)
                signer = services.retrieval.search.signer
                assert signer is not None
                link = f"http://127.0.0.1:{port}/v/{signer.token(kb, source_id)}{route}"
                async with aiohttp.ClientSession() as http, http.get(link) as r:
                    return r.status, r.content_type, await r.read()
        finally:
            await server.stop()

    return asyncio.run(go())


def m4a(folder: Path, name: str, said: str) -> Path:
    wav = speak(folder / f".{name}.wav", [said]).path
    out = folder / f"{name}.m4a"
    render_audio(wav, out)
    wav.unlink()
    return out


def test_a_relative_path_is_resolved_at_ingest_and_a_transcript_keeps_its_recording(
    tmp_path: Path, weaviate_env: Endpoint, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work" / "meetings"
    work.mkdir(parents=True)
    (work / "call.vtt").write_text(VTT)
    recording = m4a(work, "call", "Nothing in this recording matches the transcript.")
    ingested = recording.read_bytes()
    monkeypatch.chdir(work.parent)

    code, out, err = quorum("ingest", "meetings", "--kb", kb)
    assert code == 0, err + out
    (listed,) = json.loads(quorum("sources", "--kb", kb, "--json")[1])
    assert listed["id"] == "call" and listed["media_kept"] is True
    code, out, _ = quorum("search", "heliotrope contract", "--kb", kb, "--json")
    (hit, *_) = json.loads(out)
    assert hit["source"]["id"] == "call" and hit["start_s"] == pytest.approx(2.0)
    assert "heliotrope" in hit["text"]  # the person's transcript, not Whisper's

    # serve runs elsewhere, where meetings/call.m4a is another recording.
    elsewhere = tmp_path / "elsewhere" / "meetings"
    elsewhere.mkdir(parents=True)
    m4a(elsewhere, "call", "A different meeting altogether.")
    monkeypatch.chdir(elsewhere.parent)
    status, kind, body = served(kb, "call", "/media")
    assert (status, kind) == (200, "audio/mp4")
    assert body == ingested


def test_a_container_browsers_cannot_play_is_kept_as_an_audio_rendition(
    tmp_path: Path, weaviate_env: Endpoint, kb: str
) -> None:
    wav = speak(tmp_path / "review.wav", ["The budget review moves to Friday."])
    mkv = to_video(wav.path, tmp_path / "review.mkv")
    code, _, err = quorum("ingest", str(mkv), "--kb", kb)
    assert code == 0, err

    status, kind, body = served(kb, "review", "/media")
    assert (status, kind) == (200, "audio/mp4")
    rendition = tmp_path / "served.m4a"
    rendition.write_bytes(body)
    with av.open(str(rendition)) as container:
        (stream,) = container.streams.audio
        assert stream.codec_context.name == "aac" and not container.streams.video
        seconds = float(container.duration or 0) / av.time_base
    assert seconds == pytest.approx(wav.duration_s, abs=0.5)


def test_the_store_keeps_to_its_size_and_forgets_a_removed_source(
    tmp_path: Path, weaviate_env: Endpoint, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "calls"
    folder.mkdir()
    for n in range(3):  # 12 s of 22 kHz 16-bit sound: about half a megabyte each
        (folder / f"call-{n}.vtt").write_text(VTT.replace("heliotrope", f"call{n}"))
        hiss(folder / f"call-{n}.wav", 12.0)
    monkeypatch.setenv("QUORUM_MEDIA_MAX_MB", "1")
    code, _, err = quorum("ingest", str(folder), "--kb", kb)
    assert code == 0, err
    media = tmp_path / "data" / "media"
    kept = [p for p in media.rglob("*") if p.is_file() and p.name != TRIED]
    assert 1 <= len(kept) <= 1 and sum(p.stat().st_size for p in kept) <= 1024 * 1024
    listed = {
        s["id"]: s["media_kept"] for s in json.loads(quorum("sources", "--kb", kb, "--json")[1])
    }
    assert sorted(listed) == ["call-0", "call-1", "call-2"] and sum(listed.values()) == 1
    (held,) = [sid for sid, is_kept in listed.items() if is_kept]

    code, out, err = quorum("remove", held, "--kb", kb)
    assert code == 0, err
    assert [p for p in media.rglob("*") if p.is_file() and p.name != TRIED] == []
    assert kept[0].stem not in (media / kb / TRIED).read_text()  # not even its hash stays


def test_kept_media_past_its_days_goes_with_quorum_retention_and_the_page_keeps_its_text(
    tmp_path: Path, weaviate_env: Endpoint, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "call.vtt").write_text(VTT)
    hiss(tmp_path / "call.wav", 3.0)
    monkeypatch.setenv("QUORUM_MEDIA_RETAIN_DAYS", "7")
    code, _, err = quorum("ingest", str(tmp_path / "call.vtt"), "--kb", kb)
    assert code == 0, err
    (kept,) = [p for p in (tmp_path / "data" / "media").rglob("*.wav")]
    code, out, _ = quorum("retention", "--dry-run")
    assert code == 0 and "Would delete" in out and kept.name not in out
    eight_days_ago = kept.stat().st_mtime - 8 * 86_400
    os.utime(kept, (eight_days_ago, eight_days_ago))

    code, out, _ = quorum("retention", "--apply")
    assert code == 0 and f"Deleted kept media {kept.name}, 8 days old" in " ".join(out.split())
    assert not kept.exists()
    status, _, body = served(kb, "call", "")
    assert status == 200 and b"heliotrope" in body and b"id=media" not in body
    assert b"keeps no playable copy" not in body  # said of ingested recordings only
    assert served(kb, "call", "/media")[0] == 404
