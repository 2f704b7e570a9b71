"""English stems for keyword search, so "migrating" finds a meeting that said "migration".

Weaviate's word tokenizer only lower-cases. A unit's stored ``context`` (searched, never
displayed) also receives the Snowball (Porter2) stem of each of its words ("migration"
-> "migrat"), marked so that a stem never matches a word as said. Where units store
stems, a question asks their stems in place of its words (``stemmed_query``), so each word
matches once in whatever form it was said; words without a stem (numbers, "IL-6") are
asked as written and match the text. Asking the words beside their stems counted a word
said exactly as asked twice, and common words outweighed rare ones (SciFact keyword
nDCG@10 0.647 -> 0.679, ``bench/quality.py``). A knowledge base indexed before stems has
none stored: it is asked the words and their stems (``keyword_query``), the stems match
nothing there, and it searches exactly as it did.
"""

from __future__ import annotations

import functools
import re
import threading
from collections.abc import Iterable

import Stemmer

# Weaviate's word tokenization: runs of letters and digits, lower-cased. The mark keeps
# a stem one token and apart from the words said (only a word said as a digit then
# letters, "0xff", could meet a stem: that of "xff").
_WORD = re.compile(r"[^\W_]+")
MARK = "0"
_MARKED = re.compile(rf"(?<!\S){MARK}[^\W\d_]")  # "0migrat", "0über"
_local = threading.local()  # a stemmer keeps state: one per thread

# Function words: their stems would add a common token to every unit and question.
# Snowball's English stop list (less negations and contractions), a few fillers of speech.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself of off on once only or other ought
    our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up
    very was we were what when where which while who whom why will with would you your
    yours yourself yourselves also really actually maybe yeah okay
    """.split()
)


def _stemmer() -> Stemmer.Stemmer:
    stemmer: Stemmer.Stemmer | None = getattr(_local, "stemmer", None)
    if stemmer is None:
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    return stemmer


def words(text: str) -> list[str]:
    """The words keyword search sees in ``text`` (as Weaviate's word tokenizer cuts them)."""
    return _WORD.findall(text.lower())


def stem(word: str) -> str:
    """The Snowball (Porter2) stem of a lower-cased word, unmarked: "migrating" ->
    "migrat". Words it has no rule for ("auth0", "il-6") come back as they are."""
    return str(_stemmer().stemWord(word))


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    """The marked stem of a lower-cased word; "" for a function word or one with digits."""
    if not word.isalpha() or word in STOPWORDS:
        return ""
    return MARK + stem(word)


def stems(tokens: Iterable[str]) -> list[str]:
    """The marked stems of ``tokens`` (lower-cased words), in order, one per occurrence."""
    return [s for s in map(_stem, tokens) if s]


def stemmed(text: str) -> str:
    """What a unit's context adds for ``text``: its marked stems, space-separated."""
    return " ".join(stems(words(text)))


def keyword_query(query: str) -> str:
    """``query`` with the marked stems of its words appended (each once)."""
    extra = list(dict.fromkeys(stems(words(query))))
    return f"{query} {' '.join(extra)}" if extra else query


def stemmed_query(query: str) -> str:
    """What keyword search asks of a knowledge base that stores stems: the marked stem of
    each word and the words that have none but a function word's ("IL-6", "2024"), each
    once. Asking a word beside its stem counted it twice (as said in the text, as a stem
    in the context), so a question's common words outweighed its rare ones."""
    tokens = words(query)
    kept = [
        stem or word
        for word, stem in zip(tokens, map(_stem, tokens), strict=True)
        if stem or word not in STOPWORDS
    ]
    return " ".join(dict.fromkeys(kept)) or query


def has_stems(context: str) -> bool:
    """True when a unit's stored context carries marked stems (ingested since stems)."""
    return bool(_MARKED.search(context))
