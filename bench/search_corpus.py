"""The archive ``bench/search.py`` searches: seeded synthetic meetings, their vectors and
their levels, written into Weaviate through the product's own write path.

Text: 100 segments per source of meeting talk (``bench/synthetic.py``), 2-4 sentences from
a few speakers each, with dates and speakers set, so BM25, speaker and date filters see
real words and names. Always real text, at every size.

Vectors: the first ``real`` segments (100k by default) get vectors from the real model,
encoded once and cached as ``.npy`` shards. Encoding a million texts with MiniLM on two
cores would take days, so every segment past ``real`` gets a *derived* vector: one of the
real vectors picked at random (seeded per shard), plus seeded Gaussian noise of norm
``NOISE`` (0.75: a cosine of 0.8 to its base, 0.64 between two derived from the same
base, near the 0.69 a real vector has to its nearest real neighbour here), renormalised.
The HNSW graph thus holds MiniLM's own distribution of directions (its clusters and its
anisotropy), each real vector with a cloud of neighbours, instead of uniform random vectors
that no embedding model produces. A derived vector does not match its own text: latency
is measured here, not quality.

Levels, as the product's ingest builds them (``retrieval.search.multilevel``) without encoding
anything: the turns worth a unit (each sharing the vector of its window), topics by
TextTiling over the window vectors (a topic's vector the mean of its windows'), and a
summary unit per source. Topic titles are a topic's first sentence rather than its most
central one (which would need the model).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.synthetic import GENERATOR_VERSION, Talk, meeting_date, meeting_title
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.models import Document, Segment, Source
from retrieval.search.multilevel import MIN_WINDOWS
from retrieval.store import Embedded
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.chunking import split_sentences
from retrieval.write.levels import mean_vector, searchable, topics, turn_vectors
from retrieval.write.summary import MAX_TOPICS, Line, summary_unit, titled

CACHE = Path(__file__).resolve().parent / ".cache"
KB = "bench"
SHARD_SOURCES = 100  # sources per cached vector shard, and per write
NOISE = 0.75  # norm of the noise that derives a vector from a real one
MIN_AVAILABLE_GIB = 1.5  # stop filling before the box runs out of memory


def label(size: int) -> str:
    """``100000`` -> ``"100k"``, ``1000000`` -> ``"1m"``."""
    if size % 1_000_000 == 0:
        return f"{size // 1_000_000}m"
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def source_document(i: int, seed: int, per_source: int) -> Document:
    """Source ``i`` of the archive: a dated meeting with ``per_source`` windows, and its
    turns as ``levels`` (one speaker's contiguous sentences within a window)."""
    talk = Talk(f"search-{seed}-{i}")
    title, day = meeting_title(talk), meeting_date(talk)
    sid = f"bench-{i:05d}"
    rng = talk.rng
    speakers = talk.cast[: rng.randint(2, 5)]
    segments: list[Segment] = []
    all_turns: list[Segment] = []
    t = 0.0
    for pos in range(per_source):
        turns = [(rng.choice(speakers), talk.sentence()) for _ in range(rng.randint(2, 4))]
        named = list(dict.fromkeys(who for who, _ in turns))
        if len(named) > 1:  # as the chunker renders a window with several speakers
            text = "\n".join(f"{who}: {said}" for who, said in turns)
        else:
            text = " ".join(said for _, said in turns)
        length = sum(len(said.split()) for _, said in turns) / 2.5
        segments.append(Segment(sid, pos, text, start_s=t, end_s=t + length, speakers=tuple(named)))
        at = t
        for who, said in turns:
            took = len(said.split()) / 2.5
            last = all_turns[-1] if all_turns else None
            if last is not None and last.speakers == (who,) and last.end_s == at:
                all_turns[-1] = replace(last, text=f"{last.text} {said}", end_s=at + took)
            else:
                all_turns.append(
                    Segment(sid, len(all_turns), said, at, at + took, (who,), level="turn")
                )
            at += took
        t += length
    digest = hashlib.sha256(f"{GENERATOR_VERSION}-{seed}-{i}-{per_source}".encode()).hexdigest()
    source = Source(
        id=sid,
        title=title,
        kind="video",
        url=f"https://video.example/{sid}",
        recorded_at=day,
        speakers=tuple(dict.fromkeys(s for seg in segments for s in seg.speakers)),
        path=f"synthetic/{sid}.vtt",
        content_hash=digest,
    )
    return Document(source, tuple(segments), tuple(all_turns))


def with_levels(doc: Document, vectors: Sequence[Sequence[float]], turns: bool = True) -> Embedded:
    """``doc`` ready to write with every level, as ``retrieval.search.multilevel.build`` makes
    them (the same functions; titles without the model); without its turns unless
    ``turns``."""
    windows = doc.segments
    all_turns = list(doc.levels)
    window_texts = {w.text for w in windows}
    kept = searchable([t for t in all_turns if t.text not in window_texts]) if turns else []
    units: list[Segment] = list(kept)
    unit_vectors = turn_vectors(kept, windows, vectors)
    if len(windows) >= MIN_WINDOWS:
        found, topic_vectors = topics(windows, vectors, all_turns)
        titles = [
            (split_sentences(t.text.split("\n")[0].split(": ", 1)[-1]) or [""])[0] for t in found
        ]
        found = titled(found, titles)
        lines = [Line("topic", title, t.start_s) for t, title in zip(found, titles, strict=True)]
        units += found
        unit_vectors += topic_vectors
        units.append(summary_unit(doc.source, lines[:MAX_TOPICS], windows))
        unit_vectors.append(mean_vector(vectors))
    return Embedded(replace(doc, levels=tuple(units)), vectors, unit_vectors)


def _first_sentence(text: str) -> str:
    said = text.split("\n")[0].split(": ", 1)[-1]  # without its speaker's label
    return (split_sentences(said) or [""])[0]


@dataclass(frozen=True)
class Corpus:
    """The archive's parameters, and where its real vectors are cached."""

    seed: int
    per_source: int
    real: int  # segments whose vectors come from the model; the rest are derived
    turns: bool = True  # write the turn units (twice as many as windows)

    @property
    def folder(self) -> Path:
        """The vector cache for these parameters."""
        return CACHE / f"search-v{GENERATOR_VERSION}-s{self.seed}-p{self.per_source}"

    def real_shards(self, size: int) -> int:
        """Shards of an archive of ``size`` segments whose vectors the model encodes."""
        per_shard = self.per_source * SHARD_SOURCES
        return max(1, (min(self.real, size) + per_shard - 1) // per_shard)

    def marker(self, size: int) -> dict[str, Any]:
        """What a data dir of ``size`` segments must have been built from."""
        real = min(size, self.real_shards(size) * self.per_source * SHARD_SOURCES)
        return {
            "generator": GENERATOR_VERSION,
            "seed": self.seed,
            "per_source": self.per_source,
            "real": real,
            "noise": NOISE if size > real else None,
            "levels": ["turn", "window", "topic", "summary"]
            if self.turns
            else ["window", "topic", "summary"],
        }

    def documents(self, first: int, count: int) -> list[Document]:
        """Sources ``first .. first+count-1``."""
        return [source_document(i, self.seed, self.per_source) for i in range(first, first + count)]

    def encoded(
        self, shard: int, model: SentenceTransformerEmbedder, bar: Callable[[int], None]
    ) -> np.ndarray[Any, Any]:
        """A real shard's vectors (all ``SHARD_SOURCES`` sources), encoded once and cached."""
        path = self.folder / f"vectors-{shard:04d}.npy"
        docs = self.documents(shard * SHARD_SOURCES, SHARD_SOURCES)
        texts = [s.text for d in docs for s in d.segments]
        if path.exists():
            cached: np.ndarray[Any, Any] = np.load(path)
            if cached.shape[0] == len(texts):
                return cached
        self.folder.mkdir(parents=True, exist_ok=True)
        parts: list[np.ndarray[Any, Any]] = []
        # A worker thread that ends with the build, so the queries later see the same
        # OpenMP thread setup as the bot (torch only ever called from worker threads).
        with ThreadPoolExecutor(max_workers=1) as pool:
            for i in range(0, len(texts), 1024):
                chunk = texts[i : i + 1024]
                parts.append(np.asarray(pool.submit(model.encode, chunk).result(), np.float32))
                bar(len(chunk))
        vectors = np.concatenate(parts)
        tmp = path.with_suffix(".tmp.npy")
        np.save(tmp, vectors)
        tmp.replace(path)
        return vectors

    def base(
        self, size: int, model: SentenceTransformerEmbedder, bar: Callable[[int], None]
    ) -> np.ndarray[Any, Any]:
        """The real vectors of an archive of ``size`` segments (encoding the shards not
        cached yet)."""
        shards = self.real_shards(size)
        return np.concatenate([self.encoded(s, model, bar) for s in range(shards)])

    def derived(self, shard: int, count: int, base: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        """``count`` vectors for a shard past the real ones: a real vector picked at random
        plus noise of norm ``NOISE``, renormalised (seeded by the shard)."""
        rng = np.random.default_rng([self.seed, shard])
        picked = base[rng.integers(0, base.shape[0], count)].astype(np.float64)
        noise = rng.standard_normal(picked.shape)
        noise *= NOISE / np.linalg.norm(noise, axis=1, keepdims=True)
        out = picked + noise
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out.astype(np.float32)

    def shard(self, n: int, sources: int, base: np.ndarray[Any, Any]) -> list[Embedded]:
        """Shard ``n``'s first ``sources`` documents, each with its vectors and levels."""
        docs = self.documents(n * SHARD_SOURCES, sources)
        rows = sources * self.per_source
        if (n + 1) * SHARD_SOURCES * self.per_source <= base.shape[0]:
            start = n * SHARD_SOURCES * self.per_source
            vectors = base[start : start + rows]
        else:
            vectors = self.derived(n, rows, base)
        as_lists = vectors.tolist()
        return [
            with_levels(d, as_lists[k * self.per_source : (k + 1) * self.per_source], self.turns)
            for k, d in enumerate(docs)
        ]


def memory() -> tuple[float, float]:
    """(available GiB on the box, GiB resident in the Weaviate server(s) and us)."""
    info = dict(
        line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines() if ":" in line
    )
    available = int(info["MemAvailable"].split()[0]) / 2**20
    rss = 0
    for pid in [os.getpid(), *_children(os.getpid())]:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss += int(line.split()[1])
    return available, rss / 2**20


def _children(pid: int) -> list[int]:
    try:
        found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [int(c) for c in found]


async def fill(
    store: WeaviateStore,
    corpus: Corpus,
    size: int,
    base: np.ndarray[Any, Any],
    progress: Any,
    batch_size: int = 512,
) -> None:
    """Write the first ``size`` segments' sources through ``WeaviateStore.upsert_many`` (the
    ingest's batched write: a shard of 100 sources per call), skipping sources already
    stored with the same content hash; two shards in flight while the next is built."""
    sources = size // corpus.per_source
    shards = (sources + SHARD_SOURCES - 1) // SHARD_SOURCES
    task = progress.add_task("writing segments", total=size, mem="")
    t0 = time.perf_counter()
    written = 0
    queue: asyncio.Queue[list[Embedded] | None] = asyncio.Queue(maxsize=2)

    async def produce(first: int, end: int, writers: int) -> None:
        for n in range(first, end):
            count = min(SHARD_SOURCES, sources - n * SHARD_SOURCES)
            ids = [f"bench-{i:05d}" for i in range(n * SHARD_SOURCES, n * SHARD_SOURCES + count)]
            known = await store.stored_sources(KB, ids)
            if len(known) == count:  # written by an earlier run (the hash is the generator's)
                progress.advance(task, count * corpus.per_source)
                continue
            items = await asyncio.to_thread(corpus.shard, n, count, base)
            todo = [e for e in items if e.doc.source.id not in known]
            progress.advance(task, (count - len(todo)) * corpus.per_source)
            await queue.put(todo)
        for _ in range(writers):
            await queue.put(None)

    async def write_all() -> None:
        while await write_next():
            pass

    async def write_next() -> bool:
        items = await queue.get()
        if items is None:
            return False
        if items:
            results = await store.upsert_many(KB, items, batch_size, known={})
            for r in results:
                if isinstance(r, Exception):
                    raise r
        nonlocal written
        available, rss = memory()
        mem = f"{available:.1f} GiB free, Weaviate+bench {rss:.1f} GiB"
        progress.update(task, advance=sum(len(e.doc.segments) for e in items), mem=mem)
        written += len(items)
        if not progress.console.is_terminal and written % (10 * SHARD_SOURCES) < len(items):
            done = next(t.completed for t in progress.tasks if t.id == task)
            took = time.perf_counter() - t0
            per_s = written * corpus.per_source / took
            progress.console.log(
                f"{int(done):,} of {size:,} segments stored; {per_s:,.0f} segments/s "
                f"(with their turns and topics) over {took / 60:.1f} min; {mem}"
            )
        if available < MIN_AVAILABLE_GIB:
            raise SystemExit(f"only {available:.1f} GiB of memory left: stopped filling")
        return True

    # The first shard alone creates the tenant; then one builds while two write.
    await asyncio.gather(produce(0, 1, 1), write_all())
    await asyncio.gather(produce(1, shards, 2), write_all(), write_all())
    count = await store.count(KB)
    if count != size:
        raise SystemExit(f"the store holds {count} segments, expected {size}")
    progress.remove_task(task)
