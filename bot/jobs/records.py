"""What a job is: its kind, what it works on, who asked, where it stands."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from bot.models import Stage

Kind = Literal["add", "update", "remove"]
State = Literal["queued", "running", "done", "failed", "cancelled"]
Lane = Literal["transcribe", "write"]
"""What limits a job: transcriptions (minutes of CPU each) run in their own lane, so
documents and removals never wait behind them."""

STATES: tuple[State, ...] = ("queued", "running", "done", "failed", "cancelled")
ACTIVE: tuple[State, ...] = ("queued", "running")
FINISHED: tuple[State, ...] = ("done", "failed", "cancelled")


@dataclass(frozen=True)
class Job:
    """One job's durable record (a row of ``jobs``)."""

    id: int
    kind: Kind
    lane: Lane
    kb: str
    via: str
    actor: str
    file: str  # the file's path, or the source id a removal names
    root: str | None  # the folder a file's manifest lookups stop at
    force: bool
    dedupe_key: str
    state: State
    progress: float  # 0..1
    total_s: float | None  # a recording's length, once known
    attempts: int
    worker: str | None
    error: str | None  # why it failed, one sentence
    result: str | None  # added, updated, skipped (unchanged) or removed
    source_id: str | None
    segments: int
    detail: str | None  # a removal: what else went (JSON: files, answers, shared_transcript)
    created_at: float
    run_after: float
    started_at: float | None
    heartbeat_at: float | None
    finished_at: float | None
    speakers: int | None = None  # how many people speak in a recording, as the user said
    stage: Stage | None = None  # running: what it does now (``progress`` is that stage's)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Job:
        """A job from its row."""
        return cls(**{**row, "force": bool(row["force"])})

    @property
    def name(self) -> str:
        """The file's name (a removal: the source id)."""
        return Path(self.file).name if self.kind != "remove" else self.file

    def json(self) -> dict[str, Any]:
        """The job as ``quorum jobs --json`` and ``GET /api/jobs`` show it."""
        created = datetime.fromtimestamp(self.created_at, UTC).isoformat(timespec="seconds")
        return {
            "id": self.id,
            "kind": self.kind,
            "kb": self.kb,
            "file": self.name,
            "state": self.state,
            "stage": self.stage,
            "progress": round(self.progress, 3),
            "attempts": self.attempts,
            "worker": self.worker,
            "error": self.error,
            "created_at": created,
            "result": self.result,
            "source_id": self.source_id,
        }


def dedupe_key(kb: str, kind: Kind, content: str) -> str:
    """One active job per knowledge base, kind and content (a file's hash, a source id)."""
    return hashlib.sha256(f"{kb}\0{kind}\0{content}".encode()).hexdigest()


def file_hash(path: Path) -> str:
    """The content hash of a file (its bytes, read in blocks)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()
