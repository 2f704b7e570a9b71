"""What the media store must not leave behind or churn, run as a user runs ``quorum
ingest``: a rendition that fails half-way, a copy whose source was never written, a
store at its size bound read again on every run."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from retrieval import kept_media
from retrieval.store.weaviate.server import Endpoint
from tests.media_fixtures import hiss, to_video

VTT = """WEBVTT

00:00:02.000 --> 00:00:06.000
<v Priya>The heliotrope contract renews in March.
"""


def quorum(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def everything(folder: Path) -> list[Path]:
    """Every file under ``folder``, hidden ones too."""
    return sorted(p for p in folder.rglob("*") if p.is_file())


def test_a_rendition_that_fails_half_way_leaves_nothing_behind(
    tmp_path: Path, weaviate_env: Endpoint, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    (calls / "review.vtt").write_text(VTT)
    to_video(hiss(tmp_path / "review.wav", 3.0), calls / "review.mkv")
    real = kept_media.render_audio

    def disk_full(source: Path, out: Path) -> None:  # the rendition written, then ENOSPC
        real(source, out)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(kept_media, "render_audio", disk_full)
    for _ in range(2):  # each run tries again
        code, out, err = quorum("ingest", str(calls), "--kb", kb, "--force")
        assert code == 0, err + out
    media = tmp_path / "data" / "media"
    assert everything(media) == []

    # A partial a crash left a day ago is swept by the next keep; a fresh one is not.
    folder = media / kb
    stale, fresh = folder / f".{'a' * 64}.m4a.1.part", folder / f".{'b' * 64}.m4a.2.part"
    for p in (stale, fresh):
        p.write_bytes(b"half a copy")
    os.utime(stale, (time.time() - 2 * 86_400,) * 2)
    monkeypatch.setattr(kept_media, "render_audio", real)
    code, out, err = quorum("ingest", str(calls), "--kb", kb, "--force")
    assert code == 0, err + out
    hidden = [p.name for p in everything(media) if p.name.startswith(".")]
    assert hidden == [fresh.name]
    (listed,) = json.loads(quorum("sources", "--kb", kb, "--json")[1])
    assert listed["media_kept"] is True
