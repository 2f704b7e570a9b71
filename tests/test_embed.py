"""The packaged embedding model: offline, normalised, concurrent queries batched; ONNX
Runtime gives torch's vectors, a one-shot search never imports torch, and a broken
export costs one log line and a slower start, never an error."""

from __future__ import annotations

import asyncio
import logging
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from retrieval.encoding.embed import SentenceTransformerEmbedder, TorchEncoder, cosine, load_encoder
from retrieval.encoding.rerank import load_cross_encoder
from retrieval.errors import ConfigError
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import ingest


async def test_vectors_are_normalised_and_offline(embedder: SentenceTransformerEmbedder) -> None:
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    (vec,) = await embedder.embed_documents(["The login service moved to Cognito."])
    assert len(vec) == embedder.dim == 384
    assert math.isclose(math.sqrt(sum(x * x for x in vec)), 1.0, abs_tol=1e-4)


async def test_concurrent_queries_are_batched_and_match_single_encodes(
    embedder: SentenceTransformerEmbedder,
) -> None:
    texts = [f"question number {i} about refresh tokens" for i in range(12)]
    calls: list[int] = []
    original = embedder.encode

    def counting(batch: Sequence[str]) -> list[list[float]]:
        calls.append(len(batch))
        return original(batch)

    embedder.encode = counting  # type: ignore[method-assign,assignment]
    try:
        vectors = await asyncio.gather(*(embedder.embed_query(t) for t in texts))
        again = await embedder.embed_query(texts[3].upper())  # cached (case-insensitive)
    finally:
        del embedder.encode
    assert sum(calls) == 12 and len(calls) < 12  # fewer encode calls than queries
    single = original([texts[5]])[0]
    assert max(abs(a - b) for a, b in zip(vectors[5], single, strict=True)) < 1e-4
    assert again == vectors[3]


# Varied on purpose: short, longer than the model's 256 tokens (truncated alike), not
# ASCII, nearly empty, and markup; each is encoded in one mixed batch (padding) and alone.
VARIED = [
    "ok",
    "Why did we leave Auth0 for Cognito?",
    " ".join(f"item {i}: the rollback plan needs a reviewer and a dry run" for i in range(40)),
    "Réunion de planification : le déploiement est reporté à jeudi, à cause de l'été.",
    "東京オフィスの移行は来月に延期されました。",
    "Größenänderung der Datenbank – Straße, Ölpreis 😀🚀",
    "",
    "   \n\t ",
    ".",
    "<https://example.com/a?b=1&c=2> `SELECT * FROM users;` [bold]x[/bold]",
]


def test_onnx_vectors_match_torch(embedder: SentenceTransformerEmbedder) -> None:
    assert embedder.backend == "onnx", "run `make install` to make the ONNX export"
    torch_model = load_encoder(backend="torch")
    assert isinstance(torch_model, TorchEncoder)
    expected = torch_model.encode(VARIED)
    batched = embedder.encode(VARIED)
    for text, a, b in zip(VARIED, batched, expected, strict=True):
        assert cosine(a, b) >= 0.999, text[:40]
        (alone,) = embedder.encode([text])
        assert cosine(alone, b) >= 0.999, text[:40]


def test_a_corrupt_export_falls_back_to_torch_with_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not an onnx graph " * 1000)
    with caplog.at_level(logging.WARNING):
        encoder = load_encoder(onnx_path=bad)
    assert isinstance(encoder, TorchEncoder)
    (record,) = caplog.records
    line = record.getMessage()
    assert str(bad) in line and "torch" in line and "\n" not in line


def _search_in_subprocess(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "import sys; from adapters.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code, "search", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


async def test_quorum_search_runs_without_torch_and_says_why_when_it_must(
    weaviate_env: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    kb: str,
    tmp_path: Path,
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "auth.md").write_text("# Auth\nWe moved the login service to Cognito in March.\n")
    await ingest(store, embedder, kb, [docs])

    env = dict(os.environ)
    found = await asyncio.to_thread(_search_in_subprocess, ["login provider", "--kb", kb], env)
    assert found.returncode == 0, found.stderr[-2000:]
    assert "Cognito" in found.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in found.stderr.splitlines()}
    assert "sentence_transformers" not in imported and "torch" not in imported
    # nor the SDKs search never uses: seconds of start-up for a one-shot search
    assert not imported & {"anthropic", "discord", "slack_sdk", "slack_bolt"}

    bad = tmp_path / "broken.onnx"
    bad.write_bytes(b"\x00garbage" * 100)
    env |= {"QUORUM_EMBED_ONNX_PATH": str(bad)}
    fallback = await asyncio.to_thread(_search_in_subprocess, ["login provider", "--kb", kb], env)
    assert fallback.returncode == 0, fallback.stderr[-2000:]
    assert "Cognito" in fallback.stdout
    said = [ln for ln in fallback.stderr.splitlines() if not ln.startswith("import time:")]
    assert len(said) == 1 and str(bad) in said[0] and "torch" in said[0], said


@pytest.fixture
def no_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process as the runtime dependency set sees it: sentence-transformers (and so
    torch) cannot be imported. `make runtime-check` proves the same in a real runtime."""
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)


@pytest.mark.usefixtures("no_torch")
def test_without_torch_the_onnx_backend_still_embeds(
    embedder: SentenceTransformerEmbedder,
) -> None:
    assert embedder.backend == "onnx", "run `make install` to make the ONNX export"
    encoder = load_encoder()
    assert cosine(encoder.encode(["ok"])[0], embedder.encode(["ok"])[0]) >= 0.9999


@pytest.mark.usefixtures("no_torch")
def test_asking_for_torch_where_it_is_missing_says_so_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as asked:
        load_encoder(backend="torch")
    said = str(asked.value)
    assert "QUORUM_EMBED_BACKEND=torch" in said and "no torch" in said and "\n" not in said

    with pytest.raises(ConfigError) as missing:
        load_encoder(onnx_path=tmp_path / "absent.onnx")
    said = str(missing.value)
    assert str(tmp_path / "absent.onnx") in said and "no torch" in said and "\n" not in said

    model = tmp_path / "cross-encoder"
    model.mkdir()
    (model / "config.json").write_text("{}")
    with pytest.raises(ConfigError) as rerank:
        load_cross_encoder(model)
    assert "QUORUM_RERANK_MODEL_PATH" in str(rerank.value) and "no torch" in str(rerank.value)
