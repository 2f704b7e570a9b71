"""Audio and video on ingest, as a user meets them: speech made in the test (espeak-ng,
known sentences at known seconds) is transcribed by the packaged Whisper tiny.en, found
by ``quorum search`` at the second it was said, cited by ``quorum ask``, and exported by
``quorum transcript``; broken media files are named and skipped."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from adapters.cli.main import app  # with `quorum transcript` registered
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import IngestError
from retrieval.ingest import read_source
from retrieval.ingest.media import decode_audio, file_digest
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import FileResult, ingest
from retrieval.write.transcribe import (
    PAUSE_S,
    SAMPLE_RATE,
    Audio,
    Transcriber,
    chunked,
    cues_from_words,
)
from tests.media_fixtures import Spoken, hiss, speak, to_video

runner = CliRunner()

MEETING = [
    "Welcome to the quarterly planning meeting.",
    "Please send the budget report to Maria by Thursday.",
    "The new office opens in the spring.",
    "We will review the hiring plan next week.",
]
DEMO = [
    "This video shows the new dashboard.",
    "The login page now loads twice as fast.",
    "Customers can download their invoices from the billing page.",
]


@dataclass(frozen=True)
class Media:
    folder: Path
    data_dir: Path
    meeting: Spoken
    demo: Spoken  # the sound of demo.mkv
    video: Path


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> Media:
    """A folder as a team would have it: a meeting WAV, a demo video, a video without
    sound, a corrupt MP3, a recording where nobody speaks, and a typed transcript."""
    folder = tmp_path_factory.mktemp("recordings")
    meeting = speak(folder / "2024-03-04-planning.wav", MEETING)
    work = tmp_path_factory.mktemp("work")
    demo = speak(work / "demo.wav", DEMO)
    video = to_video(demo.path, folder / "2024-03-05-dashboard-demo.mkv")
    to_video(demo.path, folder / "screen-share.mp4", audio=False, seconds=2)
    (folder / "voicemail.mp3").write_bytes(b"ID3\x04\x00" + bytes(range(256)) * 40)
    hiss(folder / "room-tone.wav", 4.0)
    (folder / "standup.txt").write_text("[00:00:04] Ana: The flumox cache is warm.\n")
    return Media(folder, tmp_path_factory.mktemp("data"), meeting, demo, video)


def quorum(media: Media, endpoint: Endpoint, *args: str, **env: str) -> tuple[int, str, str]:
    result = runner.invoke(
        app,
        list(args),
        env={
            "QUORUM_WEAVIATE_MODE": "local",
            "QUORUM_WEAVIATE_URL": endpoint.url,
            "QUORUM_WEAVIATE_GRPC_PORT": str(endpoint.grpc_port),
            # One data dir for the module: each recording is transcribed once.
            "QUORUM_DATA_DIR": str(media.data_dir),
            **env,
        },
    )
    return result.exit_code, result.stdout, result.stderr


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def said_at(cues: list[tuple[float, str]], sentence: str) -> float:
    """When the cue holding most of ``sentence``'s words starts."""
    best = max(cues, key=lambda c: len(words(c[1]) & words(sentence)))
    assert len(words(best[1]) & words(sentence)) >= len(words(sentence)) * 0.6, (sentence, cues)
    return best[0]


def test_every_sentence_comes_back_at_the_second_it_was_said(media: Media) -> None:
    transcriber = Transcriber(cache_dir=media.data_dir / "transcripts")
    path = media.meeting.path
    transcript = transcriber.transcribe(str(path), file_digest(path), lambda: decode_audio(path))
    cues = [(c.start_s, c.text) for c in transcript.cues]
    for sentence, start in zip(MEETING, media.meeting.starts, strict=True):
        assert abs(said_at(cues, sentence) - start) <= 1.0, (sentence, start, cues)
    assert transcript.model == "tiny.en" and not transcript.has_video
    assert abs(transcript.duration_s - media.meeting.duration_s) < 0.1


def test_ingest_search_and_ask_a_recording_and_a_video(
    media: Media, weaviate_env: Endpoint, kb: str
) -> None:
    # Short windows, so a search hit starts at its sentence rather than at 0:00.
    short = {"QUORUM_CHUNK_SECONDS": "6", "QUORUM_CHUNK_OVERLAP_SECONDS": "0"}
    code, out, err = quorum(media, weaviate_env, "ingest", str(media.folder), "--kb", kb, **short)
    assert code == 1, out + err  # three files failed, and the run went on
    lines = " ".join(err.split())
    assert "screen-share.mp4" in lines and "no audio track" in lines
    assert "voicemail.mp3" in lines and "not a media file FFmpeg can read" in lines
    assert "room-tone.wav" in lines and "no speech was recognised" in lines
    assert "Traceback" not in out + err
    assert re.search(r"\b3 \W 0 \W 0 \W 3\b", " ".join(out.split())), out  # 3 added, 3 failed

    code, out, _ = quorum(
        media, weaviate_env, "search", "budget report for Maria", "--kb", kb, "--json"
    )
    assert code == 0
    top = json.loads(out)[0]
    assert top["source"]["id"] == "2024-03-04-planning" and top["source"]["kind"] == "audio"
    assert "budget report" in top["text"].lower()
    assert abs(top["start_s"] - media.meeting.starts[1]) <= 1.0

    code, out, _ = quorum(
        media, weaviate_env, "search", "login page speed", "--kb", kb, "--kind", "video", "--json"
    )
    top = json.loads(out)[0]
    assert top["source"]["id"] == "2024-03-05-dashboard-demo"
    assert abs(top["start_s"] - media.demo.starts[1]) <= 1.0

    code, out, err = quorum(
        media, weaviate_env, "ask", "Who should get the budget report?", "--kb", kb, "--json"
    )
    assert code == 0, err
    answer = json.loads(out)
    cited = [c for c in answer["citations"] if "budget" in (c["quote"] or "").lower()]
    assert cited, answer["citations"]
    assert abs(cited[0]["start_s"] - media.meeting.starts[1]) <= 1.0


