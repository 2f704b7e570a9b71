"""Who said it: a conversation of three flite voices (about 90 s, made once per module) is
transcribed and given speakers; at least 95 % of its words land on the right speaker (the
labels mapped to the voices by the best assignment), ``quorum search --speaker`` returns
that voice's lines only, and the recording's page shows the labels in Chromium. One
voice is one speaker; silence and music fail nothing; a transcript that names its
speakers keeps them and nothing is diarized."""

from __future__ import annotations

import itertools
import json
import shutil
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from bot.config import load_settings
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import IngestError
from retrieval.ingest import read_source
from retrieval.ingest.media import file_digest, read_media
from retrieval.ingest.metadata import parse
from retrieval.speakers.diarize import Diarizer
from retrieval.store import Store
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import FileResult, ingest
from retrieval.write.transcribe import Transcriber, Transcript
from tests.conversation import Conversation, converse
from tests.pages_harness import chromium, opened, serving

runner = CliRunner()
ORDER = [0, 1, 2, 1, 0, 2]  # who says each line, in turn


@dataclass(frozen=True)
class Talk:
    conversation: Conversation
    transcripts: Path  # the kept transcript, copied into each test's data dir
    transcript: Transcript
    lines: list[tuple[float, float, str, str | None]]  # each unit: start, end, text, speaker


@pytest.fixture(scope="module")
def diarizer() -> Diarizer:
    return Diarizer()


@pytest.fixture(scope="module")
def talk(tmp_path_factory: pytest.TempPathFactory, diarizer: Diarizer) -> Talk:
    folder = tmp_path_factory.mktemp("talk")
    (folder / "rec").mkdir()
    said = converse(folder / "rec" / "restore-drill.wav", ORDER, gap_s=0.9)
    transcriber = Transcriber(cache_dir=folder / "transcripts")
    digest = file_digest(said.path)
    heard = read_media(said.path, digest, transcriber, diarizer=diarizer)
    transcript = transcriber.cached(digest)
    assert transcript is not None
    lines = [(u.start_s or 0.0, u.end_s or 0.0, u.text, u.speaker) for u in heard.units]
    return Talk(said, folder / "transcripts", transcript, lines)


def mapping(talk: Talk) -> tuple[dict[str, int], float]:
    """Each label's voice under the assignment that puts most words right, and the share
    of words it puts right."""
    pairs: list[tuple[str | None, int | None]] = []
    for start, end, _ in talk.transcript.words:
        mid = (start + end) / 2
        line = next((x for x in talk.lines if x[0] - 0.02 <= start <= x[1] + 0.02), None)
        pairs.append((line[3] if line else None, talk.conversation.speaker_at(mid)))
    labels = sorted({p for p, _ in pairs if p is not None})
    voices = sorted(set(ORDER))
    best: tuple[dict[str, int], int] = ({}, -1)
    for perm in itertools.permutations(voices, min(len(labels), len(voices))):
        chosen = dict(zip(labels, perm, strict=False))
        right = sum(1 for p, t in pairs if p is not None and chosen.get(p) == t)
        if right > best[1]:
            best = (chosen, right)
    return best[0], best[1] / len(pairs)


def test_three_voices_are_three_speakers_with_their_words(talk: Talk) -> None:
    speakers = [x[3] for x in talk.lines]
    assert sorted(set(speakers), key=str) == ["Speaker 1", "Speaker 2", "Speaker 3"]
    assert speakers[0] == "Speaker 1"  # numbered by first appearance
    assert speakers.index("Speaker 2") < speakers.index("Speaker 3")
    chosen, right = mapping(talk)
    assert right >= 0.95, right
    assert len(set(chosen.values())) == 3  # each label is another voice


