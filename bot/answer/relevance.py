"""The relevance gate: are the passages search found worth quoting at all, or is
"nothing found" the honest answer?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.cite.sentences import Sentence
from bot.words import overlap, terms

RELEVANT_MEANING = 0.4  # under this (and few shared words), nothing found is the answer
RELEVANT_WORDS = 0.5
# Asked inside one source (its filter typed), the user expects the answer there: its best
# moments are the answer when they relate at all, some sentence this close in meaning
# and some sentence holding this share of the question's content words. QMSum val's six
# "nothing found" inside the right meeting had 0.29 to 0.37 and a quarter to 0.4 of the
# words; catering for an offsite, asked inside the cut-over retro, 0.27 and no word, and
# stays "nothing found".
SCOPED_MEANING = 0.25
SCOPED_WORDS = 0.25


def relevant(
    query: str,
    sentences: Sequence[Sentence],
    meaning: Mapping[str, float],
    scoped: bool = False,
) -> bool:
    """False when no sentence is close to the query in meaning (MiniLM cosine under
    ``RELEVANT_MEANING``) nor holds half its content words: search always returns its
    nearest passages, and quoting them for a question the archive cannot answer would
    pass noise off as an answer. Chosen on examples/eval.jsonl, where every answerable
    question's best sentence scores 0.47 or more and unanswerable ones 0.34 at most.
    Without ``meaning`` (the best window was close enough) it is relevant. ``scoped``
    (the question is asked inside one source) also takes a passage that relates a little
    in both meaning and words (``SCOPED_MEANING``, ``SCOPED_WORDS``): asked inside the
    right meeting, "nothing found" came back for questions the meeting answers."""
    if not meaning or not sentences:
        return True
    closest = max(meaning.values())
    if closest >= RELEVANT_MEANING:
        return True
    q = terms(query)
    if not q:
        return True
    share = max(len(overlap(q, set(terms(s.text)))) / len(q) for s in sentences)
    if scoped and closest >= SCOPED_MEANING and share >= SCOPED_WORDS:
        return True
    return share >= RELEVANT_WORDS
