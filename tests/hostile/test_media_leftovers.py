"""What the media store must not leave behind or churn, run as a user runs ``quorum
ingest``: a rendition that fails half-way, a copy whose source was never written, a
store at its size bound read again on every run."""

from __future__ import annotations

import errno
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from retrieval.encoding.embed import Embedder
from retrieval.errors import SearchUnavailable
from retrieval.links import kept_media
from retrieval.links.kept_media import MediaStore
from retrieval.models import Original
from retrieval.search.search import SearchService
from retrieval.store.base import Embedded
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.media_fixtures import hiss, to_video
from tests.test_uploads import held_library

VTT = """WEBVTT

00:00:02.000 --> 00:00:06.000
<v Priya>The heliotrope contract renews in March.
"""


def quorum(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def everything(folder: Path) -> list[Path]:
    """Every file under ``folder``, hidden ones too (but the store's list of hashes tried)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != kept_media.TRIED)


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


def test_a_copy_whose_source_was_not_written_is_not_kept(
    tmp_path: Path, weaviate_env: Endpoint, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("alpha", "beta"):
        (docs / f"{name}.md").write_text(f"# {name}\n\nThe {name} rollout starts in May.\n")
    media = tmp_path / "data" / "media"
    real = WeaviateStore.upsert_many

    async def down(self: WeaviateStore, *args: Any, **kwargs: Any) -> Any:
        raise SearchUnavailable("Weaviate stopped answering")

    monkeypatch.setattr(WeaviateStore, "upsert_many", down)
    code, out, err = quorum("ingest", str(docs), "--kb", kb)
    assert code != 0 and "Weaviate stopped answering" in err + out
    assert everything(media) == []

    async def rejects_beta(
        self: WeaviateStore, kb: str, items: Sequence[Embedded], **kwargs: Any
    ) -> list[Any]:
        """Weaviate rejects beta's units (its own error), and writes alpha."""
        ok = [i for i in items if i.doc.source.id != "beta"]
        written = iter(await real(self, kb, ok, **kwargs))
        rejected = SearchUnavailable("Weaviate rejected a segment of beta")
        return [rejected if i.doc.source.id == "beta" else next(written) for i in items]

    monkeypatch.setattr(WeaviateStore, "upsert_many", rejects_beta)
    code, out, err = quorum("ingest", str(docs), "--kb", kb)
    assert code != 0 and "rejected a segment of beta" in err + out
    (alpha,) = json.loads(quorum("sources", "--kb", kb, "--json")[1])
    assert alpha["id"] == "alpha" and alpha["media_kept"] is True
    assert [p.suffix for p in everything(media)] == [".md"]


async def test_a_source_forgotten_from_a_library_takes_its_copy(
    tmp_path: Path, store: WeaviateStore, embedder: Embedder, search: SearchService, kb: str
) -> None:
    media = MediaStore(tmp_path / "media")
    async with held_library(store, embedder, search, tmp_path, media=media) as library:
        doc = tmp_path / "notes.md"
        doc.write_text("# Notes\n\nThe gamma launch slips to June.\n")
        added = await library.add(kb, doc)
        assert added.status == "added" and everything(media.root)
        assert await library.forget(kb, "notes") > 0
    assert everything(media.root) == []


def test_a_store_at_its_bound_is_not_churned_by_the_next_run(
    tmp_path: Path, weaviate_env: Endpoint, kb: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    calls.mkdir()
    for n in range(3):  # about half a megabyte each: one fits under 1 MB
        (calls / f"call-{n}.vtt").write_text(VTT.replace("heliotrope", f"call{n}"))
        hiss(calls / f"call-{n}.wav", 12.0)
    monkeypatch.setenv("QUORUM_MEDIA_MAX_MB", "1")
    media = tmp_path / "data" / "media"

    def kept() -> list[tuple[str, int, int]]:
        return [(p.name, p.stat().st_ino, p.stat().st_mtime_ns) for p in media.rglob("*.wav")]

    code, _, err = quorum("ingest", str(calls), "--kb", kb)
    assert code == 0, err
    first = kept()
    assert len(first) == 1
    for _ in range(2):  # unchanged files: nothing copied again, nothing evicted
        code, _, err = quorum("ingest", str(calls), "--kb", kb)
        assert code == 0, err
        assert kept() == first


def test_a_file_over_the_bound_is_refused_before_it_is_copied(tmp_path: Path) -> None:
    big = tmp_path / "big.pdf"
    big.write_bytes(b"%PDF-1.4 " + b"0" * 4096)
    store = MediaStore(tmp_path / "media", max_bytes=1024)
    # A digest that cannot match: had the store copied the file, it would say so.
    assert store.keep("kb", "0" * 64, Original(big, "f" * 64)) is None
    assert [p for p in everything(store.root) if not p.name.startswith(".")] == []


def test_a_link_planted_as_the_knowledge_base_folder_is_not_written_through(
    tmp_path: Path, weaviate_env: Endpoint, kb: str, caplog: pytest.LogCaptureFixture
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    media = tmp_path / "data" / "media"
    media.mkdir(parents=True)
    (media / kb).symlink_to(elsewhere)
    doc = tmp_path / "plan.md"
    doc.write_text("# Plan\n\nThe delta migration starts in July.\n")
    code, out, err = quorum("ingest", str(doc), "--kb", kb)
    assert code == 0, err + out
    assert list(elsewhere.iterdir()) == []
    assert "is a link or a file, not a folder of the media store" in caplog.text
    (listed,) = json.loads(quorum("sources", "--kb", kb, "--json")[1])
    assert listed["id"] == "plan" and listed["media_kept"] is False


def test_a_source_named_by_another_sources_hash_takes_only_its_own_copy(
    tmp_path: Path, weaviate_env: Endpoint, kb: str
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "plan.md").write_text("# Plan\n\nThe epsilon review is on Monday.\n")
    code, out, err = quorum("ingest", str(docs / "plan.md"), "--kb", kb)
    assert code == 0, err + out
    media = tmp_path / "data" / "media" / kb
    (plans,) = media.glob("*.md")
    # Another file given plan's content hash as its id (a name anyone may choose).
    (docs / "notes.txt").write_text("The zeta budget is due in April.\n")
    (docs / "notes.meta.json").write_text(json.dumps({"id": plans.stem}))
    code, out, err = quorum("ingest", str(docs / "notes.txt"), "--kb", kb)
    assert code == 0, err + out
    code, out, err = quorum("remove", plans.stem, "--kb", kb)
    assert code == 0, err + out
    assert plans.is_file()  # plan's page still offers its file
    (listed,) = json.loads(quorum("sources", "--kb", kb, "--json")[1])
    assert listed["id"] == "plan" and listed["media_kept"] is True
