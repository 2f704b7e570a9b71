"""Deep research's tools at work: reading the archive for each call.

Every tool reads the one knowledge base its ``Archive`` is bound to; source ids are
checked against this archive's own list (``Catalog``). A call runs in two halves:
``fetch`` reads the archive (concurrently with the other calls of the same turn) and
returns a ``Draft``; ``results.render_draft`` numbers its passages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from bot.errors import InvalidInput
from bot.research.results import (
    CHARS_PER_RESULT,
    Draft,
    Item,
    Registry,
    cap,
    fits,
    window_items,
)
from bot.research.schema import (
    Args,
    ExpandArgs,
    ListSourcesArgs,
    SearchArgs,
    TimelineArgs,
    ToolError,
    TranscriptArgs,
)
from retrieval.archive import Archive
from retrieval.links.links import format_timestamp
from retrieval.models import Hit, SearchFilters, SourceInfo
from retrieval.search.names import speaker_keys, title_matches

# --- the tools ----------------------------------------------------------------------------


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return f"'{text if len(text) <= limit else text[: limit - 1] + '…'}'"


def _when(d: date | None) -> str:
    return d.isoformat() if d else "undated"


@dataclass
class Catalog:
    """What the archive holds, read once per research run."""

    sources: list[SourceInfo]
    speakers: list[str]
    by_id: dict[str, SourceInfo] = field(init=False)
    speaker_keys: set[str] = field(init=False)

    def __post_init__(self) -> None:
        self.by_id = {i.source.id: i for i in self.sources}
        self.speaker_keys = set(speaker_keys(self.speakers))

    @classmethod
    async def load(cls, archive: Archive) -> Catalog:
        """The sources and speakers of ``archive``."""
        return cls(await archive.sources(), await archive.speakers())

    def source(self, source_id: str) -> SourceInfo:
        """A source of this archive by id; ``ToolError`` for any other id."""
        info = self.by_id.get(source_id)
        if info is None:
            raise ToolError(
                f"Unknown source id {source_id[:80]!r}: it is not in this archive. "
                "Use list_sources to see the ids."
            )
        return info

    def check_speaker(self, name: str) -> None:
        """``ToolError`` when no known speaker has this name (or first/last name)."""
        key = speaker_keys([name])[:1]
        if not key or key[0] not in self.speaker_keys:
            known = ", ".join(self.speakers[:30]) or "none"
            raise ToolError(f"Unknown speaker {name[:60]!r}. Known speakers: {known}.")

    def chronological(self) -> list[SourceInfo]:
        """Sources oldest first, undated ones last."""
        return sorted(
            self.sources, key=lambda i: (i.source.recorded_at or date.max, i.source.title)
        )


def _check_dates(after: date | None, before: date | None) -> None:
    if after and before and after > before:
        raise ToolError(f"The date range is reversed: after {after} is later than before {before}.")


def progress_text(args: Args, catalog: Catalog, registry: Registry) -> str:
    """What the user sees while a tool runs: ``searching 'Auth0 Cognito' (speaker John)``."""
    if isinstance(args, SearchArgs):
        bits = [f"speaker {args.speaker}"] if args.speaker else []
        if args.source_ids:
            titles = [catalog.by_id[i].source.title for i in args.source_ids if i in catalog.by_id]
            if titles:
                bits.append(_quote(titles[0], 60) if len(titles) == 1 else f"{len(titles)} sources")
        if args.after:
            bits.append(f"from {args.after}")
        if args.before:
            bits.append(f"until {args.before}")
        extra = f" ({', '.join(bits)})" if bits else ""
        return f"searching {_quote(args.query)}{extra}"
    if isinstance(args, ListSourcesArgs):
        return "listing sources" + (f" matching {_quote(args.query)}" if args.query else "")
    if isinstance(args, TranscriptArgs):
        info = catalog.by_id.get(args.source_id)
        title = _quote(info.source.title if info else args.source_id, 60)
        span = ""
        if args.start_s is not None or args.end_s is not None:
            start = format_timestamp(args.start_s or 0)
            end = format_timestamp(args.end_s) if args.end_s is not None else "end"
            span = f" {start}\u2013{end}"
        return f"reading {title}{span}"
    if isinstance(args, ExpandArgs):
        ns = registry.get(args.segment_id)
        return f"reading around {ns.label}" if ns else f"reading around [{args.segment_id}]"
    if isinstance(args, TimelineArgs):
        return f"tracing {_quote(args.query)} across recordings"
    return "researching"


async def fetch(args: Args, archive: Archive, catalog: Catalog, registry: Registry) -> Draft:
    """Run one validated call against the archive; the result before numbering."""
    if isinstance(args, SearchArgs):
        return await _search(args, archive, catalog)
    if isinstance(args, ListSourcesArgs):
        return _list_sources(args, catalog)
    if isinstance(args, TranscriptArgs):
        return await _transcript(args, archive, catalog)
    if isinstance(args, ExpandArgs):
        return await _expand(args, archive, registry)
    if isinstance(args, TimelineArgs):
        return await _timeline(args, archive)
    raise ToolError("Unknown tool.")


async def _search(args: SearchArgs, archive: Archive, catalog: Catalog) -> Draft:
    if args.speaker:
        catalog.check_speaker(args.speaker)
    ids = tuple(dict.fromkeys(catalog.source(i).source.id for i in args.source_ids or ()))
    _check_dates(args.after, args.before)
    filters = SearchFilters(
        speaker=args.speaker,
        source_ids=ids,
        after=args.after,
        before=args.before,
        levels=(args.level,) if args.level else (),
    )
    hits = await archive.search(args.query, filters, k=args.limit)
    if not hits:
        return ["No passages matched. Try other words, fewer filters, or list_sources."]
    items = window_items(hits)
    shown = fits(items)
    draft: Draft = [f"{shown} passages for {_quote(args.query)}, best first:"]
    draft.extend(items[:shown])
    if shown < len(items):
        draft.append(f"({len(items) - shown} more left out for length; narrow the search.)")
    return draft


def _list_sources(args: ListSourcesArgs, catalog: Catalog) -> Draft:
    _check_dates(args.after, args.before)
    q = (args.query or "").casefold()
    picked: list[SourceInfo] = []
    for info in catalog.chronological():
        s = info.source
        when = s.recorded_at
        if args.kind and s.kind != args.kind:
            continue
        if (args.after or args.before) and when is None:
            continue
        if (args.after and when and when < args.after) or (
            args.before and when and when > args.before
        ):
            continue
        haystack = " ".join([s.description or "", *s.speakers]).casefold()
        if q and not (title_matches(q, s) or q in haystack):
            continue
        picked.append(info)
    if not picked:
        return ["No sources match. Call list_sources without filters to see them all."]
    draft: Draft = [f"{min(len(picked), args.limit)} of {len(catalog.sources)} sources:"]
    used = 0
    for info in picked[: args.limit]:
        s = info.source
        line = (
            f"- id: {s.id} | {_quote(s.title, 120)} | {s.kind} | {_when(s.recorded_at)} | "
            f"{info.segments} windows"
        )
        if s.speakers:
            line += f" | speakers: {', '.join(s.speakers[:12])}"
        if s.description:
            line += f"\n  {cap(s.description, 300)}"
        used += len(line)
        if used > CHARS_PER_RESULT:
            draft.append("(more sources left out for length; narrow with query or dates.)")
            break
        draft.append(line)
    return draft


async def _transcript(args: TranscriptArgs, archive: Archive, catalog: Catalog) -> Draft:
    info = catalog.source(args.source_id)
    ranged = args.start_s is not None or args.end_s is not None
    if ranged and info.source.kind not in ("video", "audio"):
        raise ToolError(
            f"{args.source_id!r} is a {info.source.kind}, not a recording: it has no times. "
            "Leave out start_s and end_s and page with offset."
        )
    if args.start_s is not None and args.end_s is not None and args.start_s > args.end_s:
        raise ToolError("start_s is after end_s.")
    windows = await archive.transcript(
        info.source.id, args.start_s, args.end_s, offset=args.offset, limit=args.limit + 1
    )
    more = len(windows) > args.limit
    items = window_items(windows[: args.limit], dated=False)
    shown = fits(items)
    s = info.source
    head = f"{_quote(s.title, 120)} ({s.kind}, {_when(s.recorded_at)})"
    if not items:
        return [f"{head}: nothing at offset {args.offset} in this range."]
    draft: Draft = [f"{head}, windows {args.offset + 1}-{args.offset + shown}:"]
    draft.extend(items[:shown])
    if more or shown < len(items):
        draft.append(f"(more: call get_transcript again with offset={args.offset + shown})")
    else:
        draft.append("(end of the range)" if ranged else "(end of the source)")
    return draft


async def _expand(args: ExpandArgs, archive: Archive, registry: Registry) -> Draft:
    ns = registry.get(args.segment_id)
    if ns is None:
        top = f"1-{len(registry)}" if len(registry) else "none yet"
        raise ToolError(f"There is no passage [{args.segment_id}] (passages so far: {top}).")
    windows = await archive.neighbours(ns.hit.id, before=args.before, after=args.after)
    if not windows:
        return [f"Nothing around [{ns.n}]."]
    items = window_items(windows, dated=False)
    shown = fits(items)
    draft: Draft = [f"Around [{ns.n}] in {_quote(ns.hit.source.title, 120)}, in order:"]
    draft.extend(items[:shown])
    return draft


async def _timeline(args: TimelineArgs, archive: Archive) -> Draft:
    hits = await archive.search(args.query, None, k=min(50, max(20, args.limit * 3)))
    per: dict[str, list[Hit]] = {}
    for h in hits:  # best first, so each source keeps its best few
        kept = per.setdefault(h.source.id, [])
        if len(kept) < args.per_source:
            kept.append(h)
    best = sorted((h for kept in per.values() for h in kept), key=lambda h: -h.score)
    chosen = sorted(best[: args.limit], key=_chronological)
    if not chosen:
        return [f"Nothing in the archive matches {_quote(args.query)}."]
    items = [
        Item(h, it.text, dated=False) for h, it in zip(chosen, window_items(chosen), strict=True)
    ]
    shown = fits(items)
    sources = len({h.source.id for h in chosen[:shown]})
    draft: Draft = [
        f"Timeline of {_quote(args.query)}: {shown} passages from {sources} sources, oldest first."
    ]
    current: str | None = None
    for item in items[:shown]:
        s = item.hit.source
        if s.id != current:
            current = s.id
            draft.append(f"\n## {_when(s.recorded_at)} · {s.title} ({s.kind})")
        draft.append(item)
    return draft


def _chronological(h: Hit) -> tuple[date, str, float, int]:
    seg = h.segment
    place = seg.start_s if seg.start_s is not None else float(seg.page or 0)
    return (h.source.recorded_at or date.max, h.source.id, place, seg.position)


@dataclass
class Call:
    """One tool call as it ran: its result and what it cost."""

    id: str
    name: str
    input: Any  # an object, unless Claude sent something else (then a tool error)
    args: Args | None = None
    text: str = ""
    is_error: bool = False
    passages: tuple[int, ...] = ()
    ms: float = 0.0
    archive_ms: float = 0.0
    draft: Draft | None = None


async def run_fetch(call: Call, archive: Archive, catalog: Catalog, registry: Registry) -> None:
    """Fetch one parsed call, turning the caller's mistakes into an error result."""
    started = time.perf_counter()
    try:
        if call.args is not None:
            call.draft = await fetch(call.args, archive, catalog, registry)
    except (ToolError, InvalidInput) as exc:
        call.is_error, call.text = True, cap(str(exc), 1000)
    finally:
        call.ms += (time.perf_counter() - started) * 1000
