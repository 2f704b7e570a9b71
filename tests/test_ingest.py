"""Reading files into documents: every format, metadata precedence, and bad files."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from fpdf import FPDF

from retrieval.errors import IngestError
from retrieval.ingest import SUPPORTED_SUFFIXES, discover, read_source
from retrieval.models import Document, Segment


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def at(doc: Document, words: str) -> Segment:
    """The first segment containing ``words``."""
    return next(s for s in doc.segments if words in s.text)


def make_pdf(path: Path, pages: list[str]) -> Path:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 8, text)
    path.write_bytes(bytes(pdf.output()))
    return path


VTT = """WEBVTT

NOTE exported from the meeting tool

1
00:00:01.000 --> 00:00:04.200
<v John Smith>We should move auth to the new cluster.</v>

2
00:01:10.500 --> 00:01:15.000
<v.lead Priya>Agreed &amp; I'll write the runbook.

00:01:15.000 --> 00:01:19.000
<v John Smith>Thanks.</v> <v Priya>Sure.</v>
"""


def test_vtt_voices_and_times(tmp_path: Path) -> None:
    doc = read_source(write(tmp_path / "2024-01-23-auth-deep-dive.vtt", VTT))
    first = at(doc, "new cluster")
    assert first.start_s == pytest.approx(1.0, abs=1) and first.speaker == "John Smith"
    runbook = at(doc, "runbook")
    assert runbook.start_s == pytest.approx(70.5, abs=1)
    # Voice classes (<v.lead>) are read, and two voices in one cue keep their own names.
    assert runbook.text == (
        "Priya: Agreed & I'll write the runbook.\nJohn Smith: Thanks.\nPriya: Sure."
    )
    assert doc.segments[-1].end_s == pytest.approx(79.0)
    assert doc.source.speakers == ("John Smith", "Priya")
    assert "exported" not in " ".join(s.text for s in doc.segments)
    assert doc.source.kind == "video"


SRT = """1
00:00:00,000 --> 00:00:03,000
John: Welcome to the retro.

2
00:00:03,000 --> 00:00:06,500
The deploy went fine.

3
00:00:06,500 --> 00:00:09,000
[Priya] Except the pager.

