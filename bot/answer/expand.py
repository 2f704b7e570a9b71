"""With a model: more ways to ask a hard question, and an optional rerank by the model.

A question is *hard* when search found nothing close to it in meaning (the best hit's
cosine under ``HARD_BELOW``). Then the fast model writes 2-3 alternative search queries
(other words for the same need), each is searched with the same filters, and the lists
are fused by reciprocal rank (RRF, k=60): a passage several phrasings find rises.
Optionally (off by default) the fast model (Claude's or a server's) orders the top 20 by
how well they answer; its time and tokens are counted in the answer's timings and usage.
Any failure of the model leaves the plain results: expansion and rerank only ever add.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import replace

from bot.errors import LLMError
from bot.llm import LLM, Usage
from retrieval.models import Hit

log = logging.getLogger("quorum.expand")
HARD_BELOW = 0.5  # best hit's cosine to the question under this: try other phrasings
RRF_K = 60
RERANK_TOP = 20
MAX_ALTERNATIVES = 3

EXPAND_PROMPT = """You help search a team's archive of meeting transcripts and documents.
Given a question, write 2 or 3 alternative search queries that could find the passages
answering it: other words, synonyms, the terms a speaker would actually use. One query per
line, no numbering, no quotes, nothing else."""

RERANK_PROMPT = """You order search results by how well they answer a question.
Reply with the passage numbers, best first, separated by commas (e.g. "3,1,2"), and nothing
else. Leave out passages that do not help at all."""


def is_hard(hits: Sequence[Hit]) -> bool:
    """True when nothing found is close to the question in meaning (or nothing was found)."""
    best = max((h.similarity for h in hits if h.similarity is not None), default=None)
    return not hits or (best is not None and best < HARD_BELOW)


async def alternative_queries(llm: LLM, question: str, timeout_s: float, usage: Usage) -> list[str]:
    """Up to three other phrasings of ``question`` from the fast model; none on failure."""
    try:
        done = await llm.complete(
            system=EXPAND_PROMPT,
            messages=[{"role": "user", "content": question}],
            max_tokens=150,
            model=llm.fast_model,
            timeout_s=timeout_s,
        )
    except LLMError as exc:
        log.warning("query expansion failed (%s); searching the question alone", exc)
        return []
    usage.add(done.usage)
    seen = {" ".join(question.casefold().split())}
    out: list[str] = []
    for line in done.text.splitlines():
        query = re.sub(r"^\s*(?:[-*\u2022]|\d+[.)])\s*", "", line).strip().strip("\"'")
        key = " ".join(query.casefold().split())
        if query and key not in seen and len(query) <= 300:
            seen.add(key)
            out.append(query)
    return out[:MAX_ALTERNATIVES]


def fuse(lists: Sequence[Sequence[Hit]], k: int) -> list[Hit]:
    """Reciprocal-rank fusion of several result lists: the best ``k``, each scored by the
    sum of 1 / (60 + rank) over the lists that hold it."""
    scores: dict[str, float] = {}
    first: dict[str, Hit] = {}
    for hits in lists:
        for rank, hit in enumerate(hits):
            scores[hit.id] = scores.get(hit.id, 0.0) + 1.0 / (RRF_K + rank + 1)
            first.setdefault(hit.id, hit)
    best = sorted(scores, key=lambda i: -scores[i])[:k]
    return [replace(first[i], score=scores[i]) for i in best]


async def model_rerank(
    llm: LLM, question: str, hits: Sequence[Hit], timeout_s: float, usage: Usage
) -> list[Hit]:
    """The top ``RERANK_TOP`` hits in the order the fast model puts them, the rest after;
    the hits unchanged when the model fails or answers nothing usable."""
    top = list(hits[:RERANK_TOP])
    if len(top) < 2:
        return list(hits)
    listing = "\n\n".join(
        f"[{n}] {h.source.title}: {' '.join(h.segment.text.split())[:700]}"
        for n, h in enumerate(top, 1)
    )
    try:
        done = await llm.complete(
            system=RERANK_PROMPT,
            messages=[{"role": "user", "content": f"Question: {question}\n\n{listing}"}],
            max_tokens=100,
            model=llm.fast_model,
            timeout_s=timeout_s,
        )
    except LLMError as exc:
        log.warning("the model's rerank failed (%s); keeping search order", exc)
        return list(hits)
    usage.add(done.usage)
    order = [int(n) - 1 for n in re.findall(r"\d+", done.text) if 1 <= int(n) <= len(top)]
    order = list(dict.fromkeys(order))
    if not order:
        return list(hits)
    ranked = [top[i] for i in order] + [h for i, h in enumerate(top) if i not in set(order)]
    return ranked + list(hits[RERANK_TOP:])
