"""What ``quorum ingest`` shows while it works: files and segments written, and for a
recording being transcribed (then heard for its speakers), the audio minutes done and the
real-time factor, then that it is being written (embedded and stored)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

if TYPE_CHECKING:
    from retrieval.write.indexer import FileResult


def realtime_factor(audio_s: float, wall_s: float) -> float:
    """Audio seconds transcribed per wall second (5.0 = five times faster than real time)."""
    return audio_s / wall_s if wall_s > 0 else 0.0


class IngestProgress:
    """A rich progress display; pass it to ``ingest`` as its progress, inside ``with``."""

    def __init__(self, console: Console) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[done]}"),
            TextColumn("{task.fields[rate]}"),
            TaskProgressColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        self.task = self.progress.add_task("ingest", total=None, done="", rate="")
        self.files = 0
        self.total = 0
        self.segments = 0
        self.t0 = time.perf_counter()
        self.audio: TaskID | None = None
        self.audio_path = ""
        self.audio_stage = ""
        self.audio_t0 = 0.0

    def __enter__(self) -> IngestProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def _show_files(self) -> None:
        done = f"{self.files}/{self.total} files, {self.segments:,} segments"
        rate = self.segments / max(1e-6, time.perf_counter() - self.t0)
        self.progress.update(self.task, done=done, rate=f"{rate:,.0f} seg/s")

    def started(self, files: int) -> None:
        self.total = files
        self.progress.update(self.task, total=files)
        self._show_files()

    def file_done(self, result: FileResult) -> None:
        self.files += 1
        if result.status in ("added", "updated"):
            self.segments += result.segments
        self.progress.update(self.task, advance=1, description=escape(Path(result.path).name[:40]))
        self._show_files()
        if self.audio is not None and result.path == self.audio_path:
            self.progress.remove_task(self.audio)
            self.audio = None

    def transcribing(self, path: str, done_s: float, total_s: float) -> None:
        self._stage("transcribing", path, done_s, total_s)

    def diarizing(self, path: str, done_s: float, total_s: float) -> None:
        self._stage("diarizing", path, done_s, total_s)

    def writing(self, path: str) -> None:
        """A recording's passages are embedded and stored: its bar says so, with no total
        (a document's own line is the files bar)."""
        if self.audio is None or path != self.audio_path or self.audio_stage == "writing":
            return
        self.progress.remove_task(self.audio)
        label = escape(f"writing {Path(path).name[:28]}")
        self.audio = self.progress.add_task(label, total=None, done="", rate="")
        self.audio_stage = "writing"

    def _stage(self, stage: str, path: str, done_s: float, total_s: float) -> None:
        if self.audio is None or path != self.audio_path or stage != self.audio_stage:
            if self.audio is not None:
                self.progress.remove_task(self.audio)
            label = escape(f"{stage} {Path(path).name[:28]}")
            self.audio = self.progress.add_task(label, total=total_s, done="", rate="")
            self.audio_path, self.audio_t0 = path, time.perf_counter()
            self.audio_stage = stage
        factor = realtime_factor(done_s, time.perf_counter() - self.audio_t0)
        self.progress.update(
            self.audio,
            completed=done_s,
            done=f"{done_s / 60:.1f}/{total_s / 60:.1f} min audio",
            rate=f"{factor:.1f}x real time" if done_s else "",
        )
