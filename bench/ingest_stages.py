"""Instrumentation for ``bench/ingest.py``: busy time and calls per ingest stage.

Wrappers around what ``retrieval.write.indexer`` calls (the embedder, the store's writes and
lookups, ``read_source``, ``_discover``, ``multilevel.build``), patched in for a bench
run only; none changes what ingest does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.progress import Progress, TaskID

import retrieval.write.indexer as indexer
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.ingest import read_source
from retrieval.models import Document
from retrieval.search.multilevel import build
from retrieval.store.weaviate import WeaviateStore
from retrieval.write.indexer import FileResult


@dataclass
class StageTimes:
    """Busy seconds and calls per ingest stage, and the documents ingest read."""

    discover_s: float = 0.0
    read_s: float = 0.0
    lookup_s: float = 0.0
    lookups: int = 0
    embed_s: float = 0.0
    embeds: int = 0
    embed_texts: int = 0
    levels_s: float = 0.0
    level_embeds: int = 0
    level_texts: list[str] = field(default_factory=list)
    write_s: float = 0.0
    writes: int = 0
    in_levels: bool = False
    docs: list[Document] = field(default_factory=list)


class TimedEmbedder:
    """Wraps an embedder to add up the time ingest spends waiting for vectors."""

    def __init__(self, inner: SentenceTransformerEmbedder, times: StageTimes) -> None:
        self.inner = inner
        self.times = times

    @property
    def dim(self) -> int:
        """Vector length."""
        return self.inner.dim

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Timed pass-through; calls made while building levels are counted apart."""
        t = self.times
        if t.in_levels:
            t.level_embeds += 1
            t.level_texts.extend(texts)
            return await self.inner.embed_documents(texts)
        t0 = time.perf_counter()
        try:
            return await self.inner.embed_documents(texts)
        finally:
            t.embed_s += time.perf_counter() - t0
            t.embeds += 1
            t.embed_texts += len(texts)

    async def embed_query(self, text: str) -> list[float]:
        """Pass-through."""
        return await self.inner.embed_query(text)


class TimedStore(WeaviateStore):
    """A store that adds up the time of the writes and of the stored-source lookups."""

    times: StageTimes

    async def upsert_many(self, *args: Any, **kwargs: Any) -> Any:
        """Timed pass-through."""
        t0 = time.perf_counter()
        try:
            return await super().upsert_many(*args, **kwargs)
        finally:
            self.times.write_s += time.perf_counter() - t0
            self.times.writes += 1

    async def stored_sources(self, *args: Any, **kwargs: Any) -> Any:
        """Timed pass-through."""
        t0 = time.perf_counter()
        try:
            return await super().stored_sources(*args, **kwargs)
        finally:
            self.times.lookup_s += time.perf_counter() - t0
            self.times.lookups += 1


def timed_reader(times: StageTimes) -> Callable[..., Document]:
    """``read_source`` that records its time and the documents it returns."""

    def read(path: Path, **kwargs: Any) -> Document:
        t0 = time.perf_counter()
        try:
            doc = read_source(path, **kwargs)
        finally:
            times.read_s += time.perf_counter() - t0
        times.docs.append(doc)
        return doc

    return read


def timed_discover(times: StageTimes) -> Callable[..., Any]:
    """The indexer's ``_discover``, timed."""
    inner = indexer._discover

    def find(paths: Sequence[Path], roots: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return inner(paths, roots)
        finally:
            times.discover_s += time.perf_counter() - t0

    return find


def timed_levels(times: StageTimes) -> Callable[..., Any]:
    """``retrieval.search.multilevel.build`` as the indexer calls it, timed (its encodes too)."""
    inner = build

    async def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        times.in_levels = True
        try:
            return await inner(*args, **kwargs)
        finally:
            times.in_levels = False
            times.levels_s += time.perf_counter() - t0

    return timed


class RichIngestProgress:
    """Shows ingest's per-file progress on a rich bar."""

    def __init__(self, progress: Progress, task: TaskID) -> None:
        self.progress = progress
        self.task = task

    def started(self, files: int) -> None:
        """Set the bar's length."""
        self.progress.update(self.task, total=files)

    def file_done(self, result: FileResult) -> None:
        """Advance the bar."""
        self.progress.advance(self.task)