def test_search_by_speaker_returns_only_that_voices_lines(
    talk: Talk, weaviate_env: Endpoint, kb: str, tmp_path: Path
) -> None:
    # The kept transcript, so the command does not transcribe the audio again.
    shutil.copytree(talk.transcripts, tmp_path / "data" / "transcripts")
    wav = talk.conversation.path
    result = runner.invoke(app, ["ingest", str(wav), "--kb", kb])
    assert result.exit_code == 0, result.stderr
    chosen, _ = mapping(talk)
    voice = chosen["Speaker 2"]
    for level in ("turn", "window"):
        args = ["search", "restore drill runbook replica", "--kb", kb, "--json"]
        result = runner.invoke(app, [*args, "--speaker", "Speaker 2", "--level", level])
        assert result.exit_code == 0, result.stderr
        hits = json.loads(result.stdout)
        assert hits, level
        for hit in hits:
            assert "Speaker 2" in hit["speakers"], hit
            if level == "turn":  # a turn is one speaker's stretch: every line is theirs
                assert hit["speakers"] == ["Speaker 2"]
                mid = (hit["start_s"] + hit["end_s"]) / 2
                assert talk.conversation.speaker_at(mid) == voice, hit
    others = [t.text for t in talk.conversation.turns if t.speaker != voice]
    result = runner.invoke(
        app, ["search", others[0], "--kb", kb, "--json", "--speaker", "Speaker 2", "-k", "3"]
    )
    for hit in json.loads(result.stdout):
        assert hit["speakers"] != [] and "Speaker 2" in hit["speakers"]


async def test_the_recordings_page_shows_its_speakers(
    talk: Talk,
    weaviate_endpoint: Endpoint,
    store: Store,
    embedder: SentenceTransformerEmbedder,
    diarizer: Diarizer,
    kb: str,
    tmp_path: Path,
) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    shutil.copytree(talk.transcripts, settings.data_dir / "transcripts")
    async with serving(settings, weaviate_endpoint, store, embedder) as served:  # type: ignore[arg-type]
        r = served.services.retrieval
        report = await ingest(
            store,
            r.embedder,
            kb,
            [talk.conversation.path],
            transcriber=r.transcriber,
            media=r.media,
            diarizer=diarizer,
        )
        assert not report.failed, report.failed
        link = served.signer.page(kb, "restore-drill")
        async with chromium() as browser:
            page = await opened(browser, link)
            shown = await page.locator("#transcript .who").all_text_contents()
            await page.close()
    assert {s.strip().rstrip(":") for s in shown} == {"Speaker 1", "Speaker 2", "Speaker 3"}


def test_one_voice_is_one_speaker(tmp_path: Path, diarizer: Diarizer) -> None:
    alone = converse(tmp_path / "alone.wav", [1], voices=("kal", "slt"), lines=LINES_ONE)
    transcriber = Transcriber(cache_dir=tmp_path / "t")
    heard = read_media(alone.path, file_digest(alone.path), transcriber, diarizer=diarizer)
    assert len(heard.units) >= 4
    assert {u.speaker for u in heard.units} == {"Speaker 1"}
    assert [name for name, _ in heard.voices] == ["Speaker 1"]


LINES_ONE = (
    "This is a short note about the budget review on Friday.",
    "The numbers for the second quarter look better than we expected.",
    "Travel costs went down, and the cloud bill went up a little.",
    "We should look again at the storage tier before the next review.",
    "That is all from me for today, thanks for listening.",
)


def _write(path: Path, samples: np.ndarray) -> Path:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16_000)
        w.writeframes(np.clip(samples, -32768, 32767).astype(np.int16).tobytes())
    return path


async def test_silence_and_music_fail_nothing(
    tmp_path: Path, store: Store, embedder: SentenceTransformerEmbedder, diarizer: Diarizer, kb: str
) -> None:
    rng = np.random.default_rng(3)
    t = np.arange(16_000 * 20) / 16_000
    quiet = _write(tmp_path / "quiet.wav", rng.normal(0, 15, len(t)))
    chords = sum(np.sin(2 * np.pi * f * t) for f in (220.0, 277.2, 329.6))
    beat = 0.5 + 0.5 * (np.sin(2 * np.pi * 2 * t) > 0)
    music = _write(tmp_path / "music.wav", 6000 * chords * beat / 3)
    transcriber = Transcriber(cache_dir=tmp_path / "t")
    report = await ingest(
        store, embedder, kb, [quiet, music], transcriber=transcriber, diarizer=diarizer
    )
    by_name = {Path(r.path).name: r for r in report.results}
    for name in ("quiet.wav", "music.wav"):
        result: FileResult = by_name[name]
        if result.status == "failed":  # no words: the one sentence that says so
            assert result.reason == "no speech was recognised in the recording", result
        else:
            assert result.status == "added"
            (info,) = [i for i in await store.list_sources(kb) if i.source.id == Path(name).stem]
            assert len(info.source.speakers) <= 1


VTT = """WEBVTT

00:00:01.000 --> 00:00:05.000
<v Amara Osei>Good morning everyone, let us start with the restore drill from last week.

00:00:06.000 --> 00:00:10.000
<v Bo Lindqvist>The restore drill went well, we brought the database back in forty minutes.
"""


