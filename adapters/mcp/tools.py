"""What each MCP tool does, in Quorum's own terms (no MCP types here): search, ask,
sources, transcript and summary of one knowledge base, each returning a ``Result``, the
text the model on the other side reads and the same as JSON for programs.

A bad argument is an ``InvalidInput`` with one sentence; ``server`` turns it into the
tool's error. Long results are paged: ``offset`` in, ``next_offset`` out.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import date
from typing import Any, Literal

from adapters.shapes import answer_json, hit_json, info_json
from bot.cite.citations import at_second
from bot.cite.sentences import Sentence, merge_sentences, sentences_of, timed_lines
from bot.errors import InvalidInput
from bot.models import Answer, Core, EventSink, Question, ThreadKey
from bot.wiring import CoreServices
from retrieval.links.links import format_timestamp, locator, view_link
from retrieval.models import Hit, Level, SearchFilters, SourceInfo
from retrieval.search.names import choose_sources, title_matches
from retrieval.write.summary import LABELS, read_lines

PLATFORM = "mcp"  # how metrics, the query log and insights name this door
SESSION_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
TRANSCRIPT_PAGE = 40  # windows per transcript call: a few minutes of talk
SOURCES_PAGE = 50
RESOURCE_WINDOWS = 2000  # a transcript resource holds at most this many windows (hours)


@dataclass(frozen=True)
class Result:
    """A tool's answer: ``text`` for the model, ``data`` as structured content."""

    text: str
    data: dict[str, Any]


@dataclass(frozen=True)
class Reach:
    """One knowledge base, and the running core (awaited: it may still be starting)."""

    kb: str
    running: Callable[[], Awaitable[tuple[Core, CoreServices]]]


