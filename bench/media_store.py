"""What the media store costs at ingest: disk and time to keep a recording for its page.

A recording of ``--minutes`` minutes (a spoken minute repeated, quiet room noise between)
is made as a WAV (22 kHz mono, what espeak-ng speaks), an M4A (AAC, 64 kb/s), an MP4 and an
MKV (the same sound beside a tiny moving picture); each is kept the way ingest keeps it
(``MediaStore.keep``: copied and checked against its digest, or, for the MKV, turned
into an AAC rendition with PyAV), into an empty store. Reported per format: the file's
size, what the store keeps (MB, and MB per hour of recording), and the wall seconds to
keep it (per hour of recording). Also: how many bytes per second a page streams from the
store (``/v/{token}/media``'s own read loop: ``os.pread`` in 256 KiB blocks).

Run: ``.venv/bin/python bench/media_store.py [--minutes M]``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import Contention, describe  # noqa: E402
from retrieval.ingest.media import file_digest  # noqa: E402
from retrieval.links.kept_media import MediaStore, render_audio  # noqa: E402
from retrieval.models import Original  # noqa: E402
from tests.media_fixtures import speak, to_video  # noqa: E402

SAID = [
    "Welcome to the planning call for the new warehouse.",
    "The zanzibar launch moves to the second week of June.",
    "Marco owns the billing migration checklist.",
    "We review the quarterly budget on Friday afternoon.",
]


def recording(folder: Path, minutes: float) -> Path:
    """A WAV about ``minutes`` long: the sentences spoken again and again."""
    one = speak(folder / "one.wav", SAID, gap_s=4.0)
    rounds = max(1, round(minutes * 60 / one.duration_s))
    return speak(folder / "meeting.wav", SAID * rounds, gap_s=4.0).path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--minutes", type=float, default=10.0)
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        wav = recording(folder, args.minutes)
        m4a = folder / "meeting.m4a"
        render_audio(wav, m4a)
        files = [
            wav,
            m4a,
            to_video(wav, folder / "meeting.mp4"),
            to_video(wav, folder / "meeting.mkv"),
        ]
        import av

        with av.open(str(wav)) as c:
            hours = float(c.duration or 0) / av.time_base / 3600
        table = Table(title=f"Media store: a {hours * 60:.1f}-minute recording kept for its page")
        for col in (
            "format",
            "file MB",
            "kept as",
            "kept MB",
            "MB per hour",
            "keep s",
            "s per hour",
        ):
            table.add_column(col, justify="right")
        others = []
        for n, path in enumerate(files):
            store = MediaStore(folder / f"store-{n}")
            original = Original(path, file_digest(path))
            content_hash = hashlib.sha256(original.digest.encode()).hexdigest()
            load = Contention(None)
            t0 = time.perf_counter()
            kept = store.keep("bench", content_hash, original)
            took = time.perf_counter() - t0
            others.append(load.others())
            assert kept is not None
            size = kept.stat().st_size / 1e6
            table.add_row(
                path.suffix,
                f"{path.stat().st_size / 1e6:.1f}",
                kept.suffix,
                f"{size:.1f}",
                f"{size / hours:.0f}",
                f"{took:.2f}",
                f"{took / hours:.0f}",
            )
        console.print(table)
        # A page's read loop over the largest kept file.
        biggest = max(
            (p for p in folder.rglob("store-*/*/*") if p.is_file()), key=lambda p: p.stat().st_size
        )
        fd = os.open(biggest, os.O_RDONLY | os.O_NOFOLLOW)
        t0, at, size = time.perf_counter(), 0, os.fstat(fd).st_size
        while at < size:
            at += len(os.pread(fd, 256 * 1024, at))
        os.close(fd)
        rate = size / (time.perf_counter() - t0) / 1e6
        console.print(f"Streaming a kept file's descriptor: {rate:.0f} MB/s ({biggest.suffix}).")
        console.print(describe(others))


if __name__ == "__main__":
    main()
