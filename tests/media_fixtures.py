"""Recordings made in the test run: espeak-ng speaks known sentences, stitched into one
WAV with known silences between them (so each sentence's second is known), and PyAV
wraps that sound in video containers. No recording is committed."""

from __future__ import annotations

import shutil
import subprocess
import wave
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

RATE = 22_050  # espeak-ng's own rate


@dataclass(frozen=True)
class Spoken:
    """A WAV of sentences and the second each sentence starts at."""

    path: Path
    starts: tuple[float, ...]
    duration_s: float


def _espeak(text: str, folder: Path, n: int, voice: str = "en-us") -> np.ndarray:
    binary = shutil.which("espeak-ng")
    if binary is None:
        pytest.fail("espeak-ng is not installed: run `make install` (it installs it).")
    out = folder / f".say-{n}.wav"
    subprocess.run([binary, "-v", voice, "-s", "150", "-w", str(out), text], check=True)
    with wave.open(str(out)) as w:
        assert w.getframerate() == RATE and w.getnchannels() == 1 and w.getsampwidth() == 2
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
    out.unlink()
    # espeak pads each utterance with silence; trim it so the start is the first sound.
    loud = np.flatnonzero(np.abs(pcm) > 300)
    return pcm[loud[0] : loud[-1] + 1] if len(loud) else pcm


def speak(
    path: Path,
    sentences: list[str],
    gap_s: float = 2.5,
    lead_s: float = 1.0,
    voices: list[str] | None = None,
) -> Spoken:
    """Speak ``sentences`` (each in its espeak-ng voice, if ``voices`` are given) into a
    16-bit mono WAV at ``path``, ``gap_s`` of quiet room noise between them (recordings
    are never digitally silent)."""
    rng = np.random.default_rng(7)
    pieces: list[np.ndarray] = []
    starts: list[float] = []
    at = 0

    def quiet(seconds: float) -> None:
        nonlocal at
        n = int(seconds * RATE)
        pieces.append(np.zeros(n, np.int16))
        at += n

    quiet(lead_s)
    for n, sentence in enumerate(sentences):
        if n:
            quiet(gap_s)
        said = _espeak(sentence, path.parent, n, voices[n] if voices else "en-us")
        starts.append(at / RATE)
        pieces.append(said)
        at += len(said)
    quiet(1.0)
    pcm = np.concatenate(pieces).astype(np.float64)
    pcm += rng.normal(0, 60, len(pcm))  # a faint hiss
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(np.clip(pcm, -32768, 32767).astype(np.int16).tobytes())
    return Spoken(path, tuple(starts), at / RATE)


def hiss(path: Path, seconds: float) -> Path:
    """A WAV of room tone only: nothing is said."""
    noise = np.random.default_rng(3).normal(0, 60, int(seconds * RATE))
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(noise.astype(np.int16).tobytes())
    return path


def _pcm(wav: Path) -> np.ndarray:
    with wave.open(str(wav)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)


def to_video(wav: Path, out: Path, *, audio: bool = True, seconds: float | None = None) -> Path:
    """A video file (by ``out``'s suffix: mp4, mkv, mov, webm) with a tiny moving picture
    and, unless ``audio`` is False, the WAV's sound as its audio track."""
    pcm = _pcm(wav)
    length = seconds if seconds is not None else len(pcm) / RATE
    webm = out.suffix == ".webm"
    with av.open(str(out), "w") as box:
        vs = box.add_stream("vp8" if webm else "mpeg4", rate=4)
        assert isinstance(vs, av.VideoStream)
        vs.width, vs.height, vs.pix_fmt = 64, 48, "yuv420p"
        aus = None
        if audio:  # every stream is added before the first packet is written
            aus = box.add_stream("libopus" if webm else "aac", rate=48_000 if webm else RATE)
            assert isinstance(aus, av.AudioStream)
            aus.layout = "mono"
        for n in range(int(length * 4)):
            picture = np.full((48, 64, 3), (n * 9) % 255, np.uint8)
            image = av.VideoFrame.from_ndarray(picture, format="rgb24")
            image.pts, image.time_base = n, Fraction(1, 4)
            box.mux(vs.encode(image))
        box.mux(vs.encode(None))
        if aus is not None:
            _mux_sound(box, aus, pcm)
    return out


def _mux_sound(box: av.container.OutputContainer, aus: av.AudioStream, pcm: np.ndarray) -> None:
    """The PCM encoded into ``aus`` and muxed, the encoder flushed."""
    sound = av.AudioFrame.from_ndarray(pcm[None, :], format="s16", layout="mono")
    sound.sample_rate = RATE
    resampler = av.AudioResampler(
        format=aus.format,
        layout="mono",
        rate=aus.rate,
        frame_size=aus.codec_context.frame_size or 1024,
    )
    for part in resampler.resample(sound) + resampler.resample(None):
        box.mux(aus.encode(part))
    box.mux(aus.encode(None))


def to_m4a(wav: Path, out: Path) -> Path:
    """The WAV's sound as AAC in an MP4 container (``.m4a``), as Zoom's audio-only file."""
    with av.open(str(out), "w", format="ipod") as box:
        aus = box.add_stream("aac", rate=RATE)
        assert isinstance(aus, av.AudioStream)
        aus.layout = "mono"
        _mux_sound(box, aus, _pcm(wav))
    return out