async def test_an_unchanged_recording_is_not_transcribed_again(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, kb: str, tmp_path: Path
) -> None:
    class Heard:
        def __init__(self) -> None:
            self.heard: set[str] = set()
            self.results: list[FileResult] = []

        def started(self, files: int) -> None:
            pass

        def file_done(self, result: FileResult) -> None:
            self.results.append(result)

        def transcribing(self, path: str, done_s: float, total_s: float) -> None:
            assert 0 <= done_s <= total_s
            self.heard.add(Path(path).name)

    cache = tmp_path / "transcripts"
    first, again = Heard(), Heard()
    wav = speak(tmp_path / "short.wav", ["Short and sweet."], lead_s=0.5).path
    await ingest(
        store, embedder, kb, [wav], progress=first, transcriber=Transcriber(cache_dir=cache)
    )
    assert first.heard == {wav.name} and first.results[0].status == "added"
    # Forced re-ingest of the same bytes, in a new process's transcriber: the kept
    # transcript is used, so nothing is heard transcribing.
    report = await ingest(
        store,
        embedder,
        kb,
        [wav],
        progress=again,
        transcriber=Transcriber(cache_dir=cache),
        force=True,
    )
    assert again.heard == set() and report.results[0].status == "updated"
    assert report.results[0].segments == first.results[0].segments


def test_transcript_exports_read_back_at_the_same_seconds(
    media: Media, weaviate_env: Endpoint, kb: str, tmp_path: Path
) -> None:
    path = str(media.meeting.path)
    code, vtt, err = quorum(media, weaviate_env, "transcript", path)
    assert code == 0, err
    assert vtt.startswith("WEBVTT") and "budget report" in vtt.lower()
    (tmp_path / "meeting.vtt").write_text(vtt)
    doc = read_source(tmp_path / "meeting.vtt")
    text, marks = doc.segments[0].text, doc.segments[0].marks
    ends = [m.at for m in marks[1:]] + [len(text)]
    cues = [(m.start_s, text[m.at : end]) for m, end in zip(marks, ends, strict=True)]
    assert len(cues) == len(MEETING)
    assert abs(said_at(cues, MEETING[2]) - media.meeting.starts[2]) <= 1.0

    code, srt, _ = quorum(media, weaviate_env, "transcript", path, "--format", "srt")
    assert (
        code == 0 and srt.startswith("1\n00:00:0") and " --> " in srt and "," in srt.split("\n")[1]
    )

    # By source id, from the knowledge base it was ingested into, as plain text.
    code, out, err = quorum(media, weaviate_env, "ingest", path, "--kb", kb)
    assert code == 0, err
    out_file = tmp_path / "planning.txt"
    code, out, err = quorum(
        media,
        weaviate_env,
        "transcript",
        "2024-03-04-planning",
        "--kb",
        kb,
        "--format",
        "txt",
        "-o",
        str(out_file),
    )
    assert code == 0, err
    lines = out_file.read_text().splitlines()
    assert len(lines) >= len(MEETING) and all(
        re.match(r"\[\d\d:\d\d:\d\d\] \S", line) for line in lines
    )

    code, _, err = quorum(media, weaviate_env, "transcript", path, "--format", "docx")
    assert code == 1 and "--format 'docx' is not one of vtt, srt, txt" in err
    code, _, err = quorum(media, weaviate_env, "transcript", "no-such-meeting", "--kb", kb)
    assert code == 1 and "No file or source 'no-such-meeting'" in err


