"""The relevance gate: are the passages search found worth quoting at all, or is
"nothing found" the honest answer?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.cite.sentences import Sentence
from bot.words import overlap, terms

RELEVANT_MEANING = 0.4  # under this (and few shared words), nothing found is the answer
RELEVANT_WORDS = 0.5
# Asked inside one source (its filter typed or chosen), the user knows the answer is
# there: its best moments are the answer unless none relates at all (no sentence this
# close in meaning, and none sharing a content word).
SCOPED_MEANING = 0.15


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
    (the question is asked inside one source) lowers both bars to "anything relates":
    asked inside the right meeting, QMSum val's "nothing found" came back for questions
    the meeting answers."""
    if not meaning or not sentences:
        return True
    if max(meaning.values()) >= (SCOPED_MEANING if scoped else RELEVANT_MEANING):
        return True
    q = terms(query)
    if not q:
        return True
    share = max(len(overlap(q, set(terms(s.text)))) / len(q) for s in sentences)
    return share > 0 if scoped else share >= RELEVANT_WORDS
