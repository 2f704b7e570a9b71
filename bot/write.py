"""The one write path: every add, update and removal of a source goes through ``Writer``,
whichever door it came in by (``quorum ingest`` and ``remove``, the console, chat
uploads, the HTTP API, a job's worker).

Adding is the indexer's read or transcription, chunks, levels, embedding and write under a
generation with its switch-over (``retrieval.write.indexer``), the summary (the model's when one
is configured, extractive otherwise), the recording or document its page serves kept in the
media store (``retrieval.links.kept_media``), the audit entry and the announcement.
Renaming a source's speakers (``relabel``) writes it again from what the store holds;
a source's stored path corrected to where it came from (``show_origins``) is its record's
alone.
Removal is
``Holdings.forget``: every copy of the source's words (its kept media too), and the audit
entry. ``tests/test_architecture.py`` fails when any other module calls the indexer, so the
doors cannot drift apart again.

Announcing is the adapters' business (each platform posts its own way): they register an
``Announcer`` with ``add_announcer``, and the core calls it after each write.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bot.models import Actor
from retrieval.encoding.embed import Embedder
from retrieval.errors import QuorumError
from retrieval.links.kept_media import MediaStore
from retrieval.models import Source
from retrieval.search.search import SearchService
from retrieval.speakers.voiceprints import Voiceprints
from retrieval.store import Store
from retrieval.write.chunking import ChunkConfig
from retrieval.write.indexer import FileResult, IngestReport, Progress, holding, ingest
from retrieval.write.relabel import read_all, relabel
from retrieval.write.summary import Summarizer
from retrieval.write.transcribe import Transcriber

if TYPE_CHECKING:
    from bot.holdings import Forgotten, Holdings
    from retrieval.service import Retrieval
    from retrieval.speakers.diarize import Diarizer

log = logging.getLogger("quorum.write")

Fetcher = Callable[[str], contextlib.AbstractAsyncContextManager[Path]]
"""Downloads what a URL names (``s3://bucket/key``) to a temporary file, removed on exit:
how a job's worker gets a connector's object (never during a poll). One that cannot be
had for good raises ``Unfetchable``; any other error is retried as the job is."""


class Unfetchable(QuorumError):
    """What a URL names cannot be downloaded, and trying again will not help (it was
    deleted, it is too large): the job fails with this sentence."""


Announcer = Callable[[str, Sequence[FileResult]], Awaitable[list[str]]]
"""Called with (kb, the files written) after an add: tells the team; returns one line per
post that failed (a failed post never fails the write)."""


@dataclass
class Written:
    """What one add did: the indexer's report, and the announcements that failed."""

    report: IngestReport
    notices: list[str] = field(default_factory=list)


class Writer:
    """Adds, updates and removes sources: the one door (``bot.write``)."""

    def __init__(
        self,
        *,
        store: Store,
        embedder: Embedder,
        search: SearchService,
        chunking: ChunkConfig | None = None,
        transcriber: Transcriber | None = None,
        holdings: Holdings | None = None,
        summarizer: Summarizer | None = None,
        media: MediaStore | None = None,
        uploads_dir: Path | None = None,
        announcers: Sequence[Announcer] = (),
        diarizer: Diarizer | None = None,
        voiceprints: Voiceprints | None = None,
    ) -> None:
        self.store, self.embedder, self.search = store, embedder, search
        self.chunking, self.transcriber = chunking, transcriber
        self.holdings, self.summarizer = holdings, summarizer
        self.media = media  # what pages serve, kept by the indexer as it writes
        self.uploads_dir = uploads_dir  # chat uploads' kept files (a cancelled job's go)
        self.announcers = list(announcers)
        self.diarizer = diarizer  # speakers for recordings Quorum transcribes
        self.voiceprints = voiceprints  # their voices, kept only with QUORUM_VOICES=on
        self.fetchers: dict[str, Fetcher] = {}  # by URL scheme: "s3"

    @classmethod
    def of(
        cls,
        retrieval: Retrieval,
        *,
        holdings: Holdings | None = None,
        summarizer: Summarizer | None = None,
    ) -> Writer:
        """The writer over a running retrieval layer (its media store keeps pages' files)."""
        return cls(
            store=retrieval.store,
            embedder=retrieval.embedder,
            search=retrieval.search,
            chunking=retrieval.chunking,
            transcriber=retrieval.transcriber,
            holdings=holdings,
            summarizer=summarizer,
            media=retrieval.media,
            uploads_dir=retrieval.config.data_dir / "uploads",
            diarizer=retrieval.diarizer,
            voiceprints=retrieval.voiceprints,
        )

    def add_announcer(self, announcer: Announcer) -> None:
        """Tell the team through ``announcer`` after each add."""
        self.announcers.append(announcer)

    def add_fetcher(self, scheme: str, fetcher: Fetcher) -> None:
        """Download ``scheme://`` URLs a job names through ``fetcher``."""
        self.fetchers[scheme] = fetcher

    async def add(
        self,
        kb: str,
        paths: Sequence[Path],
        by: Actor,
        *,
        progress: Progress | None = None,
        force: bool = False,
        roots: Mapping[Path, Path] | None = None,
        speakers: Mapping[Path, int] | None = None,
        origins: Mapping[Path, str] | None = None,
        ids: Mapping[Path, str] | None = None,
    ) -> Written:
        """Add (or update) the files and folders in ``paths`` to ``kb``; unchanged files
        are skipped unless ``force``. Each file has its own result; a bad file fails alone.
        ``speakers``: how many people speak in a recording, where the user said;
        ``origins``: a downloaded file's URL (a job's ``s3://bucket/key``), the path its
        source shows instead of the temporary download's; ``ids``: the source a file
        becomes unless its metadata names one (a connector's item's own)."""
        report = await ingest(
            self.store,
            self.embedder,
            kb,
            paths,
            chunking=self.chunking,
            progress=progress,
            force=force,
            transcriber=self.transcriber,
            summarizer=self.summarizer,
            media=self.media,
            roots=roots,
            diarizer=self.diarizer,
            voiceprints=self.voiceprints,
            speakers=speakers,
            origins=origins,
            ids=ids,
        )
        self.search.forget_sources(kb)
        if self.holdings is not None:
            await self.holdings.note_ingest(kb, report.results, by)
        notices: list[str] = []
        for announcer in self.announcers:
            try:
                notices += await announcer(kb, report.results)
            except Exception:  # telling the team is a bonus: the sources are in either way
                log.exception("announcing what was added to %s failed", kb)
        return Written(report, notices)

    async def relabel(
        self, kb: str, source: Source, mapping: Mapping[str, str], by: Actor, detail: str
    ) -> Source:
        """Rename (or merge, two labels onto one name) a source's speakers in every unit
        the store holds of it, written whole under a new generation; audited as
        ``detail``. The source as now stored."""
        # Held as an ingest holds it: an ingest of the same source meanwhile would be undone.
        with holding(self.store, kb, source.id, f"a speaker rename ({by})"):
            stored = await read_all(self.store, kb, source)
            renamed = await relabel(self.store, self.embedder, kb, stored, mapping)
        self.search.forget_sources(kb)
        if self.holdings is not None:
            await self.holdings.note_speakers(kb, renamed, by, detail)
        return renamed

    async def show_origins(self, kb: str, origins: Mapping[str, str]) -> list[str]:
        """Sources (``origins``: id -> where it came from, an ``s3://bucket/key``) whose
        stored path is another (an object's written before sources showed their URL shows
        its temporary download's) show where they came from, without being ingested again;
        the ids corrected."""
        stored = await self.store.stored_sources(kb, list(origins))
        fixed = [
            sid
            for sid, was in sorted(stored.items())
            if was.path != origins[sid] and await self.store.set_path(kb, sid, origins[sid])
        ]
        if fixed:
            self.search.forget_sources(kb)
        return fixed

    async def remove(self, kb: str, source_id: str, by: Actor) -> Forgotten:
        """Remove a source and every copy of its words: ``Holdings.forget``, the one
        removal path (``passages`` 0: there was none)."""
        if self.holdings is None:
            raise TypeError("a Writer that removes needs Holdings (Holdings.forget removes)")
        return await self.holdings.forget(kb, source_id, by)
