"""Which resolution answers a question, and how the hits of several are fused.

- Overview questions ("summarize", "what was ... about", "the discussion of", "the main
  points") want topic-sized spans and whole-source summaries.
- Questions about a remark ("who said", "what did NAME say", "quote", "when did") want
  one speaker's turn, with windows for context.
- Everything else searches windows, as before levels existed.

A question with signs of both is unsure: it searches all three of turns, windows and
topics. Levels are fused by weighted reciprocal rank (RRF), and a hit whose span lies
inside a better one of the same source is dropped: it would only repeat it. (Fusing by
the hybrid scores instead let windows crowd topics out: measured worse on meeting
questions, ``bench/qmsum.py``.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from retrieval.models import Hit, Level

Route = tuple[tuple[Level, float], ...]
RRF_K = 60

_OVERVIEW = re.compile(
    r"\b(?:summar(?:y|ise|ize|ized|ised|ies)|overview|recap|gist|tl;?dr|outline"
    r"|main (?:points?|topics?|ideas?|themes?)|key (?:points?|takeaways?|topics?)"
    r"|what (?:was|were|is|are) (?:the )?(?:[\w'-]+ ){0,5}about|discuss(?:ed|es|ing|ion|ions)?"
    r"|talk(?:ed)? about|high[- ]level|in general|overall)\b",
    re.IGNORECASE,
)
_REMARK = re.compile(
    r"\b(?:who|whom|whose|said|say|says|saying|quote|quoted|exact(?:ly)? words?"
    r"|mention(?:ed|s)?|when (?:did|was|were|do|does)|asked|answered|replied)\b",
    re.IGNORECASE,
)

WINDOWS: Route = (("window", 1.0),)
OVERVIEW: Route = (("topic", 1.0), ("summary", 0.5), ("window", 0.5))
REMARK: Route = (("turn", 1.0), ("window", 1.0))
UNSURE: Route = (("window", 1.0), ("topic", 0.7), ("turn", 0.7))


def route(question: str) -> Route:
    """The levels to search for ``question`` and each one's weight in the fusion."""
    overview = bool(_OVERVIEW.search(question))
    remark = bool(_REMARK.search(question))
    if overview and remark:
        return UNSURE
    if overview:
        return OVERVIEW
    if remark:
        return REMARK
    return WINDOWS


def fixed(levels: Sequence[Level]) -> Route:
    """The levels a caller asked for, weighed alike."""
    return tuple((level, 1.0) for level in dict.fromkeys(levels))


def _inside(small: Hit, big: Hit) -> bool:
    """True when ``small`` says nothing ``big`` (of the same source) does not."""
    if small.source.id != big.source.id:
        return False
    a, b = small.segment, big.segment
    if None not in (a.start_s, a.end_s, b.start_s, b.end_s):
        assert a.start_s is not None and a.end_s is not None
        assert b.start_s is not None and b.end_s is not None
        return b.start_s <= a.start_s + 0.5 and a.end_s <= b.end_s + 0.5
    return a.text.strip() in b.text


def _scores(runs: Sequence[tuple[float, Sequence[str]]]) -> dict[str, float]:
    """Each id's weighted RRF score over ranked lists of ids, in order of first sight."""
    scores: dict[str, float] = {}
    for weight, ids in runs:
        for rank, i in enumerate(ids):
            scores[i] = scores.get(i, 0.0) + weight / (RRF_K + rank + 1)
    return scores


def best(runs: Sequence[tuple[float, Sequence[str]]], n: int) -> set[str]:
    """The ``n`` ids ``fuse`` would rank first (ties as it breaks them), from the ranked
    ids of each weighted list: fusing only their hits gives the same first hits, as long
    as ``n`` is enough for the ``k`` wanted once contained hits are dropped."""
    scores = _scores(runs)
    return set(sorted(scores, key=lambda i: -scores[i])[:n])


def fuse(runs: Sequence[tuple[float, Sequence[Hit]]], k: int) -> list[Hit]:
    """The best ``k`` of several weighted result lists (weighted RRF), best first, without
    hits another better hit already holds. A single list keeps its own scores."""
    if len(runs) == 1:
        ordered = list(runs[0][1])
    else:
        scores = _scores([(weight, [h.id for h in hits]) for weight, hits in runs])
        first: dict[str, Hit] = {}
        for _, hits in runs:
            for hit in hits:
                first.setdefault(hit.id, hit)
        ordered = sorted(first.values(), key=lambda h: -scores[h.id])
        top = max(scores.values(), default=1.0)
        ordered = [replace(h, score=scores[h.id] / top) for h in ordered]
    kept: list[Hit] = []
    for hit in ordered:
        if any(_inside(hit, better) for better in kept):
            continue
        kept.append(hit)
        if len(kept) == k:
            break
    return kept
