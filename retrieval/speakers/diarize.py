"""A transcript's cues labelled with who said them: each cue (or each ~1.5 s of a long
one, cut between words) is heard by CAM++, the vectors are clustered by voice
(``cluster.py``), and every word takes its stretch's speaker. A cue whose words change
speaker is split at that word. Speakers are "Speaker 1", "Speaker 2", ... in order of
first appearance.

The audio is decoded a second time, a chunk at a time (memory stays flat), and only the
stretches that hold words are heard: silence and music with no words make no speakers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from retrieval.speakers.cluster import cluster
from retrieval.speakers.embedder import SpeakerEmbedder, SpeakerModelUnavailable
from retrieval.speakers.fbank import SAMPLE_RATE
from retrieval.write.transcribe import Audio, Transcript

log = logging.getLogger("quorum.speakers")

WINDOW_S = 1.5  # a long cue is heard in stretches about this long, cut between words
LONG_CUE_S = 3.0  # a cue up to this long is heard whole
MIN_HEARD_S = 0.5  # shorter stretches are too short to tell a voice: they take a neighbour's
# The share of finding speakers that decoding the audio again takes, the rest being CAM++
# hearing each stretch (a 90 s recording here: 0.04 s of 4 s): how its progress is told.
READ_SHARE = 0.05
MAX_CLUSTERED = 3000  # stretches clustered at once (the rest join the nearest speaker)

# (seconds done, seconds in all) while the voices are heard.
OnProgress = Callable[[float, float], None]


@dataclass(frozen=True)
class TimedWord:
    """A word and when it was said."""

    start: float
    end: float
    word: str


@dataclass(frozen=True)
class Line:
    """A cue, or a piece of one, with its speaker."""

    start_s: float
    end_s: float
    text: str
    speaker: str | None


@dataclass(frozen=True)
class Diarized:
    """The labelled lines, and each speaker's voice (the mean of its stretches' vectors,
    unit length): what ``retrieval.speakers.voiceprints`` keeps when voices are on."""

    lines: tuple[Line, ...]
    voices: dict[str, npt.NDArray[np.float32]]


@dataclass
class _Stretch:
    cue: int
    words: list[TimedWord]

    @property
    def start(self) -> float:
        return self.words[0].start

    @property
    def end(self) -> float:
        return max(self.words[-1].end, self.words[0].start + 0.01)


def stretches(cues_words: Sequence[Sequence[TimedWord]]) -> list[_Stretch]:
    """Each cue's words as the stretches that are heard: the cue whole, or ~``WINDOW_S``
    pieces of a long one (a short last piece joins the one before)."""
    out: list[_Stretch] = []
    for n, words in enumerate(cues_words):
        if not words:
            continue
        if words[-1].end - words[0].start <= LONG_CUE_S:
            out.append(_Stretch(n, list(words)))
            continue
        pieces: list[list[TimedWord]] = [[]]
        for w in words:
            if pieces[-1] and w.end - pieces[-1][0].start > WINDOW_S:
                pieces.append([])
            pieces[-1].append(w)
        if len(pieces) > 1 and pieces[-1][-1].end - pieces[-1][0].start < WINDOW_S / 2:
            pieces[-2].extend(pieces.pop())
        out.extend(_Stretch(n, p) for p in pieces)
    return out


def _samples(
    chunks: Iterable[npt.NDArray[np.float32]],
    spans: Sequence[tuple[float, float]],
    on_progress: OnProgress | None,
    total_s: float,
) -> list[npt.NDArray[np.float32]]:
    """The audio of each (start, end) span in time order, read from consecutive chunks
    with at most two chunks held."""
    out: list[npt.NDArray[np.float32]] = []
    held = np.zeros(0, dtype=np.float32)
    held_from = 0  # the sample ``held`` starts at
    want = 0
    for chunk in chunks:
        held = np.concatenate([held, chunk])
        held_end = held_from + len(held)
        while want < len(spans) and int(spans[want][1] * SAMPLE_RATE) <= held_end:
            a = max(0, int(spans[want][0] * SAMPLE_RATE) - held_from)
            b = int(spans[want][1] * SAMPLE_RATE) - held_from
            out.append(held[a:b].copy())
            want += 1
        # Keep only what a span still to come may reach back to.
        keep_from = held_end if want >= len(spans) else int(spans[want][0] * SAMPLE_RATE)
        drop = max(0, min(keep_from, held_end) - held_from)
        held, held_from = held[drop:], held_from + drop
        if on_progress:
            on_progress(min(total_s, held_end / SAMPLE_RATE), total_s)
    while want < len(spans):  # words past the end of the sound (a rounding): what is left
        a = max(0, int(spans[want][0] * SAMPLE_RATE) - held_from)
        out.append(held[a:].copy())
        want += 1
    return out


def diarize(
    cues_words: Sequence[Sequence[TimedWord]],
    chunks: Iterable[npt.NDArray[np.float32]],
    embedder: SpeakerEmbedder,
    speakers: int | None = None,
    on_progress: OnProgress | None = None,
    total_s: float = 0.0,
) -> Diarized:
    """Label each cue (given as its words) with its speaker, split where the voice
    changes; ``speakers`` is the count when the user knows it."""
    heard = stretches(cues_words)
    if not heard:
        return Diarized((), {})
    spans = [(s.start, s.end) for s in heard]
    total_s = total_s or spans[-1][1]
    read_to = READ_SHARE * total_s  # most of the time goes to hearing voices, not decoding
    reading = embedding = None
    if on_progress is not None:
        tell = on_progress

        def reading(done_s: float, of_s: float) -> None:
            tell(READ_SHARE * done_s, of_s)

        def embedding(share: float) -> None:
            tell(read_to + share * (total_s - read_to), total_s)

    audio = _samples(chunks, spans, reading, total_s)
    vectors = embedder.embed(audio, embedding)
    long_enough = np.array([s.end - s.start >= MIN_HEARD_S for s in heard])
    if not long_enough.any():
        long_enough[:] = True
    labels = _labels(vectors, long_enough, speakers)
    # Speaker numbers in order of first appearance.
    order = {int(c): f"Speaker {i + 1}" for i, c in enumerate(dict.fromkeys(labels.tolist()))}
    names = [order[int(c)] for c in labels]
    voices: dict[str, npt.NDArray[np.float32]] = {}
    for c, name in order.items():
        mine = (labels == c) & long_enough
        mean = vectors[mine if mine.any() else labels == c].mean(axis=0)
        voices[name] = (mean / max(float(np.linalg.norm(mean)), 1e-12)).astype(np.float32)
    return Diarized(tuple(_lines(heard, names, cues_words)), voices)


def _labels(
    vectors: npt.NDArray[np.float32], long_enough: npt.NDArray[np.bool_], speakers: int | None
) -> npt.NDArray[np.int64]:
    """A cluster per stretch: the long-enough ones clustered (an even sample of at most
    ``MAX_CLUSTERED``), every other one given its nearest cluster's."""
    idx = np.flatnonzero(long_enough)
    if len(idx) > MAX_CLUSTERED:
        idx = idx[np.linspace(0, len(idx) - 1, MAX_CLUSTERED).astype(int)]
    sample = idx
    found = cluster(vectors[sample], speakers)
    k = int(found.max()) + 1
    centroids = np.stack([vectors[sample][found == c].mean(axis=0) for c in range(k)])
    centroids /= np.maximum(np.linalg.norm(centroids, axis=1, keepdims=True), 1e-12)
    labels: npt.NDArray[np.int64] = np.argmax(vectors @ centroids.T, axis=1).astype(np.int64)
    labels[sample] = found
    short = np.flatnonzero(~long_enough)
    for i in short:  # too short to tell: the speaker of the same cue's neighbour, if any
        for j in (i - 1, i + 1):
            if 0 <= j < len(labels) and long_enough[j]:
                labels[i] = labels[j]
                break
    return labels


