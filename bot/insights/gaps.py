"""Where the archive falls short: the unanswered, disliked and weakly supported questions
grouped by meaning, each group with its count, examples and the closest moments the
archive does have ("12 people asked about the on-call rota; the nearest thing is 0:42 of
the March planning, which only mentions it").

Grouping runs over the sentence vectors Quorum already makes (MiniLM, centred on the
log's mean and L2-normalised) in two passes: leader clustering (each question joins the
nearest group whose centre is at least ``LEADER`` alike, else starts one), then
average-link merging of those groups (``MERGE``). Both passes are matrix products over
blocks, so they hold for 100,000 questions on a laptop's CPU, and neither needs the
number of groups up front.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from bot.insights.report import Gap, Moment
from bot.sessions.records import LoggedAnswer
from retrieval.archive import Archive
from retrieval.encoding.embed import Embedder
from retrieval.errors import QuorumError
from retrieval.models import Hit

LEADER = 0.4
"""How alike (cosine) a question must be to a group's centre to join it in the first pass."""
MERGE = 0.18
"""How alike two groups must be on average (mean cosine over their pairs) to be joined.
MiniLM puts paraphrases of one question at 0.38 on average (a tenth below 0.17) and
different questions of one team at 0.07, so single pairs overlap but groups do not.
Both chosen on the labelled set in ``tests/insights_questions.py`` (10 topics x 7
wordings: 16 groups, 0.96 of each group one topic, 0.86 of each topic in one group) and
on ``bench/insights.py``'s log (60 things asked in the same 8 frames: 0.69 of each group
one thing; without centring, 0.36)."""

CENTRE_FROM = 50
"""Questions needed before their mean is what they share rather than what they ask."""

log = logging.getLogger("quorum.insights")
EMBED_BATCH = 256
Progress = Callable[[str, int, int], None]


def normalise(question: str) -> str:
    """A question compared as words: case, punctuation and spacing folded."""
    return " ".join(re.findall(r"\w+", question.casefold()))


def group_vectors(
    vectors: np.ndarray,
    threshold: float = LEADER,
    merge: float = MERGE,
    block: int = 512,
) -> list[list[int]]:
    """Indices of ``vectors`` (rows, L2-normalised) grouped by meaning, largest first.

    The vectors are first centred on their mean: what every question of a log shares
    (being a question, about work, in the same few frames: "who owns X?", "any update on
    X?") says nothing about which thing it asks, and left in, it joins "who owns the
    VPN?" with "who owns the hiring plan?". A few questions have no such common part (the
    mean of two topics is half of each), so fewer than ``CENTRE_FROM`` are left as they are."""
    n = len(vectors)
    if n == 0:
        return []
    if n >= CENTRE_FROM:
        vectors = vectors - vectors.mean(axis=0)
        vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
    label = _leaders(vectors, threshold, block)
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(label.tolist()):
        groups.setdefault(g, []).append(i)
    merged = _merge(vectors, list(groups.values()), merge, block)
    return sorted(merged, key=lambda g: (-len(g), g[0]))


def _leaders(vectors: np.ndarray, threshold: float, block: int) -> np.ndarray:
    """Each row's leader group: the nearest centre at least ``threshold`` alike, else a
    new group. A block of rows is compared with the centres in one product, and the rows
    that found none with each other in another; centres move once per block."""
    n, dim = vectors.shape
    sums = np.zeros((max(64, block), dim), dtype=np.float32)
    centres = np.zeros_like(sums)
    label = np.full(n, -1, dtype=np.int64)
    k = 0
    for start in range(0, n, block):
        rows = vectors[start : start + block]
        mine = label[start : start + len(rows)]
        if k:
            sims = rows @ centres[:k].T
            best = np.argmax(sims, axis=1)
            hit = sims[np.arange(len(rows)), best] >= threshold
            mine[hit] = best[hit]
        left = np.flatnonzero(mine < 0)
        if len(left):
            among = rows[left] @ rows[left].T
            leaders: list[int] = []
            for a in range(len(left)):
                near = [b for b in leaders if among[a, b] >= threshold]
                if near:
                    mine[left[a]] = mine[left[max(near, key=lambda b: among[a, b])]]
                    continue
                leaders.append(a)
                if k == len(sums):
                    sums = np.vstack([sums, np.zeros_like(sums)])
                    centres = np.vstack([centres, np.zeros_like(centres)])
                mine[left[a]] = k
                k += 1
        np.add.at(sums, mine, rows)
        norms = np.maximum(np.linalg.norm(sums[:k], axis=1, keepdims=True), 1e-9)
        centres[:k] = sums[:k] / norms
    return label


