"""Naming speakers as a user does it (``quorum speakers``, against the session's Weaviate):
a meeting labelled "Speaker 1…3" is listed with talk time and linked excerpts; renaming
"Speaker 2" to "Amara Osei" and merging "Speaker 3" into "Speaker 1" change the passages,
the speaker filter, the turns, the summary and the answers, without reading the file
again; bad input is one sentence; each change is in the audit trail."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

import adapters.cli.main  # noqa: F401  (registers every command)
from adapters.cli.main import app
from bot.errors import InvalidInput
from bot.models import Actor
from bot.speakers import Speakers
from bot.write import Writer
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.ingest import read_source
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.chunking import Unit, chunk
from retrieval.write.indexer import holding
from retrieval.write.relabel import cues, relabel_unit
from tests.speaker_meeting import LINES, write_meeting

runner = CliRunner()
SID = "2024-06-04-infra-review"
PAGES = "http://localhost:8088/v/"


def quorum(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def flat(text: str) -> str:
    return " ".join(text.split())


def search(kb: str, query: str, *options: str) -> list[dict[str, object]]:
    code, out, err = quorum("search", query, "--kb", kb, "--json", "-k", "20", *options)
    assert code == 0, err
    hits: list[dict[str, object]] = json.loads(out)
    return hits


@pytest.fixture
def meeting(weaviate_env: Endpoint, tmp_path: Path, kb: str) -> str:
    path = write_meeting(tmp_path / "meetings")
    code, out, err = quorum("ingest", str(path), "--kb", kb)
    assert code == 0, out + err
    return kb


@pytest.fixture(scope="module")
def shared(
    weaviate_endpoint: Endpoint, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, dict[str, str]]:
    """The meeting ingested once, for the tests that must change nothing."""
    env = {
        "QUORUM_WEAVIATE_MODE": "local",
        "QUORUM_WEAVIATE_URL": weaviate_endpoint.url,
        "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate_endpoint.grpc_port),
        "QUORUM_DATA_DIR": str(tmp_path_factory.mktemp("names-data")),
    }
    kb = f"t{uuid.uuid4().hex[:12]}"
    path = write_meeting(tmp_path_factory.mktemp("names-files"))
    result = runner.invoke(app, ["ingest", str(path), "--kb", kb], env=env)
    assert result.exit_code == 0, result.output
    return kb, env


def test_rename_and_merge_follow_everywhere(meeting: str) -> None:
    kb = meeting
    code, out, err = quorum("speakers", SID, "--kb", kb, "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert [s["name"] for s in listed["speakers"]] == ["Speaker 2", "Speaker 1", "Speaker 3"]
    second = listed["speakers"][0]
    assert second["talk_s"] == pytest.approx(10 * 10.5, abs=1)  # ten lines of 10.5 s
    assert len(second["excerpts"]) == 3
    for e in second["excerpts"]:
        assert e["link"].startswith(PAGES) and re.search(r"#t=\d+", e["link"])
    code, out, _ = quorum("speakers", "infra review", "--kb", kb)  # by title, as a table
    assert code == 0 and "Speaker 2" in out and "Infra review" in out
    code, out, _ = quorum("speakers", SID, "--kb", kb, "--json", "--admin-link")
    admin = json.loads(out)["admin_link"]
    assert admin.startswith(PAGES) and admin not in str(second["excerpts"])

    code, out, err = quorum("speakers", "rename", SID, "speaker 2", "Amara Osei", "--kb", kb)
    assert code == 0, err
    assert "'speaker 2' is now 'Amara Osei'" in flat(out)
    hers = search(kb, "restore drill", "--speaker", "Amara")
    assert hers and all(h["speakers"] == ["Amara Osei"] for h in hers if h["level"] == "turn")
    assert all("Amara Osei" in str(h["speakers"]) for h in hers)
    assert search(kb, "restore drill", "--speaker", "Speaker 2") == []
    windows = search(kb, "restore drill staging runbook", "--level", "window")
    assert any("\nAmara Osei: " in str(h["text"]) for h in windows)
    assert not any("Speaker 2" in str(h["text"]) for h in windows)
    code, out, _ = quorum("sources", "--kb", kb, "--json")
    assert json.loads(out)[0]["speakers"] == ["Speaker 1", "Speaker 3", "Amara Osei"]
    code, out, _ = quorum("summary", SID, "--kb", kb, "--json")
    assert "Amara Osei: " in json.loads(out)["text"] and "Speaker 2" not in json.loads(out)["text"]

    turns_before = search(kb, "restore drill invite", "--level", "turn")
    code, out, err = quorum("speakers", "merge", SID, "Speaker 3", "Speaker 1", "--kb", kb)
    assert code == 0, err
    assert search(kb, "billing", "--speaker", "Speaker 3") == []
    joined = search(kb, "weekly infrastructure review three items", "--level", "turn")
    # "Good morning…" and Speaker 3's "We have three items…" are one turn now.
    assert any("Good morning" in str(h["text"]) and "three items" in str(h["text"]) for h in joined)
    assert len(search(kb, "restore drill invite", "--level", "turn")) < len(turns_before)
    code, out, _ = quorum("speakers", SID, "--kb", kb, "--json")
    names = [s["name"] for s in json.loads(out)["speakers"]]
    assert names == ["Speaker 1", "Amara Osei"]

    code, out, _ = quorum("audit", "--kb", kb, "--json")
    trail = [(e["action"], e["detail"]) for e in json.loads(out)]
    assert trail[:2] == [
        ("speakers", "speaker 'Speaker 3' merged into 'Speaker 1'"),
        ("speakers", "speaker 'Speaker 2' renamed 'Amara Osei'"),
    ]


def test_what_a_named_speaker_said_is_answered_from_her_lines(meeting: str) -> None:
    kb = meeting
    assert quorum("speakers", "rename", SID, "Speaker 2", "Amara Osei", "--kb", kb)[0] == 0
    result = runner.invoke(
        app, ["ask", "What did Amara Osei say about the restore drill?", "--kb", kb]
    )
    assert result.exit_code == 0, result.output
    text = flat(result.stdout)
    assert "Amara Osei" in text and "restore" in text
    assert re.search(re.escape(PAGES) + r"[\w.-]+#t=\d+", result.stdout)
    # Captions name her: WebVTT voice tags, SRT "Name:", and they read back with her name.
    code, vtt, err = quorum("transcript", SID, "--kb", kb)
    assert code == 0, err
    assert "<v Amara Osei>So I want to run a restore drill" in vtt and "<v Speaker 2>" not in vtt
    code, srt, _ = quorum("transcript", "Infra review", "--kb", kb, "--format", "srt")
    assert "\nAmara Osei: The drill restores last night's snapshot" in srt
    exported = Path("exported.vtt")  # in the test's own folder
    exported.write_text(vtt)
    doc = read_source(exported)
    assert set(doc.source.speakers) == {"Speaker 1", "Speaker 3", "Amara Osei"}
    # Her lines, not the ones others said about the drill.
    quoted = re.findall(r'"([^"]+)"', text)
    hers = {t for s, t in LINES if s == "Speaker 2"}
    assert quoted and all(any(q.strip(" .…") in h or h in q for h in hers) for q in quoted)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("speakers", "no-such-meeting"), "No source matches 'no-such-meeting'"),
        (("speakers", "rename", SID, "Speaker 9", "Amara"), "'Speaker 9' is not a speaker of"),
        (("speakers", "rename", SID, "Speaker 2", "   "), "A speaker's name cannot be empty."),
        (("speakers", "rename", SID, "Speaker 2", "A" * 81), "at most 80 characters"),
        (("speakers", "rename", SID, "Speaker 2", "Amara: <b>"), "letters, digits, spaces"),
        (("speakers", "rename", SID, "Speaker 2", "speaker 1"), "merge 'Speaker 2' into"),
        (("speakers", "merge", SID, "Speaker 1", "Speaker 1"), "the same speaker already"),
        (("speakers", "rename", SID, "Speaker 2"), "rename takes a source and two names"),
    ],
)
def test_bad_input_is_one_sentence_and_changes_nothing(
    shared: tuple[str, dict[str, str]], args: tuple[str, ...], says: str
) -> None:
    kb, env = shared
    result = runner.invoke(app, [*args, "--kb", kb], env=env)
    assert result.exit_code == 1 and says in flat(result.stderr)
    assert "Traceback" not in result.output
    listed = runner.invoke(app, ["sources", "--kb", kb, "--json"], env=env)
    assert json.loads(listed.stdout)[0]["speakers"] == ["Speaker 1", "Speaker 3", "Speaker 2"]


def test_a_relabelled_window_reads_as_the_chunker_would_have_written_it() -> None:
    units = [Unit(t, n * 11.0, n * 11.0 + 10.5, s) for n, (s, t) in enumerate(LINES)]
    windows = chunk(units, "m")
    mapping = {"Speaker 3": "Speaker 1"}
    for window in windows:
        mine = [u for u in units if u.start_s in {m.start_s for m in window.marks}]
        expected = chunk(
            [
                Unit(u.text, u.start_s, u.end_s, mapping.get(u.speaker or "") or u.speaker)
                for u in mine
            ],
            "m",
        )
        # One window's units chunked alone render as that window would, merged.
        got = relabel_unit(window, mapping)
        assert got.text == expected[0].text and got.marks == expected[0].marks
    assert [(c.speaker, c.text) for c in cues(windows)] == LINES


def test_an_untimed_transcripts_windows_relabel_as_the_chunker_writes_them() -> None:
    mapping = {"Speaker 3": "Speaker 1"}
    for start in range(0, len(LINES) - 4, 4):  # groups of turns that fit one window
        units = [Unit(t, speaker=s) for s, t in LINES[start : start + 5]]
        [window] = chunk(units, "m")  # a transcript without times: one text window
        renamed = [Unit(u.text, speaker=mapping.get(u.speaker or "", u.speaker)) for u in units]
        [expected] = chunk(renamed, "m")
        got = relabel_unit(window, mapping)
        assert (got.text, got.speakers) == (expected.text, expected.speakers)


async def test_a_rename_never_races_an_ingest_of_the_same_source(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    kb: str,
    tmp_path: Path,
) -> None:
    writer = Writer(store=store, embedder=embedder, search=search)
    assert not (await writer.add(kb, [write_meeting(tmp_path / "m")], Actor("cli"))).report.failed
    speakers = Speakers(writer=writer, search=search)
    with holding(store, kb, SID, "/tmp/m/2024-06-04-infra-review.vtt"):  # an ingest under way
        with pytest.raises(InvalidInput, match="is being written right now"):
            await speakers.rename(kb, SID, "Speaker 2", "Amara Osei", Actor("cli"))
    [info] = await store.list_sources(kb)
    assert "Speaker 2" in info.source.speakers
    done = await speakers.rename(kb, SID, "Speaker 2", "Amara Osei", Actor("cli"))
    assert "Amara Osei" in done.speakers
