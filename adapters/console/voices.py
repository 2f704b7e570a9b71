"""The demo's recordings made audible. The sample archive holds transcripts only, so
``quorum demo`` speaks each one with espeak-ng, a voice per speaker, every line placed at
its own second, and keeps the result (AAC in .m4a) as the recording's kept media: its
page then plays the very words a citation quotes. Made once, at demo time; never
committed."""

from __future__ import annotations

import asyncio
import io
import shutil
import subprocess
import uuid
import wave
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import av
import numpy as np

from adapters.http.pages import transcript_lines, units_of
from bot.wiring import Retrieval
from retrieval.links.kept_media import PLAYABLE, RENDITION

RATE = 22_050  # espeak-ng's own
VOICES = ("en-us+m3", "en-gb+f3", "en-us+f4", "en-gb-scotland+m1", "en-us+m7", "en-gb+f2")
WORDS_PER_MIN = 170
MAX_WORDS_PER_MIN = 300


def _say(binary: str, voice: str, text: str, speed: int) -> np.ndarray:
    wav = subprocess.run(
        [binary, "-v", voice, "-s", str(speed), "--stdout", text],
        check=True,
        capture_output=True,
    ).stdout
    with wave.open(io.BytesIO(wav)) as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)


def speak_lines(lines: Sequence[tuple[float, str | None, str]], out: Path) -> None:
    """Speak ``(second, speaker, text)`` lines, each from its second (faster when it would
    run into the next), into ``out`` (.m4a)."""
    binary = shutil.which("espeak-ng")
    if binary is None:
        raise FileNotFoundError("espeak-ng")
    voices: dict[str | None, str] = {}
    for _, speaker, _ in lines:
        voices.setdefault(speaker, VOICES[len(voices) % len(VOICES)])
    end_s = (lines[-1][0] + 15.0) if lines else 1.0
    track = np.zeros(int(end_s * RATE), np.int32)

    def line(i: int) -> np.ndarray:
        start, speaker, text = lines[i]
        room = (lines[i + 1][0] - start) if i + 1 < len(lines) else 15.0
        pcm = _say(binary, voices[speaker], text, WORDS_PER_MIN)
        if len(pcm) > room * RATE:  # said again faster, so it ends before the next line
            faster = min(MAX_WORDS_PER_MIN, int(WORDS_PER_MIN * len(pcm) / (room * RATE)) + 10)
            pcm = _say(binary, voices[speaker], text, faster)
        return pcm

    with ThreadPoolExecutor(max_workers=4) as pool:  # each line is its own espeak-ng process
        for (start, _, _), pcm in zip(lines, pool.map(line, range(len(lines))), strict=True):
            at = int(start * RATE)
            pcm = pcm[: max(0, len(track) - at)]
            track[at : at + len(pcm)] += pcm
    _encode(np.clip(track, -32768, 32767).astype(np.int16), out)


def _encode(pcm: np.ndarray, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    # Hidden and its own: the media store neither counts nor serves it, and the sweep of
    # partial copies takes one a crash left; a failure leaves nothing.
    partial = out.with_name(f".{out.name}.{uuid.uuid4().hex}.part")
    try:
        with av.open(str(partial), "w", format="mp4") as container:
            stream = container.add_stream("aac", rate=RATE, layout="mono")
            stream.bit_rate = 48_000
            for at in range(0, len(pcm), 1024):
                frame = av.AudioFrame.from_ndarray(
                    pcm[at : at + 1024].reshape(1, -1), format="s16", layout="mono"
                )
                frame.sample_rate = RATE
                for packet in stream.encode(frame):
                    container.mux(packet)
            for packet in stream.encode(None):
                container.mux(packet)
        partial.replace(out)
    finally:
        partial.unlink(missing_ok=True)


async def give_voices(r: Retrieval, kb: str) -> list[str]:
    """Speak every recording in ``kb`` that has no media yet, into the media store; the
    titles spoken."""
    if shutil.which("espeak-ng") is None:
        return []
    archive, media = r.search.archive(kb), r.media
    spoken = []
    for info in await archive.sources():
        source = info.source
        if source.kind not in ("video", "audio"):
            continue
        if await asyncio.to_thread(media.find, kb, source, PLAYABLE):
            continue
        lines = transcript_lines(await units_of(archive, source.id))
        said = [(line.start_s, line.speaker, line.text) for line in lines]
        out = media.path(kb, source.content_hash, RENDITION)
        await asyncio.to_thread(speak_lines, said, out)
        spoken.append(source.title)
    return spoken
