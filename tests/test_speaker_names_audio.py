"""The issue's "done when", on plain audio (two flite voices made in the test run, no
transcript): Quorum transcribes and diarizes the meeting, a speaker is named, "what did
Amara Osei say about X" is answered from her lines with links to the second; with
``QUORUM_VOICES=on`` her voice is suggested, not applied, when a later recording comes in,
and forgetting the first recording leaves no voiceprint of her in the data dir."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

import adapters.cli.main  # noqa: F401  (registers every command)
from adapters.cli.main import app
from retrieval.store.weaviate.server import Endpoint
from tests.conversation import LINES, converse

runner = CliRunner()
PAGES = "http://localhost:8088/v/"
NAME = "Amara Osei"
HERS = LINES[1:8:2]  # the second voice's lines in the first meeting


def quorum(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def flat(text: str) -> str:
    return " ".join(text.split())


def traces(name: str) -> list[str]:
    """Files under the data dir holding ``name``, as text or as NumPy keeps it, but the
    session database (its audit trail says who was renamed, kept by design)."""
    forms = [name.encode(), name.encode("utf-32-le")]
    root = Path(os.environ["QUORUM_DATA_DIR"])
    return [
        str(p)
        for p in root.rglob("*")
        if p.is_file() and "sessions" not in p.name and any(f in p.read_bytes() for f in forms)
    ]


def test_a_plain_recordings_speaker_is_named_asked_and_recognised_later(
    weaviate_env: Endpoint, tmp_path: Path, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUORUM_VOICES", "on")
    for folder in ("rec", "rec2"):
        (tmp_path / folder).mkdir()
    first = converse(tmp_path / "rec" / "drill-review.wav", [0, 1], lines=LINES[:8], gap_s=0.9)
    code, out, err = quorum("ingest", str(first.path), "--kb", kb)
    assert code == 0, out + err

    code, out, err = quorum("speakers", "drill-review", "--kb", kb, "--json")
    assert code == 0, err
    listed = json.loads(out)["speakers"]
    assert sorted(s["name"] for s in listed) == ["Speaker 1", "Speaker 2"]
    label = next(
        s["name"]
        for s in listed
        if any("restore drill went well" in e["text"].lower() for e in s["excerpts"])
    )
    assert all(
        e["link"].startswith(PAGES) and "#t=" in e["link"] for s in listed for e in s["excerpts"]
    )
    code, out, err = quorum("speakers", "rename", "drill-review", label, NAME, "--kb", kb)
    assert code == 0, err

    result = runner.invoke(app, ["ask", f"What did {NAME} say about the snapshot?", "--kb", kb])
    assert result.exit_code == 0, result.output
    text = flat(result.stdout)
    assert NAME in text and re.search(re.escape(PAGES) + r"[\w.-]+#t=\d+", result.stdout)
    quoted = re.findall(r'"([^"]+)"', text)
    words = {w for line in HERS for w in re.findall(r"[a-z]+", line.lower())}
    # Every quote is hers: Whisper's words, each one among the words she said.
    assert quoted and all(
        set(re.findall(r"[a-z]+", q.lower())) <= words | {"s", "t"} for q in quoted
    ), quoted

    # A week later she speaks first: suggested at ingest, never applied.
    second = converse(
        tmp_path / "rec2" / "drill-follow-up.wav", [1, 0], lines=LINES[8:14], gap_s=0.9
    )
    code, out, err = quorum("ingest", str(second.path), "--kb", kb)
    assert code == 0, out + err
    assert f"drill-follow-up: Speaker 1 sounds like {NAME}, 0." in flat(out)
    code, out, _ = quorum("sources", "--kb", kb, "--json")
    follow = next(s for s in json.loads(out) if s["id"] == "drill-follow-up")
    assert NAME not in follow["speakers"]

    code, out, err = quorum("remove", "drill-review", "--kb", kb)
    assert code == 0, out + err
    assert traces(NAME) == []
    code, out, _ = quorum("speakers", "drill-follow-up", "--kb", kb, "--json")
    assert json.loads(out)["suggestions"] == []