def test_a_bad_whisper_model_setting_is_one_sentence(
    media: Media, weaviate_env: Endpoint, tmp_path: Path, kb: str
) -> None:
    path = str(media.meeting.path)
    code, out, err = quorum(
        media, weaviate_env, "transcript", path, QUORUM_WHISPER_MODEL="/nowhere/whisper-small"
    )
    assert code == 1 and "QUORUM_WHISPER_MODEL" in err and "is not a folder" in err
    empty = tmp_path / "empty-model"
    empty.mkdir()
    code, out, err = quorum(
        media, weaviate_env, "transcript", path, QUORUM_WHISPER_MODEL=str(empty)
    )
    assert code == 1 and "cannot load Whisper model 'empty-model'" in err
    assert "Traceback" not in out + err
    # Ingest stops at the setting instead of failing every recording the same way.
    code, out, err = quorum(
        media, weaviate_env, "ingest", path, "--kb", kb, QUORUM_WHISPER_MODEL=str(empty)
    )
    assert code == 1 and "Error: QUORUM_WHISPER_MODEL" in " ".join(err.split())
    assert "Traceback" not in out + err


@pytest.mark.parametrize("suffix", [".mp4", ".mov", ".webm", ".mkv"])
def test_video_containers_give_their_sound(media: Media, suffix: str, tmp_path: Path) -> None:
    video = to_video(media.meeting.path, tmp_path / f"talk{suffix}")
    audio = decode_audio(video)
    assert audio.has_video and abs(audio.duration_s - media.meeting.duration_s) < 0.2
    wav = decode_audio(media.meeting.path)
    assert not wav.has_video and abs(wav.duration_s - media.meeting.duration_s) < 0.01


def test_broken_media_says_what_is_wrong(media: Media, tmp_path: Path) -> None:
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(media.video.read_bytes()[:300])
    odd = tmp_path / "odd.wav"
    header = bytearray(media.meeting.path.read_bytes())
    header[20:22] = (0x7777).to_bytes(2, "little")  # a codec tag FFmpeg has no decoder for
    odd.write_bytes(bytes(header))
    transcriber = Transcriber(cache_dir=tmp_path)
    for path, reason in [
        (cut, "not a media file FFmpeg can read"),
        (odd, "unsupported audio codec (FFmpeg has no decoder for it)"),
    ]:
        with pytest.raises(IngestError) as caught:
            read_source(path, transcriber=transcriber)
        assert caught.value.path == str(path) and reason in caught.value.reason
    with pytest.raises(IngestError, match="need a transcriber"):
        read_source(media.meeting.path)


@dataclass
class W:
    start: float
    end: float
    word: str


def test_words_become_sentence_cues() -> None:
    spoken = [
        W(0.0, 0.4, " Hello"), W(0.4, 0.9, " team."),
        W(1.0, 1.3, " See"), W(1.3, 1.5, " e.g."), W(1.5, 1.9, " this"), W(1.9, 2.2, " one."),
        W(2.3, 2.6, " and"), W(2.6, 3.0, " so"),  # "one. and" goes on in lowercase
        W(3.0 + PAUSE_S, 3.5 + PAUSE_S, " Later"),  # a long pause starts a new cue
    ]  # fmt: skip
    run_on = [W(n * 0.5, n * 0.5 + 0.4, " word") for n in range(60)]  # 30 s, no full stop
    cues = cues_from_words(spoken)
    assert [c.text for c in cues] == ["Hello team.", "See e.g. this one. and so", "Later"]
    assert [(c.start_s, c.end_s) for c in cues] == [(0.0, 0.9), (1.0, 3.0), (4.2, 4.7)]
    assert all(c.end_s - c.start_s <= 15.0 for c in cues_from_words(run_on))
    assert len(cues_from_words(run_on)) == 2


def test_a_recording_heard_in_short_chunks_keeps_every_sentence_at_its_second(
    media: Media,
) -> None:
    """What keeps memory flat for hours of audio (chunks of ``CHUNK_S``), shown here with
    8 s chunks: every sentence still comes back whole, at the second it was said."""
    path = media.meeting.path
    whole = decode_audio(path)

    def in_pieces() -> Audio:
        return Audio(chunked(decode_audio(path).chunks, chunk_s=8.0), False, whole.duration_s)

    transcript = Transcriber().transcribe(str(path), "chunked-" + file_digest(path), in_pieces)
    assert abs(transcript.duration_s - media.meeting.duration_s) < 0.01
    cues = [(c.start_s, c.text) for c in transcript.cues]
    for sentence, start in zip(MEETING, media.meeting.starts, strict=True):
        assert abs(said_at(cues, sentence) - start) <= 1.0, (sentence, start, cues)


def test_chunks_are_bounded_whole_and_cut_in_a_quiet_moment() -> None:
    rate = SAMPLE_RATE
    tone = np.sin(np.linspace(0, 440 * 2 * np.pi, rate)).astype(np.float32)  # 1 s of sound
    quiet = np.zeros(rate // 2, np.float32)
    sound = np.concatenate([np.concatenate([tone, tone, tone, quiet])] * 20)  # 70 s
    pieces = [sound[i : i + 12_345] for i in range(0, len(sound), 12_345)]
    chunks = list(chunked(pieces, chunk_s=10.0))
    assert all(len(c) <= 10 * rate for c in chunks) and len(chunks) >= 7
    assert np.array_equal(np.concatenate(chunks), sound)  # nothing lost, nothing doubled
    for c in chunks[:-1]:
        assert float(np.abs(c[-400:]).max()) == 0.0  # each seam falls in a silence
