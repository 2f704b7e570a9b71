"""The packaged MiniLM on ONNX Runtime: the same vectors as sentence-transformers, without
importing torch (which costs most of a one-shot command's start).

The graph is exported once at install time (``retrieval/encoding/onnx_export.py``, run by
``scripts/install.sh``) from the packaged weights; this module only reads it. Tokenizing
uses the model folder's ``tokenizer.json`` with the ``tokenizers`` package, truncating at
the model's ``max_seq_length``; pooling is the model's own (``1_Pooling``: the mean of
the token vectors under the attention mask), then L2 normalisation, exactly the
``Transformer -> Pooling -> Normalize`` pipeline of its ``modules.json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

EXPORT_NAME = "all-minilm-l6-v2.onnx"


class OnnxUnavailable(Exception):
    """The ONNX export is missing or ONNX Runtime cannot load it (the message says which)."""


def default_export_path() -> Path:
    """Where ``make install`` puts the export: ``share/quorum`` under the environment's
    prefix (the virtualenv links it to the cached dependency set it was made with)."""
    return Path(sys.prefix) / "share" / "quorum" / EXPORT_NAME


def max_seq_length(model_dir: Path) -> int:
    """The model's own truncation length (``sentence_bert_config.json``; 256 for MiniLM)."""
    try:
        config = json.loads((model_dir / "sentence_bert_config.json").read_text())
        return int(config["max_seq_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return 256


def check_pooling(model_dir: Path) -> None:
    """Refuse a model whose pipeline is not mean pooling + normalisation (this encoder
    implements only that one)."""
    modules = json.loads((model_dir / "modules.json").read_text())
    kinds = [m["type"].rsplit(".", 1)[-1] for m in modules]
    if kinds != ["Transformer", "Pooling", "Normalize"]:
        raise OnnxUnavailable(f"the model's pipeline is {' -> '.join(kinds)}, not mean pooling")
    pooling = json.loads((model_dir / modules[1]["path"] / "config.json").read_text())
    modes = [k for k, v in pooling.items() if k.startswith("pooling_mode") and v]
    if modes != ["pooling_mode_mean_tokens"]:
        raise OnnxUnavailable(f"the model pools with {', '.join(modes)}, not the mean")


class OnnxEncoder:
    """Tokenizer + ONNX Runtime session + mean pooling, with sentence-transformers'
    ``encode(texts, normalize_embeddings=True)`` semantics."""

    def __init__(self, model_dir: Path, onnx_path: Path) -> None:
        if not onnx_path.is_file():
            raise OnnxUnavailable(f"no ONNX export at {onnx_path}")
        try:
            check_pooling(model_dir)
        except (OSError, ValueError, KeyError, IndexError) as exc:
            raise OnnxUnavailable(f"cannot read the model's pooling config: {exc}") from exc
        # ONNX Runtime, NumPy and the tokenizer load with the model, not at import.
        import numpy
        import onnxruntime
        from tokenizers import Tokenizer

        self._np = numpy
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only: its warnings are not the user's concern
        # Its worker threads sleep between runs instead of spinning: on a busy machine a
        # spinning thread only takes the core the other one needs. A query's vector cost
        # half the CPU and ~40% less time with 2 cores shared (bench/search.py), and batch
        # throughput did not change.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        try:
            self._session = onnxruntime.InferenceSession(
                str(onnx_path), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own untyped errors for bad files
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise OnnxUnavailable(f"ONNX Runtime cannot load {onnx_path}: {first}") from exc
        self._inputs = {i.name for i in self._session.get_inputs()}
        output = self._session.get_outputs()[0]
        self.dim = int(output.shape[-1]) if isinstance(output.shape[-1], int) else 384
        self._tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length=max_seq_length(model_dir))
        self._pad_id = self._tokenizer.token_to_id("[PAD]") or 0

    def encode(self, texts: Sequence[str], batch_size: int = 64) -> list[list[float]]:
        """Normalised vectors, one per text, in order. Texts are batched longest first so
        each batch pads little (what sentence-transformers does too)."""
        np = self._np
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self._encode_batch([texts[i].strip() for i in idx])
        rows: list[list[float]] = out.tolist()
        return rows

    def _encode_batch(self, texts: list[str]) -> npt.NDArray[np.float32]:
        np = self._np
        encodings = self._tokenizer.encode_batch(texts)
        width = max(len(e.ids) for e in encodings)
        ids = np.full((len(texts), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(texts), width), dtype=np.int64)
        types = np.zeros((len(texts), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = e.attention_mask
            types[row, :n] = e.type_ids
        feeds: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = types
        (tokens,) = self._session.run(["last_hidden_state"], feeds)
        weights = mask[:, :, None].astype(np.float32)
        summed = (tokens * weights).sum(axis=1)
        counts = np.clip(weights.sum(axis=1), 1e-9, None)
        pooled = summed / counts
        norms = np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        result: npt.NDArray[Any] = (pooled / norms).astype(np.float32)
        return result
