"""The replies written without a model: the best passages quoted briefly (the one or two
sentences of each that answer the query best, ``bot.answer.scoring``), the best first and
one per point, each linked to the second its quote starts; and the "nothing found" reply
with concrete suggestions (wider dates, no speaker filter, the closest names and titles).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.answer.passages import Passage
from bot.answer.scoring import (
    FRAMING,
    KEEP_RATIO,
    asks_frame,
    best_sentences,
    frames,
    relations,
    supposes,
)
from bot.cite.citations import at_second
from bot.cite.sentences import Sentence, link_second
from bot.models import NumberedSource
from bot.words import overlap, terms
from retrieval.models import SearchFilters, SourceInfo

# What the reply says first, by why no model wrote it; none names a vendor the user did
# not choose (a team on QUORUM_LLM=none or on its own model server is not told of a key).
NO_MODEL = "No model is set up (QUORUM_LLM), so here are the most relevant passages:"
MODEL_OFF = (
    "Quorum is set to answer without a model (QUORUM_LLM=none), so here are the most "
    "relevant passages:"
)
UNAVAILABLE = "The model is unavailable right now, so here are the most relevant passages:"
MAX_QUOTES = 3
MAX_QUOTE_CHARS = 360
# A passage's place in the quotes: its best sentence's score plus this much for being the
# search's first passage, falling in even steps to nothing for its last. 0.5 (support
# 0.2) until search asked stems, which ranks better; replayed answers since (QMSum val's
# first 120 / examples/eval.jsonl, first citations inside): 0.5 gave 44 of 116 / 24 of
# 35, 0.6 to 0.8 with support 0.2 to 0.4 gave 45 to 48 / 24 (0.7 and 0.3: 48 / 24),
# 0.3 gave 44 / 22, 1.0 gave 46 / 25 and the search order alone 45 / 23.
SEARCH_WEIGHT = 0.7
# One quote per point: a passage whose quote starts this close to one already quoted from
# the same source says the same thing (a turn and the window around it, two windows of
# one paragraph) and gives way to the next point.
SAME_POINT_S = 30.0


def _same_point(a: tuple[str, Sentence], b: tuple[str, Sentence]) -> bool:
    if a[0] != b[0]:
        return False
    if a[1].text == b[1].text:
        return True
    if a[1].start_s is None or b[1].start_s is None:
        return False
    return abs(a[1].start_s - b[1].start_s) < SAME_POINT_S


def _quote(sentences: Sequence[Sentence]) -> str:
    text = " ".join(s.text.strip() for s in sentences)
    if len(text) > MAX_QUOTE_CHARS:
        text = text[:MAX_QUOTE_CHARS].rsplit(" ", 1)[0] + " ..."
    return text.replace('"', "\u201d")


def _where(source: NumberedSource, first: Sentence) -> str:
    """The quote's label: for a recording, the quoted moment, linked (the same second its
    ``[n]`` opens); else the passage's label."""
    hit = source.hit
    second = link_second(first)
    if second is None:
        return source.label
    label, link = at_second(hit, second, first.start_s)
    return f"[{label}]({link})" if link else label


@dataclass(frozen=True)
class Extract:
    """An extractive answer: its text, and for each of its markers (by position) the
    sentence it quotes, so the citation opens where the quote starts."""

    text: str
    pins: dict[int, str]


def quotes(
    query: str,
    passages: Sequence[tuple[NumberedSource, Passage]],
    meaning: Mapping[str, float] | None = None,
    speaker: str | None = None,
) -> list[tuple[NumberedSource, list[Sentence]]]:
    """Up to ``MAX_QUOTES`` quotes, one per point, best first: each a numbered source and
    the one or two consecutive sentences of its passage that answer best (see
    ``extractive`` for the arguments)."""
    q = terms(query)
    df: dict[str, int] = {}
    for _, p in passages:
        for t in overlap(q, {w for s in p.sentences for w in terms(s.text)}):
            df[t] = df.get(t, 0) + 1
    weights = {t: math.log(1 + (len(passages) + 1) / (1 + df.get(t, 0))) for t in q}
    wanted = relations(query)
    heard = frozenset({speaker}) if speaker else frozenset()
    frame_ok, supposing = asks_frame(query), supposes(query)
    found: list[tuple[float, float, NumberedSource, list[Sentence]]] = []
    for rank, (source, p) in enumerate(passages):
        score, chosen = best_sentences(
            p.sentences, q, weights, wanted, meaning, heard, frame_ok, supposing
        )
        if chosen:
            # a window search found for its framing words ("This is the retro for the
            # cut-over") earns little for its rank when framing is all it has to quote
            framed = FRAMING if not frame_ok and frames(chosen[0]) else 1.0
            found.append(
                (score, framed * SEARCH_WEIGHT * (1 - rank / len(passages)), source, chosen)
            )
    # The first quote (the link a reader follows) is the passage whose best sentence
    # answers best, helped by its search rank: search ranks whole windows, so a passage
    # it ranks second can hold the one sentence that answers (first citations inside the
    # gold: examples/eval.jsonl 16 -> 19 of 35, QMSum val's first 120 44 -> 48; by the
    # sentence alone 15 and 42; ``SEARCH_WEIGHT`` is the search's share). ``meaning``
    # covers the first few passages only (as the relevance check encoded them): every
    # passage's sentences gave 20 and 47 (and, since stems, 24 and 47: no better), for
    # a median of 97 more sentences to encode, 2.5 s on a busy 2-core machine. Without
    # ``meaning`` (no MiniLM) sentences are compared by words alone, which the search
    # does better over whole windows: its order stands (by words, a PDF's goal line
    # "move login from Auth0" came before the meeting's reasons for "why did we move
    # off Auth0?"). Passages far weaker than the best are left out.
    top = max((f[0] for f in found), default=0.0)
    kept = [f for f in found if f[0] > 0 and f[0] >= KEEP_RATIO * top] or found[:1]
    ranked = sorted(kept, key=lambda f: -(f[0] + f[1])) if meaning else kept
    out: list[tuple[NumberedSource, list[Sentence]]] = []
    quoted: list[tuple[str, Sentence]] = []
    for _, _, source, chosen in ranked:
        if len(out) == MAX_QUOTES:
            break
        key = (source.hit.source.id, chosen[0])
        if any(_same_point(key, q) for q in quoted):
            continue
        quoted.append(key)
        out.append((source, chosen))
    return out


