"""How long a removed meeting's words stay in any file of Weaviate's, removed the way a
user removes one (``Writer.remove``, which is ``Holdings.forget``: the knowledge base's
tenant rebuilt without it), and what the rebuild costs per 1,000 passages.

    .venv/bin/python bench/forget_bound.py [--meetings 20] [--minutes 10] [--removals 4]
                                           [--watch 150] [--delete-only]

It starts a weaviate-server of its own with Quorum's settings, adds ``--meetings``
synthetic meetings (``bench.synthetic``, WebVTT) through the write path, then removes
``--removals`` meetings with words found nowhere else, alternately:

- "at once": removed a second after it was added (its words still in the memtable);
- "later": removed once Weaviate has flushed its words into segments (no ``.wal`` holds
  them; up to 90 s), the case a compaction alone left on disk past 150 s.

After each removal it reads every file under the server's data dir every second, up to
``--watch`` seconds, until none holds the words; the table gives each removal's seconds
from the start of the removal (the rebuild included) and the worst. ``--delete-only``
runs the same removals as a plain delete (``Store.delete_source``, no rebuild), as
Quorum did before, for comparison. Then it rebuilds the knowledge base once more and
says what that took per 1,000 passages (windows) and per 1,000 objects (every level).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from bench.common import temp_store
from bench.synthetic import Talk, meeting, to_vtt
from bot.holdings import Holdings
from bot.sessions import Actor, SessionStore
from bot.write import Writer
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore

console = Console()
KB = "bench"
SECRET = (
    "WEBVTT\n\n00:00:01.000 --> 00:00:06.000\n"
    "<v Ana Ruiz>The quokka{n} orchestra meets at the marmalade{n} lighthouse.\n"
)
BY = Actor("cli", "bench")


def holding(folder: Path, words: tuple[bytes, ...]) -> list[Path]:
    """Files under ``folder`` whose bytes hold one of ``words``."""
    found = []
    for f in folder.rglob("*"):
        try:
            if f.is_file() and any(w in f.read_bytes() for w in words):
                found.append(f)
        except OSError:  # gone while read (a compaction, a tenant deleted)
            continue
    return found


async def one_removal(
    writer: Writer, store: WeaviateStore, data: Path, n: int, later: bool, args: argparse.Namespace
) -> tuple[str, float | None, float]:
    """Add a secret meeting, remove it; (case, seconds its words stayed or None when past
    ``--watch``, seconds the removal call took)."""
    doc = data.parent / "secrets" / f"secret{n}.vtt"
    doc.parent.mkdir(exist_ok=True)
    doc.write_text(SECRET.format(n=n))
    await writer.add(KB, [doc], BY)
    words = (f"quokka{n}".encode(), f"marmalade{n}".encode())
    index = data / "weaviate"
    for _ in range(90 if later else 1):  # later: until its words are in segments only
        if later and not any(f.suffix == ".wal" for f in holding(index, words)):
            break
        await asyncio.sleep(1)
    t0 = time.monotonic()
    if args.delete_only:
        await store.delete_source(KB, f"secret{n}")
    else:
        await writer.remove(KB, f"secret{n}", BY)
    call = time.monotonic() - t0
    case = "later" if later else "at once"
    while time.monotonic() - t0 <= args.watch:
        if not holding(index, words):
            return case, time.monotonic() - t0, call
        await asyncio.sleep(1)
    return case, None, call


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--meetings", type=int, default=20)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--removals", type=int, default=4)
    parser.add_argument("--watch", type=float, default=150)
    parser.add_argument("--delete-only", action="store_true")
    args = parser.parse_args()
    embedder = SentenceTransformerEmbedder.from_path()
    how = "a plain delete (no rebuild)" if args.delete_only else "Writer.remove (rebuild)"
    table = Table(title=f"forgetting in Weaviate through {how}: {args.meetings} meetings")
    for col in ("removal", "case", "s until no file holds the words", "s the removal took"):
        table.add_column(col, justify="right")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        docs = Path(tmp) / "docs"
        docs.mkdir()
        talk = Talk(7)
        for i in range(args.meetings):
            (docs / f"m{i:03d}.vtt").write_text(to_vtt(meeting(talk, args.minutes)))
        async with (
            temp_store(data) as store,
            SessionStore.open(data / "sessions.sqlite3") as sessions,
        ):
            search = SearchService(store, embedder)
            holdings = Holdings(store=store, search=search, sessions=sessions, data_dir=data)
            writer = Writer(store=store, embedder=embedder, search=search, holdings=holdings)
            t0 = time.monotonic()
            console.print(f"[dim]adding {args.meetings} meetings of {args.minutes:g} min...[/dim]")
            await writer.add(KB, sorted(docs.iterdir()), BY)
            console.print(f"[dim]added in {time.monotonic() - t0:.0f} s; removing...[/dim]")
            worst: float | None = 0.0
            for n in range(1, args.removals + 1):
                case, stayed, call = await one_removal(writer, store, data, n, n % 2 == 0, args)
                console.print(f"[dim]removal {n} ({case}): {stayed} s[/dim]")
                if stayed is None or worst is None:
                    worst = None
                else:
                    worst = max(worst, stayed)
                shown = f">{args.watch:.0f}" if stayed is None else f"{stayed:.0f}"
                table.add_row(str(n), case, shown, f"{call:.1f}")
            said = f">{args.watch:.0f}" if worst is None else f"{worst:.0f}"
            table.add_row("worst", "", said, "")
            passages = await store.count(KB)
            rebuilt = await store.rebuild(KB, grace_s=0.0)
    console.print(table)
    per = 1000 * rebuilt.seconds
    console.print(
        f"rebuild of {passages:,} passages ({rebuilt.objects:,} objects, every level): "
        f"{rebuilt.seconds:.1f} s = {per / passages:.2f} s per 1,000 passages, "
        f"{per / rebuilt.objects:.2f} s per 1,000 objects"
    )


if __name__ == "__main__":
    asyncio.run(main())
