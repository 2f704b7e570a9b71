"""A source id is decided in one place (``retrieval.models.check_source_id``): ids the HTTP
routes use (``~insights``, anything with ``/``) and other unsafe ones are refused at
ingest with one sentence, whether a sidecar, a Markdown file's front matter or a
manifest gives them; nothing is added."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from retrieval.store.weaviate.server import Endpoint

runner = CliRunner()
TEXT = "# Notes\n\nThe heliotrope contract renews in March.\n"


def quorum(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("wanted", ["~insights", "~", "a/b", "../secret", " .hidden", "x" * 201])
@pytest.mark.parametrize("where", ["sidecar", "front matter", "manifest"])
def test_a_reserved_or_unsafe_id_is_refused_with_one_sentence(
    tmp_path: Path, weaviate_env: Endpoint, kb: str, wanted: str, where: str
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    note = folder / "notes.md"
    if where == "sidecar":
        note.write_text(TEXT)
        (folder / "notes.meta.json").write_text(json.dumps({"id": wanted}))
    elif where == "front matter":
        note.write_text(f"---\nid: {json.dumps(wanted)}\n---\n{TEXT}")
    else:
        note.write_text(TEXT)
        (folder / "quorum.yaml").write_text(f"notes.md:\n  id: {json.dumps(wanted)}\n")

    code, out, err = quorum("ingest", str(folder), "--kb", kb)
    assert code == 1
    said = flat(err)
    assert "is not allowed" in said and "'~'" in said and "'/'" in said, said
    assert "Traceback" not in out + err
    assert json.loads(quorum("sources", "--kb", kb, "--json")[1]) == []


def test_ordinary_ids_and_long_file_names_still_ingest(
    tmp_path: Path, weaviate_env: Endpoint, kb: str
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "budget.md").write_text(TEXT)
    (folder / "budget.meta.json").write_text(json.dumps({"id": "Budget_2024.v2"}))
    (folder / f"{'quarterly-planning-' * 12}notes.md").write_text(TEXT)
    code, _, err = quorum("ingest", str(folder), "--kb", kb)
    assert code == 0, err
    ids = sorted(s["id"] for s in json.loads(quorum("sources", "--kb", kb, "--json")[1]))
    assert ids[0] == "Budget_2024.v2"
    assert ids[1].startswith("quarterly-planning-") and len(ids[1]) <= 200