def _clip(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _page_link(hit: Hit) -> str | None:
    """Quorum's own signed page of the hit's source, opened at the hit."""
    return view_link(hit.source.view, hit.segment) if hit.source.view else None


def _hit_data(hit: Hit) -> dict[str, Any]:
    return {**hit_json(hit), "page_link": _page_link(hit)}


def _hit_line(n: int, hit: Hit) -> str:
    where = locator(hit.segment)
    head = f"{n}. {hit.source.title}" + (f" @ {where}" if where else "")
    said, speaker = _clip(hit.segment.text), hit.segment.speaker
    who = f"{speaker}: " if speaker and not said.startswith(f"{speaker}:") else ""
    link = _page_link(hit) or hit.link
    return f'{head}\n   {who}"{said}"' + (f"\n   {link}" if link else "")


async def _one_source(services: CoreServices, kb: str, name: str) -> SourceInfo:
    """The source ``name`` (an id or title) names; InvalidInput when none or several."""
    infos = await services.retrieval.search.sources(kb)
    exact = [i for i in infos if name in (i.source.id, i.source.title)]
    found = exact or [i for i in infos if title_matches(name, i.source)]
    if not found:
        raise InvalidInput(
            f"No source {name!r} in this knowledge base; the sources tool lists them."
        )
    if len(found) > 1:
        ids = ", ".join(i.source.id for i in found[:5])
        raise InvalidInput(f"{name!r} matches several sources ({ids}); give one id.")
    return found[0]


async def search(
    reach: Reach,
    query: str,
    *,
    speaker: str | None = None,
    source: str | None = None,
    since: date | None = None,
    until: date | None = None,
    level: Level | None = None,
    k: int = 8,
) -> Result:
    """Hybrid search: passages with their source, speaker, second, quote and links."""
    _, services = await reach.running()
    search = services.retrieval.search
    if source and not (await search.choose_sources(reach.kb, source)).ids:
        raise InvalidInput(
            f"No source {source!r} in this knowledge base; the sources tool lists them."
        )
    filters = SearchFilters(
        speaker=speaker or None,
        source=source or None,
        after=since,
        before=until,
        levels=(level,) if level else (),
    )
    hits = await search.search(reach.kb, query, filters, k)
    data = {"kb": reach.kb, "query": query, "hits": [_hit_data(h) for h in hits]}
    if not hits:
        return Result("Nothing found. Try other words, or fewer filters.", data)
    lines = [_hit_line(n, h) for n, h in enumerate(hits, 1)]
    return Result(f"{len(hits)} passages, best first:\n" + "\n".join(lines), data)


def _answer_text(answer: Answer, session: str) -> str:
    parts = [answer.text]
    if answer.note:
        parts.append(f"({answer.note})")
    if answer.citations:
        cited = [f"[{c.n}] {c.label}" + (f" {c.link}" if c.link else "") for c in answer.citations]
        parts.append("Sources:\n" + "\n".join(cited))
    parts.append(f"session_id: {session} (pass it to ask for a follow-up in this conversation)")
    return "\n\n".join(parts)


async def ask(
    reach: Reach,
    question: str,
    *,
    session_id: str | None = None,
    mode: Literal["quick", "deep", "auto"] = "quick",
    on_event: EventSink | None = None,
) -> Result:
    """Quorum's answer with its citations, in a session of its own (or ``session_id``'s)."""
    if session_id is not None and not SESSION_ID.match(session_id):
        raise InvalidInput(
            "session_id must be 1-128 letters, digits or ._:- (one an earlier ask returned)."
        )
    core, _ = await reach.running()
    session = session_id or uuid.uuid4().hex
    asked = Question(
        text=question,
        thread=ThreadKey(PLATFORM, reach.kb, PLATFORM, session),
        user=PLATFORM,
        kb=reach.kb,
        mode=mode,
    )
    answer = await core.ask(asked, on_event)
    if answer.kind == "error":
        raise InvalidInput(answer.text)  # already one sentence saying what went wrong
    return Result(_answer_text(answer, session), {"session_id": session, **answer_json(answer)})


def _source_data(info: SourceInfo, page: str | None) -> dict[str, Any]:
    return {**info_json(info), "page_link": page}


async def sources(
    reach: Reach,
    *,
    query: str | None = None,
    kind: Literal["video", "audio", "document", "course"] | None = None,
    since: date | None = None,
    until: date | None = None,
    offset: int = 0,
    limit: int = SOURCES_PAGE,
) -> Result:
    """What the knowledge base holds, newest first, filtered and paged."""
    _, services = await reach.running()
    search = services.retrieval.search
    infos = await search.sources(reach.kb)
    picked = [i for i in infos if not kind or i.source.kind == kind]
    if since or until:
        picked = [
            i
            for i in picked
            if i.source.recorded_at
            and (since is None or i.source.recorded_at >= since)
            and (until is None or i.source.recorded_at <= until)
        ]
    if query:
        q = query.casefold()
        named = set(choose_sources(query, [i.source for i in picked]).ids)
        picked = [
            i
            for i in picked
            if i.source.id in named or any(q in s.casefold() for s in i.source.speakers)
        ]
    picked.sort(key=lambda i: (i.source.recorded_at or date.min, i.source.title), reverse=True)
    page = picked[offset : offset + limit]
    more = offset + len(page) < len(picked)

    def link(info: SourceInfo) -> str | None:
        signer = services.retrieval.signer
        return signer.page(reach.kb, info.source.id) if signer else None

    data: dict[str, Any] = {
        "kb": reach.kb,
        "total": len(picked),
        "sources": [_source_data(i, link(i)) for i in page],
        "next_offset": offset + len(page) if more else None,
    }
    if not picked:
        empty = "Nothing matches; call sources without filters." if infos else "It is empty."
        return Result(f"No sources. {empty}", data)
    lines = [
        f"- {i.source.id}: {i.source.title} ({i.source.kind}"
        + (f", {i.source.recorded_at.isoformat()}" if i.source.recorded_at else "")
        + (f"; {', '.join(i.source.speakers[:6])}" if i.source.speakers else "")
        + ")"
        for i in page
    ]
    head = f"Sources {offset + 1}-{offset + len(page)} of {len(picked)}:"
    tail = [f"(more: call sources again with offset={offset + len(page)})"] if more else []
    return Result("\n".join([head, *lines, *tail]), data)


def _lines(windows: list[Hit]) -> list[Sentence]:
    """The windows' sentences in order, without the ones each repeats (chunk overlap)."""
    said: list[Sentence] = []
    for w in windows:
        merge_sentences(said, sentences_of(w.segment))
    return said


def _turns(view: str | None, windows: list[Hit], said: list[Sentence]) -> list[dict[str, Any]]:
    """Sentences grouped into turns (one speaker at a time), each with its second and link."""
    turns: list[dict[str, Any]] = []
    for s in said:
        if turns and turns[-1]["speaker"] == s.speaker:
            turns[-1]["text"] += " " + s.text
            continue
        at = s.start_s
        link = None
        if view and at is not None and windows:
            link = view_link(view, replace(windows[0].segment, start_s=at))
        turns.append({"start_s": at, "speaker": s.speaker, "text": s.text, "link": link})
    return turns


async def transcript(
    reach: Reach,
    source: str,
    *,
    start_s: float | None = None,
    end_s: float | None = None,
    offset: int = 0,
    limit: int = TRANSCRIPT_PAGE,
) -> Result:
    """A source's lines with speakers and seconds, within ``start_s``..``end_s``, paged
    by ``limit`` windows."""
    _, services = await reach.running()
    info = await _one_source(services, reach.kb, source)
    s = info.source
    ranged = start_s is not None or end_s is not None
    if ranged and s.kind not in ("video", "audio"):
        raise InvalidInput(
            f"{s.title} is a {s.kind}, not a recording: it has no seconds. "
            "Leave out start_s and end_s and page with offset."
        )
    if start_s is not None and end_s is not None and start_s > end_s:
        raise InvalidInput(f"start_s ({start_s:g}) is after end_s ({end_s:g}).")
    archive = services.retrieval.search.archive(reach.kb)
    # The window before the page too: what it shares with the page's first (the chunks'
    # overlap) was on the page before, and is not said twice.
    start = max(0, offset - 1)
    got = await archive.transcript(
        s.id, start_s, end_s, offset=start, limit=limit + 1 + offset - start
    )
    before, windows = got[: offset - start], got[offset - start :]
    more = len(windows) > limit
    windows = windows[:limit]
    said = _lines(before + windows)[len(_lines(before)) :]
    view = windows[0].source.view if windows else None
    data: dict[str, Any] = {
        "kb": reach.kb,
        "source": {"id": s.id, "title": s.title, "kind": s.kind, "page_link": view},
        "lines": _turns(view, windows, said),
        "next_offset": offset + len(windows) if more else None,
    }
    if not said:
        return Result(f"{s.title}: nothing at offset {offset} in this range.", data)
    body = timed_lines(said) if s.kind in ("video", "audio") else "\n".join(t.text for t in said)
    tail = (
        f"(more: call transcript again with offset={offset + len(windows)})"
        if more
        else "(end of the range)"
        if ranged
        else "(end of the source)"
    )
    return Result(f"{s.title} ({s.kind}):\n{body}\n{tail}", data)


async def summary(reach: Reach, source: str) -> Result:
    """A source's topics, decisions and action items, each at its moment."""
    _, services = await reach.running()
    info = await _one_source(services, reach.kb, source)
    hit = await services.retrieval.search.archive(reach.kb).summary(info.source.id)
    lines = []
    for line in read_lines(hit.segment):
        label, link = None, None
        if line.start_s is not None:
            label, link = at_second(hit, line.start_s)
        lines.append(
            {
                "kind": line.section,
                "text": line.text,
                "start_s": line.start_s,
                "page": line.page,
                "label": label,
                "link": link,
            }
        )
    data = {"kb": reach.kb, "lines": lines, **_hit_data(hit)}
    said = [
        f"- {LABELS[line.section]}"
        + (f" ({format_timestamp(line.start_s)})" if line.start_s is not None else "")
        + (f" (p. {line.page})" if line.page is not None else "")
        + f": {line.text}"
        + (f" {row['link']}" if row["link"] else "")
        for line, row in zip(read_lines(hit.segment), lines, strict=True)
    ]
    return Result(f"{info.source.title}, summary:\n" + "\n".join(said), data)


async def transcripts(reach: Reach) -> list[SourceInfo]:
    """The sources a client may attach as transcript resources."""
    _, services = await reach.running()
    return await services.retrieval.search.sources(reach.kb)


async def whole_transcript(reach: Reach, source_id: str) -> str:
    """A source's whole text as a resource: its lines with speakers and seconds."""
    _, services = await reach.running()
    infos = await services.retrieval.search.sources(reach.kb)
    found = [i for i in infos if i.source.id == source_id]
    if not found:
        raise InvalidInput(f"No source {source_id!r} in this knowledge base.")
    s = found[0].source
    archive = services.retrieval.search.archive(reach.kb)
    windows: list[Hit] = []
    while len(windows) < RESOURCE_WINDOWS:
        got = await archive.transcript(s.id, offset=len(windows), limit=500)
        windows.extend(got)
        if len(got) < 500:
            break
    said = _lines(windows)
    body = timed_lines(said) if s.kind in ("video", "audio") else "\n".join(t.text for t in said)
    when = f", {s.recorded_at.isoformat()}" if s.recorded_at else ""
    return f"# {s.title} ({s.kind}{when})\n\n{body}\n"
