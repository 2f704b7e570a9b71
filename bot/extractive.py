"""Answers without Claude: the best passages quoted briefly (the one or two sentences of
each that share the most weighted words with the query), and the "nothing found" reply
with concrete suggestions (wider dates, no speaker filter, the closest names and titles).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Collection, Sequence

from bot.models import NumberedSource
from bot.passages import Passage, Sentence
from retrieval.links import format_timestamp, media_link
from retrieval.models import SearchFilters, SourceInfo

NO_KEY = "No Claude API key is set, so here are the most relevant passages:"
UNAVAILABLE = "Claude is unavailable right now, so here are the most relevant passages:"
MAX_QUOTES = 3
MAX_QUOTE_CHARS = 360

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


def _stem(word: str) -> str:
    word = word.strip("'-_")
    for suffix in ("'s", "ing", "ed", "es", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 4 else word


def terms(text: str) -> list[str]:
    """The content words of ``text``, stemmed, in order, without repeats."""
    words = (_stem(w) for w in _WORD.findall(text.casefold()) if w not in STOPWORDS)
    return list(dict.fromkeys(w for w in words if len(w) > 1))


def _matches(term: str, word: str) -> bool:
    if term == word:
        return True
    short = min(len(term), len(word))
    return short >= 4 and (word.startswith(term) or term.startswith(word))


def _overlap(query: Sequence[str], words: set[str]) -> set[str]:
    return {t for t in query if any(_matches(t, w) for w in words)}


# What an answer to a kind of question tends to contain ("why" -> "because", "reason").
_CUES: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = (
    (re.compile(r"\bwhy\b", re.I), frozenset("because reason caus due sinc why".split())),
    (
        re.compile(r"\b(?:how much|how many|cost|price|pay|budget)\b", re.I),
        frozenset("dollar thousand hundred percent month cost price".split()),
    ),
    (
        re.compile(r"\b(?:problem|issue|risk|concern|wrong)", re.I),
        frozenset("problem issu risk outag broken fail limit weak slow concern".split()),
    ),
    (re.compile(r"\bwhen\b", re.I), frozenset("date day week month monday friday".split())),
)
CUE_WEIGHT = 0.5
SHORT_WORDS = 8  # sentences shorter than this score proportionally less
KEEP_RATIO = 0.5  # quotes scoring under half the best one are left out


def cues(question: str) -> set[str]:
    """Stems an answer to ``question`` is likely to contain."""
    found: set[str] = set()
    for pattern, stems in _CUES:
        if pattern.search(question):
            found |= stems
    return found


def best_sentences(
    sentences: Sequence[Sentence],
    query: Sequence[str],
    weights: dict[str, float],
    answer_cues: Collection[str] = (),
) -> tuple[float, list[Sentence]]:
    """The one or two most relevant consecutive sentences of a passage and their score.

    A sentence scores the weights of the query words it shares (its speaker's name counts:
    "what did John say" matches John's sentences), plus a little for answer cues."""
    scored: list[float] = []
    for s in sentences:
        words = set(terms(f"{s.text} {s.speaker or ''}"))
        hit = _overlap(query, words)
        cue = CUE_WEIGHT if _overlap(sorted(answer_cues), words) and hit else 0.0
        # "Let's move on." shares a word with "why did we move off Auth0?" and says nothing.
        brevity = min(1.0, len(s.text.split()) / SHORT_WORDS)
        scored.append((sum(weights.get(t, 1.0) for t in hit) + cue) * brevity)
    if not scored:
        return 0.0, []
    best = max(range(len(scored)), key=lambda i: (scored[i], -i))
    picked = [best]
    # A second sentence when it is relevant too, or when the best one is too short
    # to stand alone.
    for j in (best + 1, best - 1):
        if 0 <= j < len(sentences) and sentences[j].speaker == sentences[best].speaker:
            if scored[j] > 0 or len(sentences[best].text) < 60:
                picked.append(j)
                break
    return scored[best], [sentences[i] for i in sorted(picked)]


def _quote(sentences: Sequence[Sentence]) -> str:
    text = " ".join(s.text.strip() for s in sentences)
    if len(text) > MAX_QUOTE_CHARS:
        text = text[:MAX_QUOTE_CHARS].rsplit(" ", 1)[0] + " ..."
    return text.replace('"', "\u201d")


def _where(source: NumberedSource, first: Sentence) -> str:
    """The quote's label: the passage's, or, for a recording, a link to the quoted moment
    when it is not where the passage starts."""
    hit = source.hit
    start = hit.segment.start_s
    if first.start_s is None or start is None or not hit.source.url or first.start_s - start < 5:
        return source.label
    label = f"{hit.source.title} @ {format_timestamp(first.start_s)}"
    return f"[{label}]({media_link(hit.source.url, first.start_s)})"


def extractive(
    query: str, passages: Sequence[tuple[NumberedSource, Passage]], reason: str = NO_KEY
) -> str:
    """``reason``, then up to three passages, each as a short quote with its ``[n]``.

    ``passages`` pair each numbered source with its passage, best first."""
    q = terms(query)
    df: dict[str, int] = {}
    for _, p in passages:
        for t in _overlap(q, {w for s in p.sentences for w in terms(s.text)}):
            df[t] = df.get(t, 0) + 1
    weights = {t: math.log(1 + (len(passages) + 1) / (1 + df.get(t, 0))) for t in q}
    wanted = cues(query)
    found: list[tuple[float, NumberedSource, list[Sentence]]] = []
    for source, p in passages:
        score, chosen = best_sentences(p.sentences, q, weights, wanted)
        if chosen:
            found.append((score, source, chosen))
    # Passages keep the search's order (it ranks by meaning too); the words only pick
    # which sentences to quote, and drop passages that share none with the query.
    top = max((f[0] for f in found), default=0.0)
    ranked = [f for f in found if f[0] > 0 and f[0] >= KEEP_RATIO * top] or found[:1]
    lines = [reason, ""]
    for _, source, chosen in ranked[:MAX_QUOTES]:
        speaker = chosen[0].speaker
        who = f"{speaker}: " if speaker else ""
        lines.append(f'- **{_where(source, chosen[0])}**: {who}"{_quote(chosen)}" [{source.n}]')
    if len(lines) == 2:
        lines.extend(f"- **{s.label}** [{s.n}]" for s, _ in passages[:MAX_QUOTES])
    return "\n".join(lines)


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
