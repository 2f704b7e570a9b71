"""Quorum's own pages, where a citation opens (``retrieval.links.share`` signs their links):

    GET /v/{token}         a recording's player and transcript, or a document's text
    GET /v/{token}/media   the recording (HTTP Range: 206 Partial Content)
    GET /v/{token}/file    the document file itself (a PDF inline)
    POST /v/{token}/speakers   an admin link's rename of a speaker (``speaker_form``)

Any caller may be hostile. A token that is malformed, tampered with or expired gets a
403 page that says which and nothing more; a source since removed gets 404. A URL never
names a file: the token names a source, and only the copy Quorum kept of that source's
recording or document is served, from its media store (``retrieval.links.kept_media``): opened
without following links, streamed from that descriptor (never a ``.gz``/``.br`` sibling,
never the path it was ingested from). Every response carries the security headers below.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from urllib.parse import urlsplit

from aiohttp import web

from adapters.http import pages_view, shell, speaker_form
from adapters.http.problems import DOWN, EXPIRED, FORBIDDEN, REMOVED, STARTING, refused
from adapters.http.served import Served
from bot.cite.sentences import Sentence, link_second, merge_sentences, sentences_of
from bot.wiring import CoreServices
from retrieval.errors import InvalidInput, QuorumError
from retrieval.links.kept_media import (
    CONTENT_TYPES,
    DOCUMENTS,
    PLAYABLE,
    MediaStore,
    Opened,
    is_recording,
)
from retrieval.links.share import BadLink, Grant
from retrieval.models import Hit, Source
from retrieval.search.search import KbArchive

log = logging.getLogger("quorum.pages")

MAX_UNITS = 5000  # a page reads at most this many stored windows of one source
BLOCK = 256 * 1024  # bytes read and sent at a time
# A player that takes no block for this long is dropped: each stream holds a descriptor,
# and a caller that never reads must not hold one for ever.
WRITE_TIMEOUT_S = 60.0
# ASCII digits only (``\d`` takes any script's), 18 at most: int() of thousands of digits
# raises (Python's limit), and no file is 10**18 bytes.
_RANGE = re.compile(r"bytes=([0-9]{0,18})-([0-9]{0,18})", re.ASCII)
HEADERS = {**shell.HEADERS, "Content-Security-Policy": pages_view.CSP}


class Pages:
    """The page routes over a running core."""

    def __init__(self, server: Served) -> None:
        self.server = server

    def add_routes(self, app: web.Application) -> None:
        """Register the routes (GET and HEAD)."""
        app.router.add_get("/v/{token}", self.page)
        app.router.add_get("/v/{token}/media", self.media)
        app.router.add_get("/v/{token}/file", self.file)
        app.router.add_post("/v/{token}/speakers", self.speakers)

    async def open_link(
        self, request: web.Request
    ) -> tuple[CoreServices, Grant, KbArchive, Source]:
        """The grant a request's token carries and its source, or the refusal page."""
        services = self.server.services
        if services is None:
            raise refused(*STARTING)
        signer = services.retrieval.signer
        if signer is None:
            raise refused(*REMOVED)
        try:
            grant = signer.check(request.match_info["token"])
        except BadLink as exc:
            raise refused(*(EXPIRED if exc.expired else FORBIDDEN)) from None
        try:
            archive = services.retrieval.search.archive(grant.kb)
            info = await services.retrieval.search.current_source(grant.kb, grant.source_id)
        except InvalidInput:  # a knowledge base name the store refuses: nothing there
            raise refused(*REMOVED) from None
        except QuorumError:
            log.warning("listing sources for a page failed", exc_info=True)
            raise refused(*DOWN) from None
        if info is None:
            raise refused(*REMOVED)
        return services, grant, archive, info.source

    async def page(self, request: web.Request) -> web.Response:
        """A recording's or a document's page."""
        return await self.render(request)

    async def speakers(self, request: web.Request) -> web.StreamResponse:
        """An admin link's rename of a speaker (``speaker_form``)."""
        services, grant, _, source = await self.open_link(request)
        return await speaker_form.rename(request, services, grant, source, self.render)

    async def render(self, request: web.Request, status: int = 200, said: str = "") -> web.Response:
        """The page of the request's link; an admin link's recording shows the speakers'
        rename form (``said``: what its last post was told)."""
        services, grant, archive, source = await self.open_link(request)
        try:
            units = await units_of(archive, source.id)
        except QuorumError:  # the store went away between the two reads
            log.warning("reading %s for its page failed", source.id, exc_info=True)
            raise refused(*DOWN) from None
        meta = " · ".join(
            x
            for x in (
                source.recorded_at.isoformat() if source.recorded_at else "",
                ", ".join(source.speakers[:6]),
            )
            if x
        )
        base = f"/v/{request.match_info['token']}"
        timed = any(u.segment.start_s is not None for u in units)
        if source.kind in ("video", "audio") or timed:
            media = services.retrieval.media
            kept = await asyncio.to_thread(media.find, grant.kb, source, PLAYABLE)
            notes = []
            if kept is None and is_recording(source.path):
                notes.append(
                    "Quorum keeps no playable copy of this recording (ingested before Quorum "
                    "kept them, or dropped by its media limits), so it cannot play here; the "
                    "transcript is below."
                )
            host = (urlsplit(source.url).hostname or "") if source.url else ""
            signer = services.retrieval.search.signer
            form = ""
            if grant.admin and source.speakers and signer is not None:
                key = signer.form_key(request.match_info["token"])
                form = pages_view.speaker_form(f"{base}/speakers", source.speakers, key, said)
            body = pages_view.recording(
                title=source.title,
                meta=meta,
                lines=transcript_lines(units),
                media_url=f"{base}/media" if kept else None,
                audio_only=source.kind == "audio"
                or (kept is not None and CONTENT_TYPES[kept].startswith("audio/")),
                notes=notes,
                external=source.url,
                external_host=host.removeprefix("www."),
                form=form,
            )
            policy = pages_view.ADMIN_CSP if form else pages_view.CSP
            return shell.html(status, body, policy=policy)
        media = services.retrieval.media
        kept = await asyncio.to_thread(media.find, grant.kb, source, DOCUMENTS)
        pdf = kept == ".pdf"
        body = pages_view.document(
            title=source.title,
            meta=meta,
            passages=_passages(units),
            file_url=f"{base}/file" if kept else (source.url or None),
            file_label="Open the PDF" if pdf else "Open the original file",
            notes=[],
        )
        return shell.html(200, body, policy=pages_view.CSP)

    async def media(self, request: web.Request) -> web.StreamResponse:
        """The source's kept recording, with Range support."""
        return await self._kept(request, PLAYABLE)

    async def file(self, request: web.Request) -> web.StreamResponse:
        """The source's kept document (a PDF inline)."""
        return await self._kept(request, DOCUMENTS)

    async def _kept(self, request: web.Request, suffixes: frozenset[str]) -> web.StreamResponse:
        services, grant, _, source = await self.open_link(request)
        media: MediaStore = services.retrieval.media
        opened = await _open_kept(media, grant.kb, source, suffixes)
        if opened is None:
            raise refused(*REMOVED)
        try:
            return await _send(request, opened)
        finally:
            os.close(opened.fd)


