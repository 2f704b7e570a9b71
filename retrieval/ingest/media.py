"""Audio and video files: decoded with PyAV (FFmpeg inside the wheel) a chunk at a time,
transcribed by a ``Transcriber`` into one timed unit per sentence, like the cues of a
WebVTT file. Memory stays flat whatever the recording's length."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import av
import numpy as np
import numpy.typing as npt

from retrieval.errors import IngestError
from retrieval.models import Kind
from retrieval.write.chunking import Unit
from retrieval.write.transcribe import SAMPLE_RATE, Audio, OnProgress, Transcriber, chunked

if TYPE_CHECKING:
    from retrieval.speakers.diarize import Diarizer

AUDIO_SUFFIXES = frozenset({".mp3", ".m4a", ".wav", ".ogg"})
VIDEO_SUFFIXES = frozenset({".webm", ".mp4", ".mov", ".mkv"})
MEDIA_SUFFIXES = AUDIO_SUFFIXES | VIDEO_SUFFIXES
_FIFO_SAMPLES = 500_000  # resample in blocks this large: fast, and a bounded buffer


def file_digest(path: Path, extra: bytes = b"") -> str:
    """sha256 of a file's bytes (then ``extra``), read in blocks: videos can be large."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while block := f.read(1 << 20):
                digest.update(block)
    except OSError as exc:
        raise IngestError(str(path), f"cannot read the file: {exc.strerror or exc}") from exc
    digest.update(extra)
    return digest.hexdigest()


def _ffmpeg_reason(exc: av.FFmpegError) -> str:
    return str(exc.strerror or type(exc).__name__).rstrip(".")


def decode_audio(path: Path) -> Audio:
    """The first audio track of ``path`` as mono 16 kHz float32, decoded chunk by chunk as
    the transcriber asks (``Audio``); an ``IngestError`` saying why when the file is not
    media or has no audio track (at once), or cannot be decoded (when it is reached)."""
    name = str(path)
    container = _open(name)
    with container:
        if not container.streams.audio:
            raise IngestError(name, "no audio track: there is nothing to transcribe")
        stream = container.streams.audio[0]
        has_video = any(
            not (v.disposition & av.stream.Disposition.attached_pic)  # cover art is not video
            for v in container.streams.video
        )
        duration = (
            float(stream.duration * stream.time_base)
            if stream.duration and stream.time_base
            else (container.duration or 0) / av.time_base
        )
    return Audio(chunked(_pieces(name)), has_video, duration)


def _open(name: str) -> av.container.InputContainer:
    try:
        return av.open(name, mode="r", metadata_errors="ignore")
    except av.FFmpegError as exc:
        raise IngestError(
            name, f"not a media file FFmpeg can read ({_ffmpeg_reason(exc)}); is it corrupt?"
        ) from exc


def _pieces(name: str) -> Iterator[npt.NDArray[np.float32]]:
    """The first audio track, resampled, a block at a time (the file open only while
    it is being read)."""
    with _open(name) as container:
        stream = container.streams.audio[0]
        resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
        fifo = av.AudioFifo()
        decoded = 0
        try:
            for frame in container.decode(stream):
                frame.pts = None  # a gap or a jump in time stamps is not an error here
                fifo.write(frame)
                decoded += 1
                if fifo.samples >= _FIFO_SAMPLES:
                    yield from (f.to_ndarray()[0] for f in resampler.resample(fifo.read()))
            if fifo.samples:
                yield from (f.to_ndarray()[0] for f in resampler.resample(fifo.read()))
            yield from (f.to_ndarray()[0] for f in resampler.resample(None))
        except av.error.DecoderNotFoundError as exc:
            raise IngestError(
                name,
                "unsupported audio codec (FFmpeg has no decoder for it); "
                "convert the file to MP3, M4A or WAV",
            ) from exc
        except av.FFmpegError as exc:
            codec = stream.codec_context.name if stream.codec_context else "unknown"
            where = "" if not decoded else f" after {decoded} good frames"
            raise IngestError(
                name, f"the audio track ({codec}) cannot be decoded{where}: {_ffmpeg_reason(exc)}"
            ) from exc


@dataclass(frozen=True)
class Heard:
    """A recording read: its timed units (with speakers when they were found), audio or
    video, and each speaker's voice vector."""

    units: list[Unit]
    kind: Kind
    voices: tuple[tuple[str, tuple[float, ...]], ...] = ()


def read_media(
    path: Path,
    digest: str,
    transcriber: Transcriber,
    on_progress: OnProgress | None = None,
    *,
    diarizer: Diarizer | None = None,
    speakers: int | None = None,
    on_diarize: OnProgress | None = None,
) -> Heard:
    """A recording's sentences as timed units, and whether it is audio or video; with a
    ``diarizer``, each unit's speaker (``speakers``: how many, when the user said)."""
    transcript = transcriber.transcribe(str(path), digest, lambda: decode_audio(path), on_progress)
    units = [Unit(c.text, c.start_s, c.end_s) for c in transcript.cues]
    if not units:
        raise IngestError(str(path), "no speech was recognised in the recording")
    kind: Kind = "video" if transcript.has_video else "audio"
    if diarizer is None:
        return Heard(units, kind)
    found = diarizer.label(transcript, lambda: decode_audio(path), speakers, on_diarize)
    if found is None or not found.lines:
        return Heard(units, kind)
    said = [Unit(x.text, x.start_s, x.end_s, speaker=x.speaker) for x in found.lines]
    voices = tuple((name, tuple(float(v) for v in vec)) for name, vec in found.voices.items())
    return Heard(said, kind, voices)
