"""Which sources a typed name (``--source``, ``source:``) selects.

Three tiers, the first that selects anything wins: the exact title or id ("Bed003"
selects Bed003, never Bed008); the name as whole words of a title ("Lecture 3" selects
"Lecture 3: Graphs", never "Lecture 8"); then fuzzy ("auth deepdive" finds "Auth deep
dive"). Only the exact tier is certain; the others say which sources they chose.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from retrieval.models import Source

_TOKEN = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class SourceChoice:
    """The sources a name selected, and whether it named them exactly."""

    ids: tuple[str, ...]
    exact: bool


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.casefold())


def exact_match(query: str, source: Source) -> bool:
    """The name is the source's title or id, up to case, spacing and punctuation."""
    q = _tokens(query)
    return bool(q) and (q == _tokens(source.title) or q == _tokens(source.id))


def word_match(query: str, source: Source) -> bool:
    """The name's words appear, whole and in order, in the title or the id."""
    q = _tokens(query)
    if not q:
        return False
    for hay in (_tokens(source.title), _tokens(source.id)):
        if any(hay[i : i + len(q)] == q for i in range(len(hay) - len(q) + 1)):
            return True
    return False


def title_matches(query: str, source: Source) -> bool:
    """Fuzzy title match: "MCP" finds "Introduction to MCP", "auth deepdive" finds
    "Auth deep dive"."""
    q = " ".join(query.casefold().split())
    title = source.title.casefold()
    if not q:
        return False
    if q in title or q == source.id.casefold() or q in source.id.casefold():
        return True
    squashed_q, squashed_t = q.replace(" ", ""), re.sub(r"[^a-z0-9]", "", title)
    if squashed_q and squashed_q in squashed_t:
        return True
    words = re.findall(r"[a-z0-9]+", title)
    q_words = re.findall(r"[a-z0-9]+", q)
    if q_words and all(
        any(w.startswith(qw) or SequenceMatcher(None, qw, w).ratio() >= 0.8 for w in words)
        for qw in q_words
    ):
        return True
    return SequenceMatcher(None, q, title).ratio() >= 0.75


def choose_sources(query: str, sources: Sequence[Source]) -> SourceChoice:
    """The sources ``query`` names: exact matches alone when there are any, else whole-word
    matches, else fuzzy ones (see the module docstring)."""
    for tier in (exact_match, word_match, title_matches):
        ids = tuple(s.id for s in sources if tier(query, s))
        if ids:
            return SourceChoice(ids, exact=tier is exact_match)
    return SourceChoice((), exact=False)


def speaker_keys(names: Sequence[str]) -> list[str]:
    """Lower-cased full names and their parts, so ``speaker:john`` finds "John Park"."""
    keys: list[str] = []
    for name in names:
        low = " ".join(name.lower().split())
        for key in (low, *low.split()):
            if key and key not in keys:
                keys.append(key)
    return keys