4
00:00:09,000 --> 00:00:10,000
[Music] Nice tune.
"""


def test_srt_speaker_prefixes_carry_until_the_next_name(tmp_path: Path) -> None:
    doc = read_source(write(tmp_path / "retro.srt", SRT))
    (segment,) = doc.segments
    # Unnamed cues continue the last speaker; a sound note is not a speaker.
    assert segment.text == (
        "John: Welcome to the retro. The deploy went fine.\n"
        "Priya: Except the pager. [Music] Nice tune."
    )
    assert (segment.start_s, segment.end_s) == (0.0, 10.0)
    assert doc.source.speakers == ("John", "Priya")


def test_whisper_json_with_and_without_speakers(tmp_path: Path) -> None:
    data = {
        "text": "ignored",
        "segments": [
            {"start": 0.0, "end": 4.2, "text": " Hello team.", "speaker": "SPEAKER_00"},
            {"start": 95.3, "end": 99.0, "text": " Budget is approved.", "speaker": "SPEAKER_01"},
        ],
    }
    doc = read_source(write(tmp_path / "standup.json", json.dumps(data)))
    budget = at(doc, "Budget is approved.")
    assert budget.start_s == pytest.approx(95.3, abs=1) and budget.end_s == pytest.approx(99.0)
    assert budget.speaker == "SPEAKER_01"
    assert doc.source.speakers == ("SPEAKER_00", "SPEAKER_01")

    plain = {"segments": [{"start": 12.0, "end": 15.0, "text": "No diarisation here."}]}
    doc = read_source(write(tmp_path / "plain.json", json.dumps(plain)))
    assert doc.segments[0].speakers == () and doc.segments[0].start_s == 12.0


def test_plain_transcript_with_times_and_continuations(tmp_path: Path) -> None:
    text = (
        "[00:05] John: Let's talk about the outage.\n"
        "It started at noon.\n"
        "[12:30] Priya: The cache was cold.\n"
        "[01:02:03] Sam: Back after the break.\n"
    )
    doc = read_source(write(tmp_path / "outage.txt", text))
    john = at(doc, "outage")
    assert "It started at noon." in john.text and john.start_s == pytest.approx(5, abs=1)
    assert john.speakers == ("John",)
    # A turn does not stretch over a long silence up to the next one.
    assert john.end_s is not None and john.end_s < 60
    assert at(doc, "cache was cold").start_s == pytest.approx(750, abs=1)
    assert at(doc, "Back after").start_s == pytest.approx(3723, abs=1)
    assert doc.source.speakers == ("John", "Priya", "Sam")


def test_transcript_without_times_keeps_turns(tmp_path: Path) -> None:
    text = "John: Shall we ship?\nPriya: Yes.\nAfter the freeze.\n"
    doc = read_source(write(tmp_path / "chat.txt", text))
    (segment,) = doc.segments
    assert segment.text == "John: Shall we ship?\nPriya: Yes. After the freeze."
    assert segment.start_s is None and segment.speakers == ("John", "Priya")


def test_markdown_heading_paths_and_front_matter(tmp_path: Path) -> None:
    text = (
        "---\ntitle: Ops handbook\nurl: https://wiki.example.com/ops\n---\n"
        "Intro paragraph.\n\n# On-call\n\nBe reachable.\n\n## Paging\n\nPage the secondary.\n\n"
        "```\n# not a heading\n```\n\n# Deploys\n\nShip on Tuesdays.\n"
    )
    doc = read_source(write(tmp_path / "handbook.md", text))
    assert doc.source.title == "Ops handbook" and doc.source.url == "https://wiki.example.com/ops"
    assert doc.source.kind == "document"
    assert at(doc, "Intro").heading is None
    assert at(doc, "Be reachable").heading == "On-call"
    paging = at(doc, "Page the secondary")
    assert paging.heading == "On-call > Paging" and "# not a heading" in paging.text
    assert at(doc, "Tuesdays").heading == "Deploys"
    assert not any("title:" in s.text for s in doc.segments)


def test_pdf_pages_are_numbered_from_one(tmp_path: Path) -> None:
    pages = ["Alpha page about billing.", "Beta page about refunds.", "Gamma page about taxes."]
    doc = read_source(make_pdf(tmp_path / "finance.pdf", pages))
    assert [(s.page, s.text) for s in doc.segments] == [(n + 1, t) for n, t in enumerate(pages)]
    assert doc.source.kind == "document" and doc.source.title == "Finance"


def test_a_pdfs_running_header_and_footer_are_not_its_text(tmp_path: Path) -> None:
    body = [
        "Refunds are paid within 14 days.\nThe finance team signs off each one.",
        "Taxes are filed quarterly.\nPriya owns the filing.",
        "Billing runs on the 1st.\nA failed card is retried three times.",
    ]
    pages = [
        f"Acme Finance - handbook v2 (2024-03-01)\n{text}\nInternal. Page {n} of 3"
        for n, text in enumerate(body, 1)
    ]
    doc = read_source(make_pdf(tmp_path / "finance.pdf", pages))
    assert [(s.page, s.text) for s in doc.segments] == [
        (n, " ".join(text.split())) for n, text in enumerate(body, 1)
    ]
    # a line that opens only some pages is the page's own text
    pages = ["Summary\nAlpha.", "Summary\nBeta.", "Details\nGamma.", "Details\nDelta."]
    doc = read_source(make_pdf(tmp_path / "notes.pdf", pages))
    assert [s.text for s in doc.segments] == [" ".join(p.split()) for p in pages]


COURSE = """Course Title: Introduction to MCP
Course Link: https://example.com/courses/mcp
Course Instructor: Ada Okafor
Lesson 0: Welcome
Lesson Link: https://example.com/courses/mcp/lesson-0
Welcome to the course. We build a server together.
Lesson 1: Building a server
A server exposes tools and resources.
"""


def test_course_lessons_title_link_and_instructor(tmp_path: Path) -> None:
    doc = read_source(write(tmp_path / "mcp-course.txt", COURSE))
    assert doc.source.kind == "course"
    assert doc.source.title == "Introduction to MCP"
    assert doc.source.url == "https://example.com/courses/mcp"
    assert doc.source.speakers == ("Ada Okafor",)
    welcome, server = doc.segments
    assert (welcome.lesson, welcome.lesson_title) == (0, "Welcome")
    assert welcome.lesson_url == "https://example.com/courses/mcp/lesson-0"
    assert (server.lesson, server.lesson_title, server.lesson_url) == (1, "Building a server", None)
    assert server.speakers == ("Ada Okafor",)
    assert server.text == "A server exposes tools and resources."
    assert "Course Title" not in welcome.text and "Lesson Link" not in welcome.text


def test_defaults_come_from_the_file_name(tmp_path: Path) -> None:
    doc = read_source(write(tmp_path / "2024-01-23-auth-deep-dive.srt", SRT))
    src = doc.source
    assert (src.id, src.title, src.recorded_at) == (
        "2024-01-23-auth-deep-dive",
        "Auth deep dive",
        date(2024, 1, 23),
    )
    assert src.path == str(tmp_path / "2024-01-23-auth-deep-dive.srt")
    assert all(s.source_id == src.id for s in doc.segments)


def test_metadata_precedence_sidecar_front_matter_manifest_defaults(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    path = write(
        root / "team" / "2024-02-01-sync.md",
        "---\ntitle: From front matter\nurl: https://front.example\nkind: course\n---\nBody.\n",
    )
    write(
        root / "quorum.yaml",
        "team/2024-02-01-sync.md:\n  title: From root manifest\n  url: https://manifest.example\n"
        "  kind: audio\n  description: From root manifest\n  speakers: [Root]\n",
    )
    write(root / "team" / "quorum.yaml", "2024-02-01-sync.md:\n  speakers: [Near]\n")
    write(root / "team" / "2024-02-01-sync.meta.json", json.dumps({"title": "From sidecar"}))
    src = read_source(path, root=root).source
    assert src.title == "From sidecar"
    assert (src.url, src.kind) == ("https://front.example", "course")
    assert src.description == "From root manifest"
    assert src.speakers == ("Near",)  # the nearer manifest wins
    assert src.recorded_at == date(2024, 2, 1)

    # Without the root, the parent's manifest is out of reach.
    assert read_source(path).source.description is None


def test_manifest_kind_and_id_override_defaults(tmp_path: Path) -> None:
    path = write(tmp_path / "call.vtt", VTT)
    write(tmp_path / "quorum.yaml", "call.vtt:\n  kind: audio\n  id: weekly-call\n")
    doc = read_source(path, root=tmp_path)
    assert (doc.source.kind, doc.source.id) == ("audio", "weekly-call")
    assert {s.source_id for s in doc.segments} == {"weekly-call"}


def test_editing_the_sidecar_changes_the_content_hash(tmp_path: Path) -> None:
    path = write(tmp_path / "talk.srt", SRT)
    bare = read_source(path).source.content_hash
    write(tmp_path / "talk.meta.json", '{"title": "One"}')
    one = read_source(path).source.content_hash
    write(tmp_path / "talk.meta.json", '{"title": "Two"}')
    two = read_source(path).source.content_hash
    assert len({bare, one, two}) == 3


@pytest.mark.parametrize(
    ("sidecar", "reason"),
    [
        ("{not json", "not valid JSON"),
        ('{"kind": "podcast"}', "unknown kind"),
        ('{"recorded_at": "last Tuesday"}', "not an ISO date"),
        ('["a list"]', "mapping"),
    ],
)
def test_bad_sidecar_names_the_sidecar(tmp_path: Path, sidecar: str, reason: str) -> None:
    path = write(tmp_path / "talk.srt", SRT)
    write(tmp_path / "talk.meta.json", sidecar)
    with pytest.raises(IngestError, match=reason) as info:
        read_source(path)
    assert info.value.path == str(tmp_path / "talk.meta.json")


def test_bad_front_matter_and_manifest_are_errors(tmp_path: Path) -> None:
    bad_yaml = write(tmp_path / "a.md", "---\ntitle: [unclosed\n---\nBody.\n")
    with pytest.raises(IngestError, match="front matter") as info:
        read_source(bad_yaml)
    assert info.value.path == str(bad_yaml)
    write(tmp_path / "quorum.yaml", "b.md:\n  recorded_at: soon\n")
    with pytest.raises(IngestError, match="ISO date") as info:
        read_source(write(tmp_path / "b.md", "Body.\n"))
    assert info.value.path == str(tmp_path / "quorum.yaml")


def test_discover_walks_directories_and_keeps_named_files(tmp_path: Path) -> None:
    for name in [
        "b.vtt",
        "a/notes.md",
        "a/deep/slides.pdf",
        ".hidden/c.vtt",
        ".d.srt",
        "b.meta.json",
        "quorum.yaml",
        "diagram.png",
    ]:
        write(tmp_path / "kb" / name, "x")
    named = write(tmp_path / "report.docx", "x")
    found = discover([tmp_path / "kb", named])
    kb = tmp_path / "kb"
    assert found == sorted([kb / "a/notes.md", kb / "a/deep/slides.pdf", kb / "b.vtt", named])
    with pytest.raises(IngestError, match="unsupported file type .docx") as info:
        read_source(named)
    assert info.value.path == str(named)
    assert {".vtt", ".srt", ".json", ".txt", ".md", ".pdf"} <= SUPPORTED_SUFFIXES


@pytest.mark.parametrize("suffix", sorted(SUPPORTED_SUFFIXES))
def test_empty_files_are_errors(tmp_path: Path, suffix: str) -> None:
    path = write(tmp_path / f"empty{suffix}", "  \n\n")
    with pytest.raises(IngestError, match="empty") as info:
        read_source(path)
    assert info.value.path == str(path)


@pytest.mark.parametrize("suffix", sorted(SUPPORTED_SUFFIXES))
def test_binary_garbage_is_an_error(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"garbage{suffix}"
    path.write_bytes(bytes(range(256)) * 4)
    with pytest.raises(IngestError) as info:
        read_source(path)
    assert info.value.path == str(path)


@pytest.mark.parametrize(
    ("name", "text", "reason"),
    [
        ("bad.json", '{"segments": [', "invalid JSON"),
        ("shape.json", '{"segments": "none"}', "not a Whisper transcript"),
        ("times.json", '{"segments": [{"text": "hi"}]}', "segment 0"),
        ("nocues.vtt", "WEBVTT\n\nNOTE only a note\n", "no cues"),
        ("noheader.vtt", "00:00:01.000 --> 00:00:02.000\nHi\n", "WEBVTT"),
        ("badtime.vtt", "WEBVTT\n\n00:00:xx.000 --> 00:00:02.000\nHi\n", "line 3"),
        ("nocues.srt", "just some words\n", "no subtitle cues"),
        ("headings.md", "# Only\n\n## Headings\n", "no text"),
    ],
)
def test_malformed_files_are_errors_naming_the_file(
    tmp_path: Path, name: str, text: str, reason: str
) -> None:
    path = write(tmp_path / name, text)
    with pytest.raises(IngestError, match=reason) as info:
        read_source(path)
    assert info.value.path == str(path)
    assert str(path) in str(info.value)


def test_corrupt_and_textless_pdfs_are_errors(tmp_path: Path) -> None:
    good = make_pdf(tmp_path / "good.pdf", ["Some text.", "More text."]).read_bytes()
    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(good[: len(good) // 3])
    with pytest.raises(IngestError, match="PDF") as info:
        read_source(corrupt)
    assert info.value.path == str(corrupt)
    blank = make_pdf(tmp_path / "blank.pdf", ["", ""])
    with pytest.raises(IngestError, match="no extractable text"):
        read_source(blank)


def test_unreadable_paths_and_metadata_files_are_errors(tmp_path: Path) -> None:
    with pytest.raises(IngestError, match="cannot read"):
        read_source(tmp_path / "missing.vtt")
    latin1 = tmp_path / "latin.srt"
    latin1.write_bytes(SRT.replace("Welcome", "Bienvenue à").encode("latin-1"))
    with pytest.raises(IngestError, match="UTF-8"):
        read_source(latin1)
    sidecar = write(tmp_path / "talk.meta.json", "{}")
    with pytest.raises(IngestError, match="metadata file"):
        read_source(sidecar)
