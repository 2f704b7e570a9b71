"""Word tools the quick path and alignment share: a text's content words, stemmed by the
one stemmer keyword search uses (``retrieval.search.stems``, Snowball), and when two of them
are one word.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence

from retrieval.search.stems import stem

STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few
    for from further had has have having he her here hers herself him himself his how i if
    in into is it its itself just let like me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than that
    the their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would you
    your yours yourself yourselves said say says tell told talk talked mention mentioned
    think thought anything something thing things get got really okay yeah quorum please
    know us one went go goes going happen happened happens""".split()
)
_WORD = re.compile(r"[a-z0-9][a-z0-9'_-]*")


def terms(text: str) -> list[str]:
    """The content words of ``text``, stemmed, in order, without repeats."""
    return list(_terms(text))


@functools.lru_cache(maxsize=16384)
def _terms(text: str) -> tuple[str, ...]:
    # cached: the extractive answer, alignment and a thread's follow-ups read the same
    # sentences again
    words = (stem(w.strip("'-_")) for w in _WORD.findall(text.casefold()) if w not in STOPWORDS)
    return tuple(dict.fromkeys(w for w in words if len(w) > 1))


def matches(term: str, word: str) -> bool:
    """True when two stemmed words are one (or one is a long prefix of the other)."""
    if term == word:
        return True
    short = min(len(term), len(word))
    return short >= 4 and (word.startswith(term) or term.startswith(word))


def overlap(query: Sequence[str], words: Iterable[str]) -> set[str]:
    """The query's terms that match one of ``words`` (both stemmed)."""
    have = set(words)
    return {t for t in query if any(matches(t, w) for w in have)}


def shared(query: Sequence[str], text: str) -> set[str]:
    """The query's content words (``terms``) that ``text`` holds."""
    return overlap(query, terms(text))
