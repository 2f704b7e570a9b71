"""Meeting QA retrieval on QMSum (validation split, 35 meetings, 237 specific queries):
how well Quorum's real ingest path (WebVTT reader, time-aware chunking) and search find
the gold spans. Reported per system: Recall@k and nDCG@k over chunks (a chunk is
relevant when its utterances overlap a gold span) and span coverage@k (the share of gold
utterances inside the top-k chunks), with the meeting as a source filter and without it.

    .venv/bin/python bench/qmsum.py [--data ../shared/eval/qmsum-val] [--chunk-seconds 60]

QMSum has no timestamps, so each meeting is written as WebVTT with times laid out at
150 words a minute; chunk times map back to utterance indices exactly.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import json
import math
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from retrieval.chunking import ChunkConfig
from retrieval.embed import SentenceTransformerEmbedder
from retrieval.indexer import ingest
from retrieval.ingest.metadata import slug
from retrieval.links import format_timestamp
from retrieval.models import Hit, SearchFilters
from retrieval.search import SearchService
from retrieval.store import Store
from retrieval.weaviate_server import EmbeddedServer, async_client

REPO = Path(__file__).resolve().parent.parent
KB = "qmsum"
WORDS_PER_SECOND = 2.5
console = Console()


@dataclass(frozen=True)
class Meeting:
    id: str
    starts: list[float]  # utterance i starts at starts[i] seconds
    queries: list[tuple[str, set[int]]]  # query text, gold utterance indices


def _vtt_time(seconds: float) -> str:
    ms = int(round(seconds * 1000))
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, ms = divmod(rem, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}.{ms:03d}"


def write_meetings(data: Path, out: Path) -> list[Meeting]:
    """Write each meeting as WebVTT (voice tags for speakers); return the gold spans."""
    out.mkdir(parents=True, exist_ok=True)
    meetings = []
    for path in sorted(data.glob("*.json")):
        raw = json.loads(path.read_text())
        mid = slug(path.stem)  # the id ingest gives the file (covid_2 -> covid-2)
        lines = ["WEBVTT", ""]
        starts: list[float] = []
        t = 0.0
        for utt in raw["meeting_transcripts"]:
            text = " ".join(str(utt["content"]).split())
            starts.append(t)
            duration = max(1.0, len(text.split()) / WORDS_PER_SECOND)
            if text:
                speaker = str(utt["speaker"]).replace(">", "")
                lines += [f"{_vtt_time(t)} --> {_vtt_time(t + duration - 0.01)}"]
                lines += [f"<v {speaker}>{text}</v>", ""]
            t += duration
        (out / f"{mid}.vtt").write_text("\n".join(lines))
        queries = []
        for q in raw["specific_query_list"]:
            gold = {
                i
                for a, b in q["relevant_text_span"]
                for i in range(int(a), int(b) + 1)
                if i < len(starts)
            }
            if gold:
                queries.append((q["query"], gold))
        meetings.append(Meeting(mid, starts, queries))
    return meetings


def utterances(hit: Hit, starts: list[float]) -> set[int]:
    """Utterance indices a chunk covers."""
    start, end = hit.segment.start_s or 0.0, hit.segment.end_s or 0.0
    first = max(0, bisect.bisect_right(starts, start + 1e-6) - 1)
    last = max(first, bisect.bisect_left(starts, end - 1e-6) - 1)
    return set(range(first, last + 1))


@dataclass
class Scores:
    recall: float = 0.0
    ndcg: float = 0.0
    coverage: float = 0.0
    n: int = 0

    def add(self, ranked: list[set[int]], relevant_total: int, gold: set[int], k: int) -> None:
        rel = [bool(u & gold) for u in ranked[:k]]
        dcg = sum(1 / math.log2(i + 2) for i, r in enumerate(rel) if r)
        idcg = sum(1 / math.log2(i + 2) for i in range(min(k, relevant_total)))
        self.recall += sum(rel) / relevant_total if relevant_total else 0.0
        self.ndcg += dcg / idcg if idcg else 0.0
        covered = set().union(*ranked[:k]) if ranked else set()
        self.coverage += len(covered & gold) / len(gold)
        self.n += 1

    def row(self) -> tuple[str, str, str]:
        n = max(1, self.n)
        return f"{self.recall / n:.3f}", f"{self.ndcg / n:.3f}", f"{self.coverage / n:.3f}"


async def evaluate(data: Path, chunk_seconds: float, ks: list[int]) -> None:
    embedder = SentenceTransformerEmbedder.from_path()
    with tempfile.TemporaryDirectory() as tmp:
        meetings = write_meetings(data, Path(tmp) / "vtt")
        by_id = {m.id: m for m in meetings}
        server = EmbeddedServer(Path(tmp) / "weaviate")
        endpoint = await asyncio.to_thread(server.start)
        try:
            async with Store.connect(async_client(endpoint), endpoint.url) as store:
                t0 = time.perf_counter()
                config = ChunkConfig(max_seconds=chunk_seconds, overlap_seconds=chunk_seconds / 6)
                console.print(f"ingesting {len(meetings)} meetings...")
                report = await ingest(store, embedder, KB, [Path(tmp) / "vtt"], chunking=config)
                assert not report.failed, report.failed
                console.print(
                    f"{report.segments:,} chunks in {time.perf_counter() - t0:.0f} s "
                    f"(window {format_timestamp(chunk_seconds)})"
                )
                service = SearchService(store, embedder)
                # every chunk of each meeting, to count the relevant ones per query
                all_chunks: dict[str, list[set[int]]] = {}
                for m in meetings:
                    hits = await service.archive(KB).transcript(m.id, limit=500)
                    all_chunks[m.id] = [utterances(h, m.starts) for h in hits]
                systems = ["hybrid, meeting filter", "BM25, meeting filter"]
                systems += ["vector, meeting filter", "hybrid, no filter"]
                scores = {(s, k): Scores() for s in systems for k in ks}
                total = sum(len(m.queries) for m in meetings)
                kmax = max(ks)
                with Progress(console=console) as progress:
                    task = progress.add_task("querying", total=total)
                    for m in meetings:
                        only = SearchFilters(source_ids=(m.id,))
                        where = await service.build_filter(KB, only)
                        for query, gold in m.queries:
                            relevant = sum(1 for u in all_chunks[m.id] if u & gold)
                            vec = await embedder.embed_query(query)
                            runs = {
                                systems[0]: await service.search(KB, query, only, kmax),
                                systems[1]: await store.bm25(KB, query, where, kmax),
                                systems[2]: await store.near_vector(KB, vec, where, kmax),
                                systems[3]: await service.search(KB, query, None, kmax),
                            }
                            for name, hits in runs.items():
                                ranked = [
                                    utterances(h, by_id[h.source.id].starts)
                                    if h.source.id == m.id
                                    else set()
                                    for h in hits
                                ]
                                for k in ks:
                                    scores[(name, k)].add(ranked, relevant, gold, k)
                            progress.advance(task)
        finally:
            server.stop()
    table = Table(title=f"QMSum val: {total} queries over {len(meetings)} meetings")
    for col in ("system", "k", "Recall@k", "nDCG@k", "span coverage@k"):
        table.add_column(col, justify="left" if col == "system" else "right")
    for name in systems:
        for k in ks:
            table.add_row(name, str(k), *scores[(name, k)].row())
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "eval" / "qmsum-val")
    parser.add_argument("--chunk-seconds", type=float, default=60.0)
    parser.add_argument("--k", default="5,10")
    args = parser.parse_args()
    t0 = time.perf_counter()
    asyncio.run(evaluate(args.data, args.chunk_seconds, [int(k) for k in args.k.split(",")]))
    console.print(f"[dim]{time.perf_counter() - t0:.0f} s[/]")


if __name__ == "__main__":
    main()
