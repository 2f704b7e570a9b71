"""What every platform shows of an answer, decided once: which ``[n]`` markers become
links (the core's own marker grammar, so ``[2-4]``, ``[2; 5]`` and ``[ 3 ]`` link
everywhere), which sources are listed and how their speaker is named, and which replies
get feedback buttons. Platforms only choose the markup."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from bot.cite.citations import MARKER, parse_numbers
from bot.models import Answer, Citation
from retrieval.links.links import view_link

RATED_KINDS = ("answer", "extractive", "nothing_found")


def sub_markers(text: str, render: Callable[[str, list[int]], str]) -> str:
    """Replace every citation marker with ``render(leading_space, numbers)``."""
    return MARKER.sub(lambda m: render(m.group(1), parse_numbers(m.group(2))), text)


def link_markers(
    text: str,
    citations: Mapping[int, Citation] | None,
    one: Callable[[int, Citation], str],
    group: Callable[[list[str]], str],
) -> str:
    """Markers as links: ``one(n, citation)`` renders a number, ``group`` joins one
    marker's numbers. Numbers the core did not validate are dropped (a marker left with
    none disappears); ``citations=None`` (an answer still being written, whose numbers
    are not resolved yet) leaves every marker as typed."""

    def render(space: str, numbers: list[int]) -> str:
        if citations is None:
            return f"{space}[{', '.join(map(str, numbers))}]"
        parts = [one(n, citations[n]) for n in numbers if n in citations]
        return f"{space}{group(parts)}" if parts else ""

    return sub_markers(text, render)


@dataclass(frozen=True)
class SourceLine:
    """One listed source: ``n. Title @ 3:05 — Priya``."""

    n: int
    label: str
    link: str | None
    speaker: str | None
    transcript: str | None = None  # Quorum's own page, when ``link`` leads elsewhere


def transcript_link(answer: Answer, c: Citation) -> str | None:
    """Quorum's page of a citation whose link leads out (YouTube, a hosted PDF), at the
    same moment: the transcript stays one click away. None when the link is the page."""
    by_hit = {s.hit.id: s.hit for s in answer.sources}
    by_n = {s.n: s.hit for s in answer.sources}
    hit = by_hit.get(c.hit_id) or (by_n.get(c.source_n) if c.source_n else None)
    if hit is None or not hit.source.view or not c.link or c.link.startswith(hit.source.view):
        return None
    seg = replace(hit.segment, start_s=c.start_s if c.start_s is not None else hit.segment.start_s)
    return view_link(hit.source.view, seg)


def source_lines(answer: Answer) -> list[SourceLine]:
    """The sources an answer lists, by number: its citations; for an extractive answer
    without any, every quoted passage. The speaker is named when the label does not
    already name them (compared without case)."""
    cites = sorted(answer.citations, key=lambda c: c.n)
    if not cites and answer.kind == "extractive":
        return [SourceLine(s.n, s.label, s.hit.link, None) for s in answer.sources]
    return [
        SourceLine(c.n, c.label, c.link, _speaker(c), transcript_link(answer, c)) for c in cites
    ]


def _speaker(c: Citation) -> str | None:
    if not c.speaker or c.speaker.casefold() in c.label.casefold():
        return None
    return c.speaker


def wants_feedback(answer: Answer) -> bool:
    """Replies worth a 👍/👎: answers, quotes and "nothing found" (a gap worth knowing
    about), once stored; never help text or an apology."""
    return answer.exchange_id is not None and answer.kind in RATED_KINDS


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"
