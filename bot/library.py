"""``KbLibrary``: the ``Library`` chat uploads use. Adds one file with the same ingest
``quorum ingest`` runs (recordings transcribed), lists and removes sources, and keeps
uploaded files under ``data_dir/uploads/<kb>/<who>/``. Uploads follow the command line's
identity rule: a re-upload of the same name by the same person is the same file and updates
its source; the same name from someone else (or a file ingested from the command line) is
another file, refused with how to give it its own name, never a silent replace. With
``Holdings`` every add goes to the audit trail and a removal takes every copy of the
source's words (``bot.holdings``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path

from bot.holdings import Holdings
from bot.jobs import Job, JobQueue
from bot.jobs.queue import file_result
from bot.models import Actor, Added, Heard, Waiting
from bot.speakers import Speakers
from bot.voices import Voices
from bot.write import Writer
from retrieval.encoding.embed import Embedder
from retrieval.errors import InvalidInput, QuorumError
from retrieval.ingest.media import MEDIA_SUFFIXES, file_digest
from retrieval.links.kept_media import MediaStore
from retrieval.models import SourceInfo
from retrieval.search.search import SearchService
from retrieval.service import Retrieval
from retrieval.store import Store
from retrieval.write.chunking import ChunkConfig
from retrieval.write.indexer import FileResult
from retrieval.write.transcribe import Transcriber

log = logging.getLogger("quorum.library")

# Per-recording summaries (issue 11) plug in here: (kb, source id) -> the summary, or None.
Summarizer = Callable[[str, str], Awaitable[str | None]]


class _Heard:
    """An ingest ``Progress`` that passes each stage of a recording on: transcription and
    speakers with how far they are, then writing."""

    def __init__(self, heard: Heard | None) -> None:
        self.heard = heard

    def started(self, files: int) -> None:
        pass

    def file_done(self, result: FileResult) -> None:
        pass

    def transcribing(self, path: str, done_s: float, total_s: float) -> None:
        if self.heard is not None:
            self.heard("transcribing", done_s, total_s)

    def diarizing(self, path: str, done_s: float, total_s: float) -> None:
        if self.heard is not None:
            self.heard("diarizing", done_s, total_s)

    def writing(self, path: str) -> None:
        if self.heard is not None:
            self.heard("writing", 0.0, 0.0)


class KbLibrary:
    """Implements ``bot.models.Library`` over the retrieval layer."""

    def __init__(
        self,
        *,
        store: Store,
        embedder: Embedder,
        search: SearchService,
        uploads_dir: Path,
        chunking: ChunkConfig | None = None,
        transcriber: Transcriber | None = None,
        summarize: Summarizer | None = None,
        holdings: Holdings | None = None,
        writer: Writer | None = None,
        jobs: JobQueue | None = None,
        media: MediaStore | None = None,
        voices: Voices | None = None,
    ) -> None:
        self.store, self.embedder, self.search = store, embedder, search
        self.uploads_dir, self.chunking, self.transcriber = uploads_dir, chunking, transcriber
        self.summarize, self.holdings, self.jobs = summarize, holdings, jobs
        self.media = media
        # Every add and removal goes through the one write path (``bot.write``), which
        # keeps each source's recording or document in ``media`` for its page.
        self.writer = writer or Writer(
            store=store,
            embedder=embedder,
            search=search,
            chunking=chunking,
            transcriber=transcriber,
            holdings=holdings,
            media=media,
            uploads_dir=uploads_dir,
        )
        self._speakers = Speakers(writer=self.writer, search=search, voices=voices)

    @classmethod
    def of(
        cls,
        retrieval: Retrieval,
        summarize: Summarizer | None = None,
        holdings: Holdings | None = None,
        writer: Writer | None = None,
        jobs: JobQueue | None = None,
    ) -> KbLibrary:
        """The library over a running retrieval layer; the reply to an upload quotes the
        summary ingest stored for it unless another ``summarize`` is given."""
        search = retrieval.search

        async def stored(kb: str, source_id: str) -> str | None:
            try:
                return (await search.archive(kb).summary(source_id)).segment.text
            except InvalidInput:  # too short to summarise, or no summary yet
                return None

        return cls(
            store=retrieval.store,
            embedder=retrieval.embedder,
            search=retrieval.search,
            uploads_dir=retrieval.config.data_dir / "uploads",
            chunking=retrieval.chunking,
            transcriber=retrieval.transcriber,
            summarize=summarize or stored,
            holdings=holdings,
            writer=writer,
            jobs=jobs,
            media=retrieval.media,
            voices=Voices(retrieval.voiceprints),
        )

    @property
    def speakers(self) -> Speakers:
        """A source's speakers listed, renamed and merged (``/speakers``)."""
        return self._speakers

    def inbox(self, kb: str) -> Path:
        """``uploads/<kb>/``, made on first use."""
        folder = self.uploads_dir / kb
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    async def add(
        self,
        kb: str,
        path: Path,
        heard: Heard | None = None,
        by: Actor | None = None,
        waiting: Waiting | None = None,
        speakers: int | None = None,
    ) -> Added:
        """Ingest ``path`` into ``kb``; a file that cannot be read comes back "failed".
        With jobs, the file is a job a worker runs (``waiting`` hears how many are ahead).
        ``speakers``: how many people speak in a recording, when the person said."""
        who = by or Actor("chat")
        if self.jobs is None:
            count = {path: speakers} if speakers else None
            written = await self.writer.add(kb, [path], who, progress=_Heard(heard), speakers=count)
            return await self._added(kb, path, written.report.results[0])
        queued, _ = await self.jobs.add(kb, [path], who, speakers=speakers)
        if not queued:
            return Added("failed", path.name, reason="the file is gone")
        told: list[int] = []

        async def watch(jobs: list[Job]) -> None:
            job = jobs[0]
            if job.state == "queued" and waiting is not None:
                ahead = await self.jobs.ahead(job) if self.jobs else 0
                if told != [ahead]:
                    told[:] = [ahead]
                    waiting(ahead)

        ended = await self.jobs.settle(queued, _Heard(heard), watch)
        result = file_result(ended[0])
        if result.status == "failed" and result.source_id:  # its id held by another file?
            holder = next(
                (
                    i.source.path
                    for i in await self.store.list_sources(kb)
                    if i.source.id == result.source_id and i.source.path != str(path)
                ),
                None,
            )
            if holder:
                result = replace(result, holder=holder)
        return await self._added(kb, path, result)

    async def _added(self, kb: str, path: Path, result: FileResult) -> Added:
        """What the thread is told of one file's result."""
        if result.status == "failed" and result.holder and result.source_id:
            why = self._clash(kb, result.source_id, result.holder, path)
            return Added("failed", path.name, reason=why)
        if result.status == "failed" or result.source_id is None:
            return Added("failed", path.name, reason=result.reason or "it could not be read")
        info = next(
            (i for i in await self.store.list_sources(kb) if i.source.id == result.source_id),
            None,
        )
        summary = None
        if self.summarize is not None:
            try:
                summary = await self.summarize(kb, result.source_id)
            except Exception:  # a summary is a bonus: the source is in either way
                log.exception("summarizing %s failed", result.source_id)
        heard_like = await self._speakers.suggest(kb, info.source) if info else []
        return Added(
            "unchanged" if result.status == "skipped" else result.status,
            info.source.title if info else path.stem,
            result.source_id,
            info.segments if info else result.segments,
            await asyncio.to_thread(self._duration, path),
            summary,
            link=await self._page(kb, result.source_id),
            suggestions=tuple(str(s) for s in heard_like),
        )

    async def _page(self, kb: str, source_id: str) -> str | None:
        """Where the source opens: its own URL, or Quorum's signed page of it (read with
        its summary; a source too short for one has no link here)."""
        try:
            hit = await self.search.archive(kb).summary(source_id)
        except QuorumError:
            return None
        return hit.source.url or hit.source.view

    def _clash(self, kb: str, source_id: str, holder: str, path: Path) -> str:
        """Why a file whose source id another file holds (or is being added as, at this
        moment) is refused, said for chat."""
        if Path(holder) == path:  # the same person's same file, shared twice at once
            return f"`{source_id}` is being added from this same file right now; wait for it"
        shared = Path(holder).resolve().is_relative_to((self.uploads_dir / kb).resolve())
        fix = f"rename yours and share it again, or /forget {source_id} first to replace it"
        if shared:
            return f"someone else already shared a file as `{source_id}`; {fix}"
        return f"`{source_id}` is already another file, added from the command line; {fix}"

    def _duration(self, path: Path) -> float | None:
        """A recording's length, from the transcript ingest kept."""
        if self.transcriber is None or path.suffix.lower() not in MEDIA_SUFFIXES:
            return None
        kept = self.transcriber.cached(file_digest(path))
        return kept.duration_s if kept else None

    async def sources(self, kb: str) -> list[SourceInfo]:
        """Every source in ``kb``."""
        return await self.store.list_sources(kb)

    async def forget(self, kb: str, source_id: str, by: Actor | None = None) -> int:
        """Remove a source, its chat upload and its page's copy in the media store (with
        ``Holdings``: every copy of its words, written to the audit trail)."""
        who = by or Actor("chat")
        if self.jobs is None:
            return (await self.writer.remove(kb, source_id, who)).passages
        [job] = await self.jobs.settle([await self.jobs.remove(kb, source_id, who)])
        if job.state == "done":
            return job.segments
        if job.error and not job.error.startswith("there is no source"):
            raise QuorumError(job.error)
        return 0
