"""Audio and video files: decoded with PyAV (FFmpeg inside the wheel), transcribed by a
``Transcriber`` into one timed unit per sentence, like the cues of a WebVTT file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import av
import numpy as np

from retrieval.chunking import Unit
from retrieval.errors import IngestError
from retrieval.models import Kind
from retrieval.transcribe import SAMPLE_RATE, Audio, OnProgress, Transcriber

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
    """The first audio track of ``path`` as mono 16 kHz float32; an ``IngestError``
    saying why when the file is not media, has no audio track, or cannot be decoded."""
    name = str(path)
    try:
        container = av.open(name, mode="r", metadata_errors="ignore")
    except av.FFmpegError as exc:
        raise IngestError(
            name, f"not a media file FFmpeg can read ({_ffmpeg_reason(exc)}); is it corrupt?"
        ) from exc
    with container:
        if not container.streams.audio:
            raise IngestError(name, "no audio track: there is nothing to transcribe")
        stream = container.streams.audio[0]
        has_video = any(
            not (v.disposition & av.stream.Disposition.attached_pic)  # cover art is not video
            for v in container.streams.video
        )
        resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
        fifo = av.AudioFifo()
        blocks: list[np.ndarray] = []
        decoded = 0
        try:
            for frame in container.decode(stream):
                frame.pts = None  # a gap or a jump in time stamps is not an error here
                fifo.write(frame)
                decoded += 1
                if fifo.samples >= _FIFO_SAMPLES:
                    blocks.extend(f.to_ndarray()[0] for f in resampler.resample(fifo.read()))
            if fifo.samples:
                blocks.extend(f.to_ndarray()[0] for f in resampler.resample(fifo.read()))
            blocks.extend(f.to_ndarray()[0] for f in resampler.resample(None))
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
    samples = np.concatenate(blocks).astype(np.float32) if blocks else np.zeros(0, np.float32)
    if len(samples) < SAMPLE_RATE // 10:
        raise IngestError(name, "the audio track is empty (shorter than 0.1 s)")
    return Audio(samples, has_video)


def read_media(
    path: Path, digest: str, transcriber: Transcriber, on_progress: OnProgress | None = None
) -> tuple[list[Unit], Kind]:
    """A recording's sentences as timed units, and whether it is audio or video."""
    transcript = transcriber.transcribe(str(path), digest, lambda: decode_audio(path), on_progress)
    units = [Unit(c.text, c.start_s, c.end_s) for c in transcript.cues]
    if not units:
        raise IngestError(str(path), "no speech was recognised in the recording")
    return units, "video" if transcript.has_video else "audio"
