"""Ingest never loses or hides data silently: a file with the same name in another folder
does not replace the source already there, and two ingests racing on a fresh knowledge
base both finish."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval.embed import SentenceTransformerEmbedder
from retrieval.indexer import ingest
from retrieval.store import Store

VTT = "WEBVTT\n\n00:00:01.000 --> 00:00:04.000\n<v Ana>{words}\n"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


async def test_same_name_in_another_folder_never_replaces_a_source(
    store: Store, embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    old = write(tmp_path / "2024" / "standup.vtt", VTT.format(words="The 2024 plan is frobnitz."))
    new = write(tmp_path / "2025" / "standup.vtt", VTT.format(words="The 2025 plan is quuxify."))
    first = await ingest(store, embedder, kb, [tmp_path / "2024"])
    assert first.count("added") == 1

    second = await ingest(store, embedder, kb, [tmp_path / "2025"])
    assert second.count("failed") == 1
    reason = second.failed[0].reason or ""
    assert "already holds" in reason and str(old) in reason and ".meta.json" in reason
    [info] = await store.list_sources(kb)
    assert info.source.path == str(old)

    # Given its own id, the second file is kept alongside the first.
    write(new.with_name("standup.meta.json"), json.dumps({"id": "standup-2025"}))
    third = await ingest(store, embedder, kb, [tmp_path / "2025"])
    assert third.count("added") == 1
    assert {i.source.id for i in await store.list_sources(kb)} == {"standup", "standup-2025"}


async def test_a_moved_file_takes_its_source_over(
    store: Store, embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    before = write(tmp_path / "a" / "retro.vtt", VTT.format(words="We ship on Friday."))
    assert (await ingest(store, embedder, kb, [before])).count("added") == 1
    after = tmp_path / "b" / "retro.vtt"
    after.parent.mkdir()
    before.rename(after)
    report = await ingest(store, embedder, kb, [after], force=True)
    assert report.count("updated") == 1, report.results
    [info] = await store.list_sources(kb)
    assert info.source.path == str(after)