def _merge(
    vectors: np.ndarray, groups: list[list[int]], threshold: float, block: int
) -> list[list[int]]:
    """Groups joined while two are on average at least ``threshold`` alike (the mean
    cosine over all their pairs: the sums' product over the counts' product). Each round
    joins every pair that are each other's best partner, so a round is a few products."""
    sums = np.stack([vectors[g].sum(axis=0) for g in groups])
    counts = np.array([len(g) for g in groups], dtype=np.float32)
    while len(groups) > 1:
        partner = np.empty(len(groups), dtype=np.int64)
        score = np.empty(len(groups), dtype=np.float32)
        for start in range(0, len(groups), block):
            alike = (sums[start : start + block] @ sums.T) / np.outer(
                counts[start : start + block], counts
            )
            rows = np.arange(len(alike))
            alike[rows, rows + start] = -1.0
            partner[start : start + block] = np.argmax(alike, axis=1)
            score[start : start + block] = alike[rows, partner[start : start + block]]
        i = np.arange(len(groups))
        joined = (i < partner) & (partner[partner] == i) & (score >= threshold)
        if not joined.any():
            break
        for a in np.flatnonzero(joined).tolist():
            b = int(partner[a])
            groups[a] = groups[a] + groups[b]
            sums[a] += sums[b]
            counts[a] += counts[b]
        keep = ~np.isin(i, partner[joined])
        groups = [g for g, kept in zip(groups, keep.tolist(), strict=True) if kept]
        sums, counts = sums[keep], counts[keep]
    return groups


async def embed_questions(
    embedder: Embedder, questions: Sequence[str], progress: Progress | None = None
) -> np.ndarray:
    """The questions' vectors, L2-normalised rows, embedded in batches with progress."""
    out: list[list[float]] = []
    for start in range(0, len(questions), EMBED_BATCH):
        out += await embedder.embed_documents(list(questions[start : start + EMBED_BATCH]))
        if progress is not None:
            progress(
                "embedding questions", min(start + EMBED_BATCH, len(questions)), len(questions)
            )
    if not out:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    matrix = np.asarray(out, dtype=np.float32)
    matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-9)
    return matrix


async def find_gaps(
    rows: Sequence[LoggedAnswer],
    embedder: Embedder,
    archive: Archive | None,
    *,
    limit: int = 20,
    examples: int = 5,
    nearest: int = 2,
    progress: Progress | None = None,
) -> list[Gap]:
    """The questions the archive fell short on, grouped, biggest first, each with the
    archive's closest moments (searched once per group, with its most typical question)."""
    short = [r for r in rows if r.shortfall is not None and r.question.strip()]
    if not short:
        return []
    # The same words asked twice are one question to embed, and count twice.
    distinct: dict[str, list[LoggedAnswer]] = {}
    for r in short:
        distinct.setdefault(normalise(r.question) or r.question, []).append(r)
    keys = list(distinct)
    firsts = [distinct[k][0].question for k in keys]
    vectors = await embed_questions(embedder, firsts, progress)
    groups = group_vectors(vectors)
    gaps: list[Gap] = []
    for members in groups:
        asked = [r for i in members for r in distinct[keys[i]]]
        centre = vectors[members].mean(axis=0)
        typical = members[int(np.argmax(vectors[members] @ centre))]
        reasons = Counter(r.shortfall or "" for r in asked)
        asked.sort(key=lambda r: r.created_at, reverse=True)
        gaps.append(
            Gap(
                label=distinct[keys[typical]][0].question,
                count=len(asked),
                reasons=dict(reasons.most_common()),
                examples=_varied(asked, examples),
            )
        )
    gaps.sort(key=lambda g: (-g.count, g.label))
    gaps = gaps[:limit]
    if archive is not None:
        for i, gap in enumerate(gaps):
            try:
                gap.nearest = [_moment(h) for h in await archive.search(gap.label, k=nearest)]
            except QuorumError:  # the groups stand without their nearest moments
                log.warning("could not search for a gap's nearest moments", exc_info=True)
            if progress is not None:
                progress("finding the nearest moments", i + 1, len(gaps))
    return gaps


def _varied(asked: Sequence[LoggedAnswer], n: int) -> list[LoggedAnswer]:
    """Up to ``n`` examples with different wording, newest first."""
    seen: set[str] = set()
    out: list[LoggedAnswer] = []
    for r in asked:
        key = normalise(r.question)
        if key not in seen:
            seen.add(key)
            out.append(r)
        if len(out) == n:
            break
    return out


def _moment(hit: Hit) -> Moment:
    seg = hit.segment
    return Moment(
        title=hit.source.title,
        source_id=hit.source.id,
        start_s=seg.start_s,
        page=seg.page,
        link=hit.link,
        text=seg.text,
        similarity=hit.similarity,
    )
