"""The retrieval commands as a user runs them: tables, JSON, exit codes, and one clear
sentence (never a traceback) for bad arguments or an unreachable Weaviate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from retrieval.store.weaviate.server import Endpoint

runner = CliRunner()


def quorum(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "2024-05-02-standup.txt").write_text(
        "[00:00:05] Ana Ruiz: Morning.\n"
        "[00:03:20] Ana Ruiz: The flumox cache evicts entries after ninety seconds.\n"
    )
    (root / "broken.json").write_text("{ this is not json")
    return root


def test_ingest_search_sources_remove(weaviate_env: Endpoint, folder: Path, kb: str) -> None:
    code, out, err = quorum("ingest", str(folder), "--kb", kb)
    assert code == 1  # one file failed
    assert "broken.json" in err and "Traceback" not in err + out
    assert "Ingest summary" in out

    code, out, _ = quorum("search", "flumox cache", "--kb", kb, "--json", "-k", "3")
    assert code == 0
    hits = json.loads(out)
    assert hits[0]["speaker"] == "Ana Ruiz"
    assert abs(hits[0]["start_s"] - 200) < 1
    assert hits[0]["source"] == {
        "id": "2024-05-02-standup",
        "title": "Standup",
        "url": None,
        "kind": "video",
        "recorded_at": "2024-05-02",
    }
    assert set(hits[0]) >= {"text", "score", "speaker", "start_s", "end_s", "page", "link"}

    code, out, _ = quorum("search", "flumox", "--kb", kb)
    assert code == 0 and "Standup" in out and "3:20" in out

    code, out, _ = quorum("sources", "--kb", kb, "--json")
    assert code == 0 and [s["id"] for s in json.loads(out)] == ["2024-05-02-standup"]

    code, out, _ = quorum("ingest", str(folder / "2024-05-02-standup.txt"), "--kb", kb)
    assert code == 0 and flat(out).count(" 1 ") >= 1  # skipped, unchanged

    code, out, _ = quorum("remove", "2024-05-02-standup", "--kb", kb)
    assert code == 0 and "Removed" in out
    code, _, err = quorum("remove", "2024-05-02-standup", "--kb", kb)
    assert code == 1 and "No source" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["search", "auth", "--after", "2024-13-45"], "--after '2024-13-45' is not a date"),
        (["search", "auth", "-k", "0"], "-k must be between 1 and 100"),
        (["search", "auth", "-k", "1000"], "-k must be between 1 and 100"),
        (["search", "   "], "The query is empty"),
        (["search", "auth", "--kind", "podcast"], "--kind 'podcast' is not one of"),
        (
            ["search", "auth", "--after", "2024-06-01", "--before", "2024-01-01"],
            "--after 2024-06-01 is later than --before 2024-01-01; swap them",
        ),
        (["search", "auth", "--kb", "no spaces allowed"], "Knowledge base names use"),
    ],
)
def test_bad_arguments_get_one_sentence(
    weaviate_env: Endpoint, args: list[str], message: str
) -> None:
    code, out, err = quorum(*args)
    assert code != 0
    assert message in flat(err)
    assert "Traceback" not in out + err


def test_unreachable_weaviate_names_the_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUORUM_WEAVIATE_MODE", "local")
    monkeypatch.setenv("QUORUM_WEAVIATE_URL", "http://127.0.0.1:9")
    code, out, err = quorum("sources")
    assert code == 1
    assert "Weaviate at http://127.0.0.1:9 is not reachable" in flat(err)
    assert "not closed properly" not in err  # the failed client is closed too
    assert "Traceback" not in out + err


def test_a_bad_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUORUM_HYBRID_ALPHA", "3")
    code, _, err = quorum("sources")
    assert code == 1 and "QUORUM_HYBRID_ALPHA" in err