async def _open_kept(
    media: MediaStore, kb: str, source: Source, suffixes: frozenset[str]
) -> Opened | None:
    """``media.open`` in a thread. The thread runs on when the request is cancelled (the
    player hung up): the descriptor it opens then is closed when it comes."""
    opening = asyncio.ensure_future(asyncio.to_thread(media.open, kb, source, suffixes))
    try:
        return await asyncio.shield(opening)
    except asyncio.CancelledError:
        opening.add_done_callback(_close_unclaimed)
        raise


def _close_unclaimed(opening: asyncio.Future[Opened | None]) -> None:
    if opening.cancelled() or opening.exception() is not None:
        return
    opened = opening.result()
    if opened is not None:
        os.close(opened.fd)


def _span(header: str | None, size: int) -> tuple[int, int] | None:
    """The one byte range a Range header asks for, inclusive; None for the whole file
    (no header, or one this server answers whole: several ranges, another unit, one that
    does not parse, an end before its start — RFC 9110 14.2: an invalid range is ignored).
    ``HTTPRequestRangeNotSatisfiable`` when it starts past the end."""
    m = _RANGE.fullmatch((header or "").strip())
    if m is None or (not m[1] and not m[2]):
        return None
    if not m[1]:  # the last N bytes
        n = int(m[2])
        if n == 0 or size == 0:
            raise _unsatisfiable(size)
        return max(0, size - n), size - 1
    start = int(m[1])
    if m[2] and int(m[2]) < start:
        return None
    if start >= size:
        raise _unsatisfiable(size)
    return start, min(int(m[2]), size - 1) if m[2] else size - 1


