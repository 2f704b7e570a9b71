"""How long a removed meeting's words stay in Weaviate's files, and what forgetting them
sooner costs: Weaviate's own defaults against the settings Quorum gives the embedded
server (``retrieval.store.weaviate.server.FORGETTING``).

    .venv/bin/python bench/forget_bound.py [--meetings 40] [--minutes 20] [--watch 240]

For each setting it starts a weaviate-server of its own, ingests ``--meetings``
synthetic meetings (``bench.synthetic``, WebVTT) through Quorum's ingest, then one
meeting with words found nowhere else, and removes it twice over:

- "at once": removed a second after it was added (its words still in the memtable);
- "later": another such meeting, removed once Weaviate has flushed its words into
  segments (no ``.wal`` holds them; up to 90 s), which only a compaction rewrites.

Then it reads every file under the server's data dir every 2 s, up to ``--watch``
seconds, until none holds the words. Columns: the corpus's ingest time, how long each
removal's words stayed on disk, and the server's files and bytes once it is quiet.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import retrieval.store.weaviate.server as server
from bench.common import temp_store
from bench.synthetic import Talk, meeting, to_vtt
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.indexer import ingest

console = Console()
SECRET = "[00:00:0{n}] Ana Ruiz: The quokka{n} orchestra meets at the marmalade{n} lighthouse.\n"


def holding(folder: Path, words: tuple[bytes, ...]) -> list[Path]:
    """Files under ``folder`` whose bytes hold one of ``words``."""
    found = []
    for f in folder.rglob("*"):
        try:
            if f.is_file() and any(w in f.read_bytes() for w in words):
                found.append(f)
        except OSError:  # gone while read (a compaction)
            continue
    return found


def usage(folder: Path) -> tuple[int, int]:
    files = [f for f in folder.rglob("*") if f.is_file()]
    return len(files), sum(f.stat().st_size for f in files)


async def stays(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    data: Path,
    n: int,
    later: bool,
    watch_s: float,
) -> str:
    """Seconds a removed meeting's words stay on disk (">N" when still there)."""
    doc = data.parent / f"secret{n}.txt"
    doc.write_text(SECRET.format(n=n))
    await ingest(store, embedder, "bench", [doc])
    words = (f"quokka{n}".encode(), f"marmalade{n}".encode())
    index = data / "weaviate"
    for _ in range(90 if later else 1):  # later: until its words are in segments
        if later and not any(f.suffix == ".wal" for f in holding(index, words)):
            break
        await asyncio.sleep(1)
    await store.delete_source("bench", f"secret{n}")
    t0 = time.monotonic()
    while time.monotonic() - t0 <= watch_s:
        if not holding(index, words):
            return f"{time.monotonic() - t0:.0f}"
        await asyncio.sleep(2)
    return f">{watch_s:.0f}"


async def run(label: str, settings: dict[str, str], args: argparse.Namespace) -> list[str]:
    server.FORGETTING = settings  # read when the server's environment is made
    embedder = SentenceTransformerEmbedder.from_path()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        docs = Path(tmp) / "docs"
        docs.mkdir()
        talk = Talk(7)
        for i in range(args.meetings):
            (docs / f"m{i:03d}.vtt").write_text(to_vtt(meeting(talk, args.minutes)))
        async with temp_store(data) as store:
            t0 = time.monotonic()
            await ingest(store, embedder, "bench", sorted(docs.iterdir()))
            took = time.monotonic() - t0
            at_once = await stays(store, embedder, data, 1, False, args.watch)
            later = await stays(store, embedder, data, 2, True, args.watch)
            files, size = usage(data / "weaviate")
    return [label, f"{took:.1f}", at_once, later, str(files), f"{size / 1e6:.1f}"]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--meetings", type=int, default=40)
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--watch", type=float, default=240)
    args = parser.parse_args()
    ours = dict(server.FORGETTING)
    table = Table(title=f"forgetting in Weaviate: {args.meetings} meetings of {args.minutes:g} min")
    for col in ("settings", "ingest s", "at once: s on disk", "later: s on disk", "files", "MB"):
        table.add_column(col, justify="left" if col == "settings" else "right")
    for label, settings in (("Weaviate's defaults", {}), ("Quorum's", ours)):
        console.print(f"[dim]running with {label} settings {settings}[/dim]")
        table.add_row(*await run(label, settings, args))
    console.print(table)


if __name__ == "__main__":
    asyncio.run(main())
