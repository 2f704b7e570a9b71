"""Conversations made in the test run: Debian's flite speaks each line in its speaker's
voice (kal, awb, rms and slt sound like four different people), with short pauses
between turns and a little room noise, into one 16 kHz WAV; the truth (who said which
words, when) comes with it. No recording is committed."""

from __future__ import annotations

import shutil
import subprocess
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RATE = 16_000
VOICES = ("kal", "awb", "rms", "slt")

# Lines of a team's meeting: enough different words that Whisper hears each turn.
LINES = (
    "Good morning everyone, let us start with the restore drill from last week.",
    "The restore drill went well, we brought the database back in forty minutes.",
    "Forty minutes is too slow, the target in the runbook is twenty.",
    "Most of the time went into copying the snapshot across regions.",
    "Could we keep a warm replica in the second region instead?",
    "A warm replica doubles the storage bill, I would rather compress the snapshot.",
    "Compression helps, but the network link is the real bottleneck here.",
    "Then let us test a faster link before the next drill on Tuesday.",
    "I will ask the network team for a quote by Friday.",
    "Please also write down every manual step you had to take.",
    "There were three manual steps, all of them in the failover script.",
    "Automating those three steps should be our first task next sprint.",
    "Agreed, I will open the tickets this afternoon.",
    "What about the alerting, did anyone get paged during the drill?",
    "Nobody got paged, because the alert threshold is set far too high.",
    "Let us lower the threshold and run the drill again next month.",
    "I can update the dashboard so the whole team sees the recovery time.",
    "Great, that covers the drill, thank you all for the careful work.",
)


@dataclass(frozen=True)
class Turn:
    """One line of the conversation: who said it and when."""

    speaker: int  # 0-based index into the voices used
    text: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class Conversation:
    """A WAV and its truth."""

    path: Path
    turns: tuple[Turn, ...]
    duration_s: float

    def speaker_at(self, second: float) -> int | None:
        """The speaker talking at ``second`` (the nearest turn within 0.3 s), if any."""
        best, gap = None, 0.3
        for t in self.turns:
            d = (
                0.0
                if t.start_s <= second <= t.end_s
                else min(abs(second - t.start_s), abs(second - t.end_s))
            )
            if d <= gap:
                best, gap = t.speaker, d
        return best


def _say(text: str, voice: str, folder: Path) -> np.ndarray:
    binary = shutil.which("flite")
    if binary is None:
        raise RuntimeError("flite is not installed: run `make install` (it installs it).")
    out = folder / f".flite-{voice}.wav"
    subprocess.run([binary, "-voice", voice, "-t", text, "-o", str(out)], check=True)
    with wave.open(str(out)) as w:
        rate = w.getframerate()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float32)
    out.unlink()
    if rate != RATE:  # kal speaks at 8 kHz
        t = np.arange(int(len(pcm) * RATE / rate)) / RATE
        pcm = np.interp(t, np.arange(len(pcm)) / rate, pcm).astype(np.float32)
    loud = np.flatnonzero(np.abs(pcm) > 300)
    return pcm[loud[0] : loud[-1] + 1] if len(loud) else pcm


def converse(
    path: Path,
    order: list[int],
    voices: tuple[str, ...] = VOICES,
    lines: tuple[str, ...] = LINES,
    gap_s: float = 0.6,
    repeat: int = 1,
) -> Conversation:
    """Speak ``lines`` in turn, line ``n`` by ``voices[order[n % len(order)]]`` (the lines
    said ``repeat`` times over), into a WAV at ``path``."""
    rng = np.random.default_rng(11)
    pieces: list[np.ndarray] = []
    turns: list[Turn] = []
    at = 0

    def quiet(seconds: float) -> None:
        nonlocal at
        n = int(seconds * RATE)
        pieces.append(rng.normal(0, 20, n).astype(np.float32))
        at += n

    quiet(0.8)
    said = [line for _ in range(repeat) for line in lines]
    for n, line in enumerate(said):
        who = order[n % len(order)]
        pcm = _say(line, voices[who], path.parent)
        turns.append(Turn(who, line, at / RATE, (at + len(pcm)) / RATE))
        pieces.append(pcm + rng.normal(0, 20, len(pcm)).astype(np.float32))
        at += len(pcm)
        quiet(gap_s)
    audio = np.clip(np.concatenate(pieces), -32768, 32767).astype(np.int16)
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(audio.tobytes())
    return Conversation(path, tuple(turns), len(audio) / RATE)
