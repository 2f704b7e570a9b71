"""Export the packaged MiniLM to ONNX, once, at install time (``scripts/install.sh``).

The transformer alone is exported (token vectors out); pooling and normalisation stay in
``retrieval/encoding/onnx_encoder.py``. Before the file is put in place, a few sentences are
encoded both ways and must agree (cosine >= 0.999), so a bad export never reaches a
query: without the file Quorum embeds with torch.

Run: ``python -m retrieval.encoding.onnx_export OUT.onnx [--model-dir DIR]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from retrieval.encoding.embed import load_model, packaged_model_path
from retrieval.encoding.onnx_encoder import OnnxEncoder

CHECK_SENTENCES = (
    "Why did we leave Auth0 for Cognito?",
    "Réunion de planification : le déploiement est reporté à jeudi.",
    "ok",
    " ".join(["the rollback plan was discussed at length by the whole team"] * 40),
)
MIN_COSINE = 0.999


def export(model_dir: Path, out: Path) -> None:
    """Write ``out`` (atomically) from the weights in ``model_dir``, checked against torch."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    # torch (the torch extra): the export runs at install time only.
    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    class TokenVectors(torch.nn.Module):  # type: ignore[misc]  # torch is untyped here
        """The transformer with plain tensor inputs and its last hidden state as output."""

        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(
            self,
            input_ids: torch.Tensor,
            attention_mask: torch.Tensor,
            token_type_ids: torch.Tensor,
        ) -> torch.Tensor:
            return self.inner(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    # Eager attention traces to plain ops; the dummy batch has padding so the traced
    # graph keeps the attention mask (a batch without any could be traced without it).
    model = AutoModel.from_pretrained(
        str(model_dir), local_files_only=True, attn_implementation="eager"
    ).eval()
    dummy = torch.ones((2, 8), dtype=torch.long)
    mask = dummy.clone()
    mask[1, 5:] = 0
    axes = {0: "batch", 1: "tokens"}
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer notes about shapes, fixed by dynamic_axes
        torch.onnx.export(
            TokenVectors(model),
            (dummy, mask, torch.zeros_like(dummy)),
            str(tmp),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "input_ids": axes,
                "attention_mask": axes,
                "token_type_ids": axes,
                "last_hidden_state": axes,
            },
            opset_version=17,
            dynamo=False,
        )
    try:
        _check_against_torch(model_dir, tmp)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)


def _check_against_torch(model_dir: Path, exported: Path) -> None:
    """Refuse an export whose vectors differ from torch's on the check sentences."""
    onnx_vectors = OnnxEncoder(model_dir, exported).encode(CHECK_SENTENCES)
    torch_vectors = load_model(model_dir).encode(
        list(CHECK_SENTENCES), normalize_embeddings=True, convert_to_numpy=True
    )
    for text, a, b in zip(CHECK_SENTENCES, onnx_vectors, torch_vectors, strict=True):
        cos = float(sum(x * float(y) for x, y in zip(a, b, strict=True)))
        if cos < MIN_COSINE:
            raise SystemExit(f"ONNX export disagrees with torch on {text[:40]!r}: {cos:.5f}")


def main(argv: list[str] | None = None) -> int:
    """Command line: export to the given path."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--model-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    export(args.model_dir or packaged_model_path(), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