class _Heard:
    """A progress that remembers every stage it hears."""

    def __init__(self) -> None:
        self.stages: list[str] = []

    def started(self, files: int) -> None:
        pass

    def file_done(self, result: FileResult) -> None:
        pass

    def transcribing(self, path: str, done_s: float, total_s: float) -> None:
        self.stages.append("transcribing")

    def diarizing(self, path: str, done_s: float, total_s: float) -> None:
        self.stages.append("diarizing")


async def test_a_transcript_that_names_its_speakers_keeps_them(
    talk: Talk,
    tmp_path: Path,
    store: Store,
    embedder: SentenceTransformerEmbedder,
    diarizer: Diarizer,
    kb: str,
) -> None:
    folder = tmp_path / "call"
    folder.mkdir()
    shutil.copy(talk.conversation.path, folder / "drill.wav")
    (folder / "drill.vtt").write_text(VTT)
    heard = _Heard()
    transcriber = Transcriber(cache_dir=tmp_path / "t")
    report = await ingest(
        store, embedder, kb, [folder], transcriber=transcriber, diarizer=diarizer, progress=heard
    )
    assert [r.status for r in report.results] == ["added"]
    (info,) = await store.list_sources(kb)
    assert info.source.speakers == ("Amara Osei", "Bo Lindqvist")
    assert heard.stages == []  # neither transcribed nor diarized


async def test_ingest_progress_shows_a_diarizing_stage_and_the_count_given_is_kept(
    talk: Talk, store: Store, embedder: SentenceTransformerEmbedder, diarizer: Diarizer, kb: str
) -> None:
    heard = _Heard()
    transcriber = Transcriber(cache_dir=talk.transcripts)
    report = await ingest(
        store,
        embedder,
        kb,
        [talk.conversation.path],
        transcriber=transcriber,
        diarizer=diarizer,
        progress=heard,
        speakers={talk.conversation.path: 3},
    )
    assert [r.status for r in report.results] == ["added"]
    assert "diarizing" in heard.stages
    (info,) = await store.list_sources(kb)
    assert info.source.speakers == ("Speaker 1", "Speaker 2", "Speaker 3")


def test_the_speaker_count_in_metadata(tmp_path: Path) -> None:
    assert parse({"speakers": 3}, "x.meta.json").speaker_count == 3
    assert parse({"speakers": ["Ana", "Bo"]}, "x").speakers == ("Ana", "Bo")
    for bad in (0, 21, True, {"n": 2}):
        with pytest.raises(IngestError) as caught:
            parse({"speakers": bad}, "x.meta.json")
        assert "speakers" in caught.value.reason
    wav = _write(tmp_path / "hum.wav", np.zeros(16_000))
    (tmp_path / "hum.meta.json").write_text('{"speakers": 99}')
    with pytest.raises(IngestError) as caught:
        read_source(wav, transcriber=Transcriber())
    assert "between 1 and 20" in caught.value.reason
    result = runner.invoke(app, ["ingest", str(wav), "--speakers", "0"])
    assert result.exit_code != 0 and "--speakers" in result.stderr


def test_a_kept_transcript_without_words_still_gets_speakers(
    talk: Talk, diarizer: Diarizer
) -> None:
    """A transcript kept before words were: each cue is heard whole, none split."""
    old = Transcript(**{**talk.transcript.__dict__, "words": (), "cue_words": ()})
    from retrieval.ingest.media import decode_audio

    found = diarizer.label(old, lambda: decode_audio(talk.conversation.path), 3)
    assert found is not None and len(found.lines) == len(old.cues)
    assert {x.speaker for x in found.lines} == {"Speaker 1", "Speaker 2", "Speaker 3"}


async def test_a_queued_recording_keeps_the_count_it_was_given(talk: Talk, tmp_path: Path) -> None:
    """The count travels with the job (``--speakers``, the upload option) to the worker."""
    from bot.jobs import JobQueue, JobTable
    from bot.models import Actor
    from bot.sessions import SessionStore

    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        queue = JobQueue(JobTable(sessions.driver))
        [job], _ = await queue.add("team", [talk.conversation.path], Actor("cli"), speakers=3)
        [plain], _ = await queue.add("team", [talk.conversation.path], Actor("cli"))
        again = await JobTable(sessions.driver).get(job.id)
    assert again is not None and again.speakers == 3
    assert plain.id != job.id and plain.speakers is None  # another count: another job
