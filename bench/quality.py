"""Retrieval quality on BEIR SciFact (test split): nDCG@10 and Recall@100 for Weaviate's
BM25 alone, our MiniLM vectors alone, and hybrid (relativeScore fusion) at several
alphas, in one run, beside the published figures. Target: best hybrid >= 0.70 nDCG@10.

    .venv/bin/python bench/quality.py [--data ../shared/eval/scifact] [--alphas 0.25,0.5,0.75]

Document vectors are cached in bench/.cache/ (keyed by the corpus file's size and mtime),
so a second run skips encoding.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from retrieval.embed import SentenceTransformerEmbedder
from retrieval.models import Document, Segment, Source
from retrieval.store import Store
from retrieval.weaviate_server import EmbeddedServer, async_client

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / ".cache"
KB = "scifact"
PUBLISHED = [
    ("BM25 (BEIR paper, Elasticsearch)", 0.665, 0.908),
    ("BM25 flat (Anserini)", 0.679, 0.925),
    ("BM25 (bm25s, MTEB)", 0.687, 0.913),
    ("all-MiniLM-L6-v2 dense (MTEB)", 0.645, 0.925),
    ("BM25 + MiniLM cross-encoder (BEIR)", 0.688, 0.908),
]
console = Console()


def load(data: Path) -> tuple[list[dict[str, str]], dict[str, str], dict[str, dict[str, int]]]:
    """Corpus rows, test queries that have judgements, and qrels."""
    with (data / "corpus.jsonl").open() as fh:
        corpus = [json.loads(line) for line in fh]
    qrels: dict[str, dict[str, int]] = defaultdict(dict)
    with (data / "qrels-test.tsv").open() as fh:
        next(fh)
        for line in fh:
            qid, did, score = line.split("\t")
            qrels[qid][did] = int(score)
    queries = {}
    with (data / "queries.jsonl").open() as fh:
        for line in fh:
            row = json.loads(line)
            if row["_id"] in qrels:
                queries[row["_id"]] = row["text"]
    return corpus, queries, dict(qrels)


def ndcg_at(ranked: list[str], rel: dict[str, int], k: int = 10) -> float:
    """nDCG@k with graded relevance (BEIR / pytrec_eval definition)."""
    dcg = sum(rel.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:k]))
    ideal = sorted(rel.values(), reverse=True)[:k]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at(ranked: list[str], rel: dict[str, int], k: int = 100) -> float:
    """Share of relevant documents in the top k."""
    relevant = {d for d, r in rel.items() if r > 0}
    return len(relevant & set(ranked[:k])) / len(relevant) if relevant else 0.0


def doc_text(row: dict[str, str]) -> str:
    """Title and abstract, as BEIR indexes them."""
    return f"{row['title']}. {row['text']}".strip()


def vectors_for(
    embedder: SentenceTransformerEmbedder, corpus: list[dict[str, str]], key: str
) -> np.ndarray:
    """Document vectors, from the cache when present."""
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"scifact-{key}.npy"
    if path.exists():
        cached: np.ndarray = np.load(path)
        return cached
    texts = [doc_text(r) for r in corpus]
    out = []
    with Progress(console=console) as progress:
        task = progress.add_task("encoding corpus", total=len(texts))
        for i in range(0, len(texts), 256):
            out.extend(embedder.encode(texts[i : i + 256]))
            progress.advance(task, len(texts[i : i + 256]))
    arr = np.asarray(out, dtype=np.float32)
    np.save(path, arr)
    return arr


async def evaluate(data: Path, alphas: list[float]) -> None:
    corpus, queries, qrels = load(data)
    embedder = SentenceTransformerEmbedder.from_path()
    stat = (data / "corpus.jsonl").stat()
    vecs = vectors_for(embedder, corpus, f"{stat.st_size}-{int(stat.st_mtime)}")
    qids = sorted(queries)
    qvecs = embedder.encode([queries[q] for q in qids])
    with tempfile.TemporaryDirectory() as tmp:
        server = EmbeddedServer(Path(tmp))
        endpoint = await asyncio.to_thread(server.start)
        try:
            async with Store.connect(async_client(endpoint), endpoint.url) as store:
                console.print(f"indexing {len(corpus):,} documents in Weaviate...")
                source = Source(id="scifact", title="SciFact", kind="document")
                segs = tuple(
                    Segment(source_id=source.id, position=i, text=doc_text(r))
                    for i, r in enumerate(corpus)
                )
                await store.upsert(KB, Document(source, segs), vecs.tolist(), batch_size=500)
                pos_to_id = {i: r["_id"] for i, r in enumerate(corpus)}
                runs: dict[str, dict[str, list[str]]] = {}
                names = ["BM25 (Weaviate)", "vector (MiniLM)"] + [f"hybrid a={a}" for a in alphas]
                with Progress(console=console) as progress:
                    task = progress.add_task("querying", total=len(qids) * len(names))
                    for name in names:
                        runs[name] = {}
                        for qid, qv in zip(qids, qvecs, strict=True):
                            q = queries[qid]
                            if name.startswith("BM25"):
                                hits = await store.bm25(KB, q, None, 100)
                            elif name.startswith("vector"):
                                hits = await store.near_vector(KB, qv, None, 100)
                            else:
                                alpha = float(name.split("=")[1])
                                hits = await store.hybrid(KB, q, qv, None, 100, alpha)
                            runs[name][qid] = [pos_to_id[h.segment.position] for h in hits]
                            progress.advance(task)
        finally:
            server.stop()

    table = Table(title=f"SciFact test ({len(qids)} queries, {len(corpus):,} docs)")
    for col in ("system", "nDCG@10", "Recall@100", "source"):
        table.add_column(col, justify="right" if col != "system" else "left")
    best = ("", 0.0)
    for name, run in runs.items():
        nd = sum(ndcg_at(run[q], qrels[q]) for q in qids) / len(qids)
        rc = sum(recall_at(run[q], qrels[q]) for q in qids) / len(qids)
        if name.startswith("hybrid") and nd > best[1]:
            best = (name, nd)
        table.add_row(f"[bold]{name}[/]", f"{nd:.3f}", f"{rc:.3f}", "this run")
    for name, nd, rc in PUBLISHED:
        table.add_row(name, f"{nd:.3f}", f"{rc:.3f}", "published")
    console.print(table)
    verdict = "meets" if best[1] >= 0.70 else "misses"
    console.print(f"Best hybrid: {best[0]} nDCG@10 {best[1]:.3f} ({verdict} the 0.70 target)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--alphas", default="0.25,0.5,0.75")
    args = parser.parse_args()
    t0 = time.perf_counter()
    asyncio.run(evaluate(args.data, [float(a) for a in args.alphas.split(",")]))
    console.print(f"[dim]{time.perf_counter() - t0:.0f} s[/]")


if __name__ == "__main__":
    main()