def _unsatisfiable(size: int) -> web.HTTPException:
    return web.HTTPRequestRangeNotSatisfiable(
        headers={**HEADERS, "Content-Range": f"bytes */{size}", "Cache-Control": "no-store"}
    )


async def _send(request: web.Request, opened: Opened) -> web.StreamResponse:
    """Stream a kept file's descriptor: whole (200) or one range (206)."""
    span = _span(request.headers.get("Range"), opened.size)
    start, end = span if span is not None else (0, opened.size - 1)
    response = web.StreamResponse(
        status=206 if span is not None else 200,
        headers={
            **HEADERS,
            "Content-Type": opened.content_type,
            "Content-Disposition": "inline",
            "Accept-Ranges": "bytes",
            "Cache-Control": "private, max-age=3600",
        },
    )
    if span is not None:
        response.headers["Content-Range"] = f"bytes {start}-{end}/{opened.size}"
    response.content_length = end - start + 1
    await response.prepare(request)
    if request.method == "HEAD":
        return response
    at = start
    try:
        while at <= end:
            block = await asyncio.to_thread(os.pread, opened.fd, min(BLOCK, end - at + 1), at)
            if not block:
                # The file shrank: the Content-Length sent cannot be met, and a connection
                # left open would have the player wait for bytes that never come. Closing
                # it says the body is short.
                log.warning("a kept file shrank while it was served: the response is cut short")
                _hang_up(request, abort=False)
                return response
            await asyncio.wait_for(response.write(block), WRITE_TIMEOUT_S)
            at += len(block)
        await response.write_eof()
    except ConnectionError:  # the player hung up (it seeks by dropping one range for another)
        pass
    except TimeoutError:
        log.info("a player took nothing for %.0f s: its stream is closed", WRITE_TIMEOUT_S)
        _hang_up(request, abort=True)
    return response


def _hang_up(request: web.Request, *, abort: bool) -> None:
    """End the connection under a response (``abort``: dropping what is still queued)."""
    transport = request.transport
    if transport is not None and abort:
        transport.abort()
    elif transport is not None:
        transport.close()


async def units_of(archive: KbArchive, source_id: str) -> list[Hit]:
    """A source's stored windows in order (paged through the archive)."""
    out: list[Hit] = []
    while len(out) < MAX_UNITS:
        page = await archive.transcript(source_id, offset=len(out), limit=500)
        out.extend(page)
        if len(page) < 500:
            break
    return out


def transcript_lines(units: list[Hit]) -> list[pages_view.Line]:
    """A recording's sentences, once each (windows overlap), with their seconds."""
    said: list[Sentence] = []
    for unit in units:
        merge_sentences(said, sentences_of(unit.segment))
    lines = []
    for s in said:
        if s.start_s is None:
            continue
        second = link_second(s)
        lines.append(pages_view.Line(s.start_s, int(second or 0), s.speaker, s.text))
    return lines


def _passages(units: list[Hit]) -> list[pages_view.Passage]:
    """A document's passages, each once (windows overlap)."""
    said: list[Sentence] = []
    out: list[pages_view.Passage] = []
    for unit in units:
        seg = unit.segment
        before = len(said)
        merge_sentences(said, sentences_of(seg))
        text = " ".join(s.text for s in said[before:]).strip()
        if text:
            out.append(pages_view.Passage(seg.position, seg.page, seg.heading, text))
    return out