def extractive(
    query: str,
    passages: Sequence[tuple[NumberedSource, Passage]],
    reason: str = NO_MODEL,
    meaning: Mapping[str, float] | None = None,
    speaker: str | None = None,
) -> Extract:
    """``reason``, then up to three passages, each as a short quote with its ``[n]``.

    ``passages`` pair each numbered source with its passage, best first; ``meaning`` maps
    a sentence's text to its similarity with the query (none: words alone decide);
    ``speaker`` is the person whose words the question asks for, if any."""
    lines = [reason, ""]
    pins: dict[int, str] = {}
    for source, chosen in quotes(query, passages, meaning, speaker):
        said_by = chosen[0].speaker
        who = f"{said_by}: " if said_by else ""
        pins[len(pins)] = chosen[0].text
        lines.append(f'- **{_where(source, chosen[0])}**: {who}"{_quote(chosen)}" [{source.n}]')
    if len(lines) == 2:
        lines.extend(f"- **{s.label}** [{s.n}]" for s, _ in passages[:MAX_QUOTES])
    return Extract("\n".join(lines), pins)


def closest(name: str, candidates: Sequence[str], n: int = 3) -> list[str]:
    """The candidates most like ``name``, comparing whole names and their parts."""
    target = name.casefold().strip()
    scored: list[tuple[float, str]] = []
    for c in candidates:
        parts = [c.casefold(), *c.casefold().split()]
        ratio = max(difflib.SequenceMatcher(None, target, p).ratio() for p in parts)
        if ratio >= 0.5:
            scored.append((ratio, c))
    scored.sort(key=lambda r: (-r[0], r[1]))
    return [c for _, c in scored[:n]]


def _or(names: Sequence[str]) -> str:
    quoted = [f"*{n}*" for n in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def nothing_found(
    question: str,
    filters: SearchFilters,
    speakers: Sequence[str],
    sources: Sequence[SourceInfo],
    kb: str,
) -> str:
    """ "I couldn't find anything about X" and what to try instead."""
    topic = " ".join(question.split()).rstrip("?!. ")
    if len(topic) > 80:
        topic = topic[:80].rsplit(" ", 1)[0] + " ..."
    head = f"I couldn't find anything about \u201c{topic}\u201d in the archive."
    if not sources:
        return (
            f"{head} The knowledge base *{kb}* is empty: add recordings and documents "
            "with `quorum ingest PATH`."
        )
    tips: list[str] = []
    if filters.after or filters.before:
        span = " and ".join(
            part
            for part in (
                f"after {filters.after.isoformat()}" if filters.after else "",
                f"before {filters.before.isoformat()}" if filters.before else "",
            )
            if part
        )
        tips.append(f"Widen the dates: only recordings {span} were searched.")
    if filters.speaker:
        near = [s for s in closest(filters.speaker, speakers) if s != filters.speaker]
        known = any(filters.speaker.casefold() in s.casefold() for s in speakers)
        if near and not known:
            tips.append(
                f"No one called *{filters.speaker}* speaks in the archive; "
                f"did you mean {_or(near)}?"
            )
        else:
            tips.append(f"Drop the speaker filter (*{filters.speaker}*) to search everyone.")
    if filters.source or filters.source_ids:
        titles = [i.source.title for i in sources]
        near = closest(filters.source, titles) if filters.source else []
        if near:
            tips.append(f"Drop the source filter, or try {_or(near)}.")
        else:
            tips.append("Drop the source filter to search every source.")
    if filters.kind or filters.lesson is not None:
        tips.append("Drop the kind or lesson filter.")
    if not tips:
        tips.append("Try other words, or a broader question.")
    recent = ", ".join(f"*{i.source.title}*" for i in sources[:3])
    more = f" and {len(sources) - 3} more" if len(sources) > 3 else ""
    tips.append(f"The archive has {len(sources)} sources, e.g. {recent}{more}.")
    return head + "\n\n" + "\n".join(f"- {t}" for t in tips)
