"""Voiceprints (``retrieval/speakers/voiceprints.py``): kept only with ``QUORUM_VOICES=on``, read
back as they were saved, and gone when their source is forgotten (the ``ForgetHook``
``bot.wiring.holdings_of`` registers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bot.config import load_settings
from bot.sessions import Actor, SessionStore
from bot.wiring import holdings_of, retrieval_config
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import InvalidInput
from retrieval.search.search import SearchService
from retrieval.service import Retrieval
from retrieval.speakers.voiceprints import Voiceprints
from retrieval.store import Store
from retrieval.write.indexer import ingest
from retrieval.write.transcribe import Transcriber

VECTORS = {
    "Speaker 1": np.linspace(-1, 1, 192, dtype=np.float32),
    "Speaker 2": np.cos(np.arange(192, dtype=np.float32)),
}


def test_saved_voiceprints_read_back_listed_and_dropped(tmp_path: Path) -> None:
    prints = Voiceprints(tmp_path / "voiceprints", enabled=True)
    file = prints.save("team", "standup", VECTORS)
    assert file is not None and file.is_file()
    loaded = prints.load("team", "standup")
    assert list(loaded) == ["Speaker 1", "Speaker 2"]
    for label, vector in VECTORS.items():
        assert loaded[label].dtype == np.float32
        np.testing.assert_array_equal(loaded[label], vector)
    prints.save("team", "retro", {"Speaker 1": VECTORS["Speaker 2"]})
    assert prints.sources("team") == ["retro", "standup"] and prints.sources("other") == []
    assert prints.drop("team", "standup") == [str(file)]
    assert prints.load("team", "standup") == {} and prints.sources("team") == ["retro"]
    assert prints.drop("team", "standup") == []


def test_nothing_is_kept_while_voices_are_off(tmp_path: Path) -> None:
    root = tmp_path / "voiceprints"
    on = Voiceprints(root, enabled=True)
    on.save("team", "standup", VECTORS)
    off = Voiceprints(root, enabled=False)
    assert off.save("team", "standup", VECTORS) is None
    # Saving again with voices off drops what an earlier run kept.
    assert not any(p.is_file() for p in root.rglob("*"))
    assert off.save("team", "retro", VECTORS) is None and off.sources("team") == []


def test_names_that_could_leave_the_folder_are_refused(tmp_path: Path) -> None:
    prints = Voiceprints(tmp_path / "voiceprints", enabled=True)
    for kb, sid in (("../x", "a"), ("team", "../../etc"), ("team", "~me"), ("team", "a/b")):
        with pytest.raises(InvalidInput):
            prints.save(kb, sid, VECTORS)
    assert not (tmp_path / "voiceprints").exists()


VTT = """WEBVTT

00:00:01.000 --> 00:00:04.000
<v Ana>The restore drill runs on Tuesday.

00:00:05.000 --> 00:00:08.000
<v Bo>I will bring the runbook.
"""


async def test_forgetting_a_source_leaves_no_voiceprint_behind(
    store: Store,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    kb: str,
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    settings = load_settings(data_dir=data, voices=True)
    config = retrieval_config(settings)
    retrieval = Retrieval(config, store, embedder, search, Transcriber())  # type: ignore[arg-type]
    (tmp_path / "drill.vtt").write_text(VTT)
    await ingest(store, embedder, kb, [tmp_path / "drill.vtt"])
    kept = retrieval.voiceprints.save(kb, "drill", VECTORS)
    assert kept is not None and kept.is_relative_to(data)
    async with SessionStore.open(data / "sessions.sqlite3") as sessions:
        holdings = holdings_of(settings, retrieval, sessions)
        gone = await holdings.forget(kb, "drill", Actor("cli", "tester"))
    assert gone.passages > 0
    assert not kept.exists()
    assert not [p for p in (data / "voiceprints").rglob("*") if p.is_file()]
