"""Meeting QA retrieval on QMSum (validation split, 35 meetings, 237 specific queries):
how well Quorum's real ingest path (WebVTT reader, time-aware chunking) and search find
the gold spans, at each resolution (turns, windows, topics, summaries) and through the
router that picks them from the question. Reported: hit@1 and hit@5 (a unit overlapping a
gold span ranks first, or in the top 5), span coverage@5 (the share of gold utterances
inside the top 5), nDCG@10, meeting@1 and meeting@5 (a unit of the right meeting ranks
first, or in the top 5: whether the meeting was found at all), and the mean span of the
top 5 in seconds (a bigger unit covers more by being bigger: read coverage beside it). A
summary covers the moments its lines link to, not the whole meeting. With the meeting as
a source filter, and without.

    .venv/bin/python bench/qmsum.py [--data ../shared/eval/qmsum-val] [--chunk-seconds 60]
        [--meetings N] [--limit N] [--show N] [--index DIR]

``--index DIR`` keeps the ingested meetings there, so a second run (a search change to
compare) only asks the questions.

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
from typing import Literal

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from bench.common import KeptIndex, temp_store
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.ingest.metadata import slug
from retrieval.links.links import format_timestamp
from retrieval.models import LEVELS, Hit, Level, SearchFilters
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.chunking import ChunkConfig
from retrieval.write.indexer import ingest

REPO = Path(__file__).resolve().parent.parent
KB = "qmsum"
WORDS_PER_SECOND = 2.5
console = Console(width=120)  # the table is wider than a terminal default


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


def write_meetings(data: Path, out: Path, only: int | None = None) -> list[Meeting]:
    """Write each meeting as WebVTT (voice tags for speakers); return the gold spans."""
    out.mkdir(parents=True, exist_ok=True)
    meetings = []
    for path in sorted(data.glob("*.json"))[:only]:
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
    """Utterance indices a hit covers: its span, or for a summary the moments its lines
    link to (one utterance each)."""

    def at(second: float) -> int:
        return max(0, bisect.bisect_right(starts, second + 1e-6) - 1)

    if hit.segment.level == "summary":
        return {at(m.start_s) for m in hit.segment.marks}
    start, end = hit.segment.start_s or 0.0, hit.segment.end_s or 0.0
    first = at(start)
    last = max(first, bisect.bisect_left(starts, end - 1e-6) - 1)
    return set(range(first, last + 1))


@dataclass
class Scores:
    hit1: float = 0.0
    hit5: float = 0.0
    coverage5: float = 0.0
    ndcg10: float = 0.0
    seconds5: float = 0.0
    meeting1: float = 0.0
    meeting5: float = 0.0
    n: int = 0

    def add(
        self, ranked: list[set[int]], spans: list[float], relevant: int, gold: set[int]
    ) -> None:
        rel = [bool(u & gold) for u in ranked]
        self.hit1 += float(any(rel[:1]))
        self.hit5 += float(any(rel[:5]))
        self.meeting1 += float(any(ranked[:1]))  # a unit of the right meeting covers some
        self.meeting5 += float(any(ranked[:5]))
        covered = set().union(*ranked[:5]) if ranked else set()
        self.coverage5 += len(covered & gold) / len(gold)
        dcg = sum(1 / math.log2(i + 2) for i, r in enumerate(rel[:10]) if r)
        idcg = sum(1 / math.log2(i + 2) for i in range(min(10, max(1, relevant))))
        self.ndcg10 += dcg / idcg
        self.seconds5 += sum(spans[:5]) / max(1, len(spans[:5]))
        self.n += 1

    def row(self) -> list[str]:
        n = max(1, self.n)
        figures = (self.hit1, self.hit5, self.coverage5, self.ndcg10)
        found = (self.meeting1, self.meeting5)
        return [f"{x / n:.3f}" for x in (*figures, *found)] + [f"{self.seconds5 / n:.0f}"]


def _span(hit: Hit) -> float:
    seg = hit.segment
    if seg.level == "summary":
        return 0.0  # its lines point at moments, a few seconds each
    return (seg.end_s or 0.0) - (seg.start_s or 0.0)


async def _units(service: SearchService, meeting: str, level: Level) -> list[Hit]:
    """Every unit of one level of a meeting."""
    found: list[Hit] = []
    while True:
        page = await service.store.fetch_ordered(
            KB, meeting, offset=len(found), limit=500, level=level
        )
        found += page
        if len(page) < 500:
            return found


def _ranges(indices: set[int]) -> list[tuple[int, int]]:
    """Sorted indices as runs of consecutive ones, first and last."""
    runs: list[tuple[int, int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    return runs


def _show(query: str, gold: set[int], m: Meeting, hits: list[Hit], ranked: list[set[int]]) -> None:
    """One question as the scorer saw it (the router, inside its meeting): its gold spans
    in utterances and seconds, the top 5 with theirs, and what was counted."""

    def at(i: int) -> str:
        return format_timestamp(m.starts[min(i, len(m.starts) - 1)])

    spans = ", ".join(f"utt {a}-{b} ({at(a)}-{at(b + 1)})" for a, b in _ranges(gold))
    console.print(f"[bold]{m.id}[/]: {query}\n  gold: {spans}")
    for n, (h, u) in enumerate(zip(hits[:5], ranked[:5], strict=True), 1):
        seg = h.segment
        where = ", ".join(f"utt {a}-{b}" for a, b in _ranges(u)) or "another meeting"
        seconds = f"{format_timestamp(seg.start_s or 0)}-{format_timestamp(seg.end_s or 0)}"
        mark = "RELEVANT" if u & gold else "-"
        console.print(f"  {n}. {seg.level:7} {seconds} {where}: {mark}")
    covered = set().union(*ranked[:5]) if ranked else set()
    first = bool(ranked and ranked[0] & gold)
    top5 = any(u & gold for u in ranked[:5])
    cov = len(covered & gold) / len(gold)
    console.print(f"  scored: hit@1 {int(first)}, hit@5 {int(top5)}, coverage@5 {cov:.3f}")


async def _ingest(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    meetings: list[Meeting],
    folder: Path,
    chunk_seconds: float,
) -> None:
    t0 = time.perf_counter()
    config = ChunkConfig(max_seconds=chunk_seconds, overlap_seconds=chunk_seconds / 6)
    console.print(f"ingesting {len(meetings)} meetings...")
    report = await ingest(store, embedder, KB, [folder], chunking=config)
    assert not report.failed, report.failed
    ingest_s = time.perf_counter() - t0
    hours = sum(m.starts[-1] for m in meetings) / 3600
    console.print(
        f"{report.segments:,} windows in {ingest_s:.0f} s: "
        f"{hours / ingest_s * 3600:.0f} recorded hours per hour of ingest "
        f"(window {format_timestamp(chunk_seconds)})"
    )


async def evaluate(
    data: Path,
    chunk_seconds: float,
    limit: int | None,
    only: int | None,
    only_router: bool,
    show: int = 0,
    index: Path | None = None,
) -> None:
    embedder = SentenceTransformerEmbedder.from_path()
    levels = list(LEVELS)
    with tempfile.TemporaryDirectory() as tmp:
        root = index or Path(tmp)
        kept = KeptIndex(root, f"ingested-{chunk_seconds:g}s-{only or 'all'}")
        meetings = write_meetings(data, root / "vtt", only)
        by_id = {m.id: m for m in meetings}
        async with temp_store(root / "weaviate") as store:
            if not kept.reused(console.print):
                await _ingest(store, embedder, meetings, root / "vtt", chunk_seconds)
                kept.keep()
            service = SearchService(store, embedder)
            relevant_units: dict[tuple[str, str], list[set[int]]] = {}
            for m in meetings:
                for level in levels:
                    hits = await _units(service, m.id, level)
                    relevant_units[(m.id, level)] = [utterances(h, m.starts) for h in hits]
            systems: list[Level | Literal["router"]] = [*levels, "router"]
            if only_router:
                systems = ["router"]
            scopes = ("inside the meeting", "whole split")
            scores = {(sc, s): Scores() for sc in scopes for s in systems}
            queries = [(m, q, g) for m in meetings for q, g in m.queries][:limit]
            with Progress(console=console) as progress:
                task = progress.add_task("querying", total=len(queries))
                for nth, (m, query, gold) in enumerate(queries):
                    for scope in scopes:
                        ids = (m.id,) if scope == scopes[0] else ()
                        for system in systems:
                            chosen: tuple[Level, ...] = () if system == "router" else (system,)
                            f = SearchFilters(source_ids=ids, levels=chosen)
                            hits = await service.search(KB, query, f, 10)
                            ranked = [
                                utterances(h, by_id[h.source.id].starts)
                                if h.source.id == m.id
                                else set()
                                for h in hits
                            ]
                            unit: Level = "window" if system == "router" else system
                            relevant = sum(1 for u in relevant_units[(m.id, unit)] if u & gold)
                            spans = [_span(h) for h in hits]
                            scores[(scope, system)].add(ranked, spans, relevant, gold)
                            if nth < show and scope == scopes[0] and system == "router":
                                _show(query, gold, m, hits, ranked)
                    progress.advance(task)
    table = Table(title=f"QMSum val: {len(queries)} queries over {len(meetings)} meetings")
    columns = ("hit@1", "hit@5", "coverage@5", "nDCG@10", "meeting@1", "meeting@5")
    for col in ("scope", "level", *columns, "top-5 span s"):
        table.add_column(col, justify="left" if col in ("scope", "level") else "right")
    for scope in scopes:
        for system in systems:
            table.add_row(scope, system, *scores[(scope, system)].row())
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "eval" / "qmsum-val")
    parser.add_argument("--chunk-seconds", type=float, default=60.0)
    parser.add_argument("--limit", type=int, default=None, help="only the first N queries")
    parser.add_argument("--meetings", type=int, default=None, help="only the first N meetings")
    parser.add_argument("--router-only", action="store_true", help="skip the per-level rows")
    parser.add_argument(
        "--show", type=int, default=0, help="print the first N questions as scored, to check"
    )
    parser.add_argument(
        "--index",
        type=Path,
        default=None,
        help="keep the ingested meetings in this folder and reuse them on the next run",
    )
    args = parser.parse_args()
    t0 = time.perf_counter()
    asyncio.run(
        evaluate(
            args.data,
            args.chunk_seconds,
            args.limit,
            args.meetings,
            args.router_only,
            args.show,
            args.index,
        )
    )
    console.print(f"[dim]{time.perf_counter() - t0:.0f} s[/]")


if __name__ == "__main__":
    main()
