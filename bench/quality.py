"""Retrieval quality on BEIR SciFact (test split) through the product's own path, and the
speed of ingesting it: each abstract becomes a Markdown file (``# title`` then the
abstract), the folder goes through ``quorum ingest``'s code (``open_retrieval`` with a
fresh data dir, ``retrieval.write.indexer.ingest`` with the configured chunking), and every
claim is asked of the search service the bot uses, with its defaults. A document's rank
is the rank of its first passage. Reported: nDCG@10 and Recall@100 (over the top 100
passages) for hybrid search (the product), BM25 alone and vectors alone (same index), and
nDCG@10 of a 10-hit hybrid search (the target's figure: an answer asks for few hits, and
Weaviate fuses fewer candidates for it than for 100),
beside the published figures; and ingest files/s and segments/s against bare
``model.encode`` of a sample of the same segment texts (same batch size), timed before
and after the ingest to average out the load of a shared machine.

Targets: hybrid nDCG@10 >= 0.75; ingest >= 0.85 x bare encode.

    .venv/bin/python bench/quality.py [--data ../shared/eval/scifact] [--docs N]

``--docs N`` keeps every judged document plus others up to N (a quick subset; the
figure to quote is the full corpus). The Markdown files are written once to
``bench/.cache/``. ``--index DIR`` keeps the ingest (its data dir) there, so a second run
(a search change to measure) only asks the claims; the ingest speed table is then left
out, since nothing was ingested.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench.common import KeptIndex
from bot.config import load_settings
from bot.wiring import open_retrieval
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.ingest import discover, read_source
from retrieval.models import Hit
from retrieval.service import Retrieval
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.indexer import FileResult, ingest

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / "bench" / ".cache"
KB = "scifact"
K = 100
TEN = "hybrid, 10 hits (as an answer asks)"
ENCODE_SAMPLE = 1024  # bare encode is timed on this many segment texts, before and after
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


def markdown(row: dict[str, str]) -> str:
    """One abstract as a Markdown file: its title as the heading, then the text."""
    title = " ".join(row["title"].split()) or row["_id"]
    return f"# {title}\n\n{row['text'].strip()}\n"


def subset(corpus: list[dict[str, str]], qrels: dict[str, dict[str, int]], docs: int | None):
    """Every judged document plus a seeded sample of the others, ``docs`` in all."""
    if docs is None or docs >= len(corpus):
        return corpus
    judged = {d for rel in qrels.values() for d in rel}
    others = [r for r in corpus if r["_id"] not in judged]
    random.Random(7).shuffle(others)
    keep = judged | {r["_id"] for r in others[: max(0, docs - len(judged))]}
    return [r for r in corpus if r["_id"] in keep]


def write_files(rows: list[dict[str, str]]) -> Path:
    """The corpus as ``<id>.md`` files, written once."""
    folder = CACHE / f"scifact-md-v1-{len(rows)}"
    if (folder / ".complete").exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for row in rows:
        (folder / f"{row['_id']}.md").write_text(markdown(row), encoding="utf-8")
    (folder / ".complete").touch()
    return folder


def encode_rate(embedder: SentenceTransformerEmbedder, texts: list[str]) -> float:
    """Segments per second of bare ``encode`` (the embedder's batch size) over ``texts``."""
    t0 = time.perf_counter()
    embedder.encode(texts)
    return len(texts) / (time.perf_counter() - t0)


def doc_ranking(hits: list[Hit]) -> list[str]:
    """Document ids in the order their first passage appears (a file's id is its name)."""
    return list(dict.fromkeys(h.source.id for h in hits))


class Bar:
    """Rich progress for ingest."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task = progress.add_task("ingesting", total=None)
        self.failed: list[FileResult] = []

    def started(self, files: int) -> None:
        self.progress.update(self.task, total=files)

    def file_done(self, result: FileResult) -> None:
        if result.status == "failed":
            self.failed.append(result)
        self.progress.advance(self.task)


async def evaluate(data: Path, docs: int | None, show: int = 0, index: Path | None = None) -> None:
    corpus, queries, qrels = load(data)
    rows = subset(corpus, qrels, docs)
    folder = write_files(rows)
    qids = sorted(queries)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with tempfile.TemporaryDirectory() as tmp:
        root = index or Path(tmp)
        kept = KeptIndex(root, f"ingested-{len(rows)}")
        os.environ["QUORUM_DATA_DIR"] = str(root)
        settings = load_settings()
        async with open_retrieval(settings, warm=True) as r:
            embedder = await r.embedder.get()
            embedder.encode(["warm-up"] * settings.embed_batch_size)
            speed: Table | None = None
            if not kept.reused(console.print):
                speed = await _ingest(r, embedder, folder)
                kept.keep()

            runs: dict[str, dict[str, list[str]]] = {"hybrid (search service)": {}}
            runs[TEN] = {}
            runs["BM25 alone (Weaviate)"] = {}
            runs["vectors alone (MiniLM)"] = {}
            with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
                task = progress.add_task("querying", total=len(qids))
                for qid in qids:
                    q = queries[qid]
                    hits = await r.search.search(KB, q, k=K)
                    runs["hybrid (search service)"][qid] = doc_ranking(hits)
                    # What a user gets: Weaviate fuses a 10-hit search over fewer candidates.
                    runs[TEN][qid] = doc_ranking(await r.search.search(KB, q, k=10))
                    assert isinstance(r.store, WeaviateStore)  # its halves, apart
                    bm25 = await r.store.bm25(KB, q, None, K)
                    runs["BM25 alone (Weaviate)"][qid] = doc_ranking(bm25)
                    vec = await r.embedder.embed_query(q)
                    near = await r.store.near_vector(KB, vec, None, K)
                    runs["vectors alone (MiniLM)"][qid] = doc_ranking(near)
                    progress.advance(task)

    table = Table(
        title=f"SciFact test through ingest + search ({len(qids)} claims, "
        f"{len(rows):,} abstracts as .md)"
    )
    for col in ("system", "nDCG@10", "Recall@100", "source"):
        table.add_column(col, justify="right" if col != "system" else "left")
    for name, run in runs.items():
        nd = sum(ndcg_at(run[q], qrels[q]) for q in qids) / len(qids)
        rc = sum(recall_at(run[q], qrels[q]) for q in qids) / len(qids)
        recall = "–" if name == TEN else f"{rc:.3f}"
        table.add_row(f"[bold]{name}[/]", f"{nd:.3f}", recall, "this run")
    for name, nd, rc in PUBLISHED:
        table.add_row(name, f"{nd:.3f}", f"{rc:.3f}", "published (full corpus)")
    console.print(table)
    for qid in qids[:show]:  # for checking the scoring by hand
        ranked = runs[TEN][qid]
        marks = " ".join(f"{d}{'*' * qrels[qid].get(d, 0)}" for d in ranked[:10])
        console.print(
            f"[dim]claim {qid}: {queries[qid][:90]!r}\n  relevant {qrels[qid]}; top 10 "
            f"(* relevant): {marks}; nDCG@10 {ndcg_at(ranked, qrels[qid]):.3f}[/]"
        )
    hybrid = sum(ndcg_at(runs[TEN][q], qrels[q]) for q in qids) / len(qids)
    console.print(f"hybrid nDCG@10 {hybrid:.3f} ({'meets' if hybrid >= 0.75 else 'misses'} 0.75)")

    if speed is not None:
        console.print(speed)


async def _ingest(r: Retrieval, embedder: SentenceTransformerEmbedder, folder: Path) -> Table:
    """Ingest ``folder`` through the product's path, timed against bare encode of a sample
    of the same segment texts (before and after, to average out a shared machine's load)."""
    texts = [
        s.text
        for p in discover([folder])
        for s in read_source(p, root=folder, chunking=r.chunking).segments
    ]
    sample = random.Random(3).sample(texts, min(len(texts), ENCODE_SAMPLE))
    encode_rates = [encode_rate(embedder, sample)]
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, TimeElapsedColumn(), console=console) as progress:
        bar = Bar(progress)
        t0 = time.perf_counter()
        report = await ingest(r.store, r.embedder, KB, [folder], chunking=r.chunking, progress=bar)
        ingest_s = time.perf_counter() - t0
    r.search.forget_sources(KB)
    encode_rates.append(encode_rate(embedder, sample))
    files = len(report.results)
    speed = Table(title="Ingest against bare encode (same segment texts, same batch size)")
    for col in ("measure", "value"):
        speed.add_column(col, justify="right" if col == "value" else "left")
    bare = statistics.mean(encode_rates)
    ratio = (report.segments / ingest_s) / bare
    speed.add_row(
        "files (added / failed)", f"{files:,} ({report.count('added'):,} / {len(report.failed)})"
    )
    speed.add_row("segments", f"{report.segments:,}")
    speed.add_row("ingest wall s", f"{ingest_s:.1f}")
    speed.add_row("ingest files/s", f"{files / ingest_s:.1f}")
    speed.add_row("ingest segments/s", f"{report.segments / ingest_s:.1f}")
    speed.add_row(
        f"bare encode segments/s ({len(sample):,} of them, before / after)",
        " / ".join(f"{x:.1f}" for x in encode_rates),
    )
    speed.add_row("ratio (target >= 0.85)", f"{ratio:.2f}")
    for f in report.failed[:5]:
        console.print(f"[red]failed[/] {f.path}: {f.reason}")
    return speed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "eval" / "scifact")
    parser.add_argument("--docs", type=int, default=None, help="a subset of about N abstracts")
    parser.add_argument("--show", type=int, default=0, help="print N claims' rankings")
    parser.add_argument(
        "--index",
        type=Path,
        default=None,
        help="Keep the ingest in this folder and reuse it on the next run.",
    )
    args = parser.parse_args()
    t0 = time.perf_counter()
    asyncio.run(evaluate(args.data, args.docs, args.show, args.index))
    console.print(f"[dim]{time.perf_counter() - t0:.0f} s[/]")


if __name__ == "__main__":
    main()
