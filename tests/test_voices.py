"""Remembered voices (``QUORUM_VOICES=on``), as a user meets them through ``quorum
speakers``: naming a speaker remembers the voice; a later recording's unnamed speaker that
sounds like it is suggested, never renamed; ``forget NAME`` and forgetting the recording
leave no trace of the voice in the data dir; with voices off nothing is remembered.

The per-recording vectors are what diarization keeps (``retrieval.speakers.voiceprints``), saved
here as it would save them: one centroid per label."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

import adapters.cli.main  # noqa: F401  (registers every command)
from adapters.cli.main import app
from retrieval.speakers.voiceprints import VOICEPRINTS, Voiceprints
from retrieval.store.weaviate.server import Endpoint
from tests.speaker_meeting import write_meeting

runner = CliRunner()
FIRST, SECOND = "2024-06-04-infra-review", "2024-06-11-infra-review"
NAME = "Amara Osei"


def quorum(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def voice(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(192).astype(np.float32)


def near(v: np.ndarray, seed: int) -> np.ndarray:
    """The same voice heard again: the centroid plus a little noise."""
    return (v + 0.35 * np.random.default_rng(seed).standard_normal(v.shape)).astype(np.float32)


AMARA, BEN, CHO = voice(1), voice(2), voice(3)


def data_dir() -> Path:
    return Path(os.environ["QUORUM_DATA_DIR"])


def traces(name: str) -> list[str]:
    """Files under the data dir holding ``name`` (as UTF-8, or as NumPy keeps text), but
    the session database: its audit trail says who was renamed, kept by design."""
    forms = [name.encode(), name.encode("utf-32-le")]
    return [
        str(p)
        for p in data_dir().rglob("*")
        if p.is_file() and "sessions" not in p.name and any(f in p.read_bytes() for f in forms)
    ]


@pytest.fixture
def two_meetings(
    weaviate_env: Endpoint, tmp_path: Path, kb: str, monkeypatch: pytest.MonkeyPatch
) -> str:
    monkeypatch.setenv("QUORUM_VOICES", "on")
    folder = tmp_path / "meetings"
    for sid in (FIRST, SECOND):
        code, out, err = quorum("ingest", str(write_meeting(folder, sid)), "--kb", kb)
        assert code == 0, out + err
    prints = Voiceprints(data_dir() / VOICEPRINTS, enabled=True)
    prints.save(kb, FIRST, {"Speaker 1": BEN, "Speaker 2": AMARA, "Speaker 3": near(BEN, 9)})
    # A week later: Amara is "Speaker 3" this time, someone new is "Speaker 2".
    prints.save(
        kb, SECOND, {"Speaker 1": near(BEN, 4), "Speaker 2": CHO, "Speaker 3": near(AMARA, 5)}
    )
    return kb


def listing(kb: str, sid: str) -> dict[str, object]:
    code, out, err = quorum("speakers", sid, "--kb", kb, "--json")
    assert code == 0, err
    shown: dict[str, object] = json.loads(out)
    return shown


def test_a_named_voice_is_suggested_for_the_next_recording_never_applied(two_meetings: str) -> None:
    kb = two_meetings
    assert listing(kb, SECOND)["suggestions"] == []  # nobody is named yet
    assert quorum("speakers", "rename", FIRST, "Speaker 2", NAME, "--kb", kb)[0] == 0
    suggested = listing(kb, SECOND)["suggestions"]
    assert isinstance(suggested, list) and len(suggested) == 1
    assert suggested[0].startswith(f"Speaker 3 sounds like {NAME}, 0.")
    assert float(suggested[0].rsplit(" ", 1)[1]) >= 0.65
    code, out, _ = quorum("speakers", SECOND, "--kb", kb)
    assert f"Speaker 3 sounds like {NAME}" in " ".join(out.split())
    code, out, _ = quorum("sources", "--kb", kb, "--json")
    second = next(s for s in json.loads(out) if s["id"] == SECOND)
    assert NAME not in second["speakers"]  # suggested, not applied
    # Merging the first meeting's split voice keeps one vector for Speaker 1 there.
    assert quorum("speakers", "merge", FIRST, "Speaker 3", "Speaker 1", "--kb", kb)[0] == 0
    prints = Voiceprints(data_dir() / VOICEPRINTS, enabled=True)
    assert sorted(prints.load(kb, FIRST)) == [NAME, "Speaker 1"]

    code, out, err = quorum("speakers", "forget", NAME, "--kb", kb)
    assert code == 0, err
    assert "Forgot the voice of 'Amara Osei'" in " ".join(out.split())
    assert traces(NAME) == []
    assert listing(kb, SECOND)["suggestions"] == []
    code, _, err = quorum("speakers", "forget", NAME, "--kb", kb)
    assert code == 1 and "No voice named 'Amara Osei' is remembered" in err


def test_forgetting_the_recording_forgets_the_voice_named_only_there(two_meetings: str) -> None:
    kb = two_meetings
    assert quorum("speakers", "rename", FIRST, "Speaker 2", NAME, "--kb", kb)[0] == 0
    assert traces(NAME)  # remembered
    code, out, err = quorum("remove", FIRST, "--kb", kb)
    assert code == 0, out + err
    assert traces(NAME) == []
    assert listing(kb, SECOND)["suggestions"] == []


def test_with_voices_off_nothing_is_remembered(
    two_meetings: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUORUM_VOICES", "off")
    kb = two_meetings
    assert quorum("speakers", "rename", FIRST, "Speaker 2", NAME, "--kb", kb)[0] == 0
    assert listing(kb, SECOND)["suggestions"] == []
    assert traces(NAME) == []