def _lines(
    heard: Sequence[_Stretch], names: Sequence[str], cues_words: Sequence[Sequence[TimedWord]]
) -> list[Line]:
    """The cues again, each cut where its stretches' speakers change."""
    by_cue: dict[int, list[tuple[_Stretch, str]]] = {}
    for s, name in zip(heard, names, strict=True):
        by_cue.setdefault(s.cue, []).append((s, name))
    lines: list[Line] = []
    for n in range(len(cues_words)):
        parts = by_cue.get(n)
        if not parts:
            continue
        run: list[TimedWord] = []
        speaker = parts[0][1]
        for s, name in parts:
            if name != speaker and run:
                lines.append(_line(run, speaker))
                run = []
            speaker = name
            run.extend(s.words)
        lines.append(_line(run, speaker))
    return lines


def _line(words: Sequence[TimedWord], speaker: str) -> Line:
    text = "".join(w.word for w in words).strip()
    start = round(words[0].start, 2)
    return Line(start, round(max(words[0].start, words[-1].end), 2), text, speaker)


class Diarizer:
    """Finds the speakers of transcripts Quorum made, with CAM++ loaded on first use (once
    per process). Without the model's export it says so once in the log and finds none:
    the recording is still transcribed and searchable."""

    def __init__(self, onnx_path: Path | None = None) -> None:
        self.onnx_path = onnx_path
        self._embedder: SpeakerEmbedder | None = None
        self._missing = False
        self._lock = threading.Lock()

    def _model(self) -> SpeakerEmbedder | None:
        with self._lock:
            if self._embedder is None and not self._missing:
                try:
                    self._embedder = SpeakerEmbedder(self.onnx_path)
                except SpeakerModelUnavailable as exc:
                    log.warning("recordings are transcribed without speakers: %s", exc)
                    self._missing = True
            return self._embedder

    def label(
        self,
        transcript: Transcript,
        decode: Callable[[], Audio],
        speakers: int | None = None,
        on_progress: OnProgress | None = None,
    ) -> Diarized | None:
        """``transcript``'s cues with speakers (None without the model); ``decode`` gives
        the recording's audio again."""
        model = self._model()
        if model is None:
            return None
        cues = [[TimedWord(a, b, w) for a, b, w in said] for said in transcript.words_by_cue()]
        audio = decode()
        return diarize(cues, audio.chunks, model, speakers, on_progress, transcript.duration_s)
