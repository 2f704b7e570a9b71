"""Citations resolved to moments: every ``[n]`` of an answer points at the one sentence of
source n that supports the answer sentence carrying it.

A numbered source is a passage of up to three windows (two or three minutes of a
recording). Linking ``[2]`` to the passage's start sends the user 30-80 s before the
words the answer relies on; so after the answer is written (quick, deep or extractive)
each marker is aligned:

1. The *claim* of a marker is the clause before it (back to the previous marker or the
   sentence start), or its whole sentence when the clause is too short to compare.
2. Each sentence of the cited source scores ``cosine(claim, sentence)`` with the packaged
   MiniLM (already loaded for search) plus ``LEXICAL_WEIGHT`` times the share of the
   claim's content words it holds, weighted by how rare each word is in that source.
3. The best sentence is the citation's moment: its link opens the recording at the
   sentence's start, with a short lead-in but never before its own cue; its label shows
   that time and that sentence's speaker; ``support`` keeps the score.
4. One citation per (source, moment): a source's first moment keeps its number (so
   the streamed text does not change under the reader), and another moment of the same
   source takes a new number after the last source. Two ``[2]`` that point at different
   moments of one recording become two links, and the text shows exactly the links the
   citations carry.

A claim whose best sentence scores under ``MIN_SUPPORT`` is not traced to the source:
its marker is dropped and the answer says so (``grounding`` below).
"""

from __future__ import annotations

import asyncio
import logging
import math
import re
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from bot.citations import MARKER, at_second, parse_numbers
from bot.extractive import matches, terms
from bot.models import Answer, Citation, NumberedSource
from bot.passages import Sentence, link_second, sentences_of
from retrieval.embed import Embedder, cosine

log = logging.getLogger("quorum.align")

LEXICAL_WEIGHT = 0.6
MIN_CLAIM_TERMS = 3
# Under this a cited sentence does not support its claim (chosen on the evals; see
# bench/citations.py and examples/eval.jsonl): the marker is dropped.
MIN_SUPPORT = 0.2
UNTRACED_NOTE = (
    "A claim in this answer could not be traced to the passage it cited, so that "
    "citation was removed."
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n")
_MARKDOWN = re.compile(r"[*_`>#]+|^\s*(?:[-+]|\d+[.)])\s+", re.M)


@dataclass(frozen=True)
class Claim:
    """The words one marker vouches for, and the numbers it cites."""

    marker: re.Match[str]
    text: str
    numbers: tuple[int, ...]


@dataclass(frozen=True)
class Moment:
    """Where a cited source supports a claim: one sentence, its second and how well."""

    source: NumberedSource
    sentence: Sentence | None
    support: float

    @property
    def key(self) -> tuple[int, str | None]:
        """Two citations with one key are one link."""
        return (self.source.n, self.sentence.text if self.sentence else None)


def _clean(text: str) -> str:
    return " ".join(_MARKDOWN.sub(" ", MARKER.sub(" ", text)).split()).lstrip(",;:-–— ")


def claims(text: str) -> list[Claim]:
    """Every marker of ``text`` with the claim it cites (see the module docstring)."""
    out: list[Claim] = []
    prev_end = 0
    prev_claim = ""
    for m in MARKER.finditer(text):
        numbers = tuple(parse_numbers(m.group(2)))
        if out and not text[prev_end : m.start()].strip():
            # "[2][5]": the second marker cites the same words as the first
            out.append(Claim(m, prev_claim, numbers))
            prev_end = m.end()
            continue
        head = text[: m.start()].rstrip()
        body = head[:-1] if head.endswith((".", "!", "?", ":", ";")) else head
        pieces = _SENTENCE_END.split(body)
        sentence = pieces[-1] if pieces else body
        start = len(body) - len(sentence)
        clause = body[max(start, prev_end) :] if prev_end > start else sentence
        claim = _clean(clause)
        if len(terms(claim)) < MIN_CLAIM_TERMS:
            claim = _clean(sentence)
            if len(terms(claim)) < MIN_CLAIM_TERMS and len(pieces) > 1:
                claim = _clean(f"{pieces[-2]} {sentence}")
        out.append(Claim(m, claim, numbers))
        prev_end, prev_claim = m.end(), claim
    return out


def _weights(sentences: Sequence[Sentence]) -> tuple[list[set[str]], dict[str, float]]:
    bags = [set(terms(f"{s.text} {s.speaker or ''}")) for s in sentences]
    df: dict[str, int] = {}
    for bag in bags:
        for t in bag:
            df[t] = df.get(t, 0) + 1
    n = len(bags)
    return bags, {t: math.log(1 + (n + 1) / (1 + c)) for t, c in df.items()}


def lexical(claim: Sequence[str], bag: set[str], weights: Mapping[str, float]) -> float:
    """The weighted share of the claim's words found in ``bag`` (0..1)."""
    if not claim:
        return 0.0
    top = max(weights.values(), default=1.0)
    total = sum(weights.get(t, top) for t in claim)
    found = sum(weights.get(t, top) for t in claim if any(matches(t, w) for w in bag))
    return found / total if total else 0.0


def citation_of(n: int, moment: Moment) -> Citation:
    """The citation numbered ``n`` for a moment: link, label and speaker of its sentence."""
    source, sentence = moment.source, moment.sentence
    hit = source.hit
    second = link_second(sentence) if sentence else None
    if second is None:
        link, label, start = hit.link, source.label, hit.segment.start_s
    else:
        label, link = at_second(hit, second)
        start = second
    speaker = sentence.speaker if sentence and sentence.speaker else hit.segment.speaker
    return Citation(
        n=n,
        hit_id=hit.id,
        title=hit.source.title,
        link=link,
        label=label,
        start_s=start,
        page=hit.segment.page,
        speaker=speaker,
        support=round(moment.support, 3),
        source_n=source.n,
        quote=sentence.text if sentence else None,
    )


class SentenceVectors:
    """The embedder, remembering sentence vectors (an Embedder itself).

    The quick path ``prefetch``-es its passages' sentences while Claude writes, so when
    the answer arrives only its own few claims still need encoding; a thread's
    follow-ups see the same passages again."""

    def __init__(self, embedder: Embedder, size: int = 8192) -> None:
        self.embedder = embedder
        self.size = size
        self._rows: OrderedDict[str, list[float]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[list[float]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def dim(self) -> int:
        """Vector length."""
        return self.embedder.dim

    async def embed_query(self, text: str) -> list[float]:
        """A search query's vector (the embedder caches those itself)."""
        return await self.embedder.embed_query(text)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text: remembered, being computed, or computed now in one batch."""
        loop = asyncio.get_running_loop()
        mine = [t for t in dict.fromkeys(texts) if t not in self._rows and t not in self._pending]
        for t in mine:
            self._pending[t] = loop.create_future()
        if mine:
            try:
                rows = await self.embedder.embed_documents(mine)
            except BaseException as exc:
                for t in mine:  # waiters on these texts fail (or stop) with this call
                    future = self._pending.pop(t)
                    if isinstance(exc, Exception):
                        future.set_exception(exc)
                        future.exception()  # marked retrieved: no warning if none waits
                    else:
                        future.cancel()
                raise
            for t, row in zip(mine, rows, strict=True):
                self._rows[t] = row
                future = self._pending.pop(t)
                if not future.done():
                    future.set_result(row)
        out: list[list[float]] = []
        for t in texts:
            known = self._rows.get(t)
            if known is None:
                known = await asyncio.shield(self._pending[t])
            else:
                self._rows.move_to_end(t)
            out.append(known)
        while len(self._rows) > self.size:
            self._rows.popitem(last=False)
        return out

    def prefetch(self, texts: Sequence[str]) -> None:
        """Start computing vectors for ``texts`` in the background."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._rows]
        if not missing:
            return

        async def run() -> None:
            try:
                await self.embed_documents(missing)
            except Exception:
                log.debug("prefetching sentence vectors failed", exc_info=True)

        task = asyncio.get_running_loop().create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def sentence_vectors(embedder: Embedder | None) -> SentenceVectors | None:
    """``embedder`` as a ``SentenceVectors`` (the same one if it already is)."""
    if embedder is None or isinstance(embedder, SentenceVectors):
        return embedder
    return SentenceVectors(embedder)


@dataclass(frozen=True)
class Alignment:
    """An aligned answer, and the claims (``"text [n]"``) whose citation was dropped."""

    answer: Answer
    untraced: tuple[str, ...] = ()


SHORTLIST = 12  # sentences per (claim, source) compared in meaning, best by words first


@dataclass
class Plan:
    """What alignment compares: each cited source's sentences, the words each claim
    shares with them, and per (claim, source) the shortlist compared in meaning (the
    best by words; every sentence when none shares a word: a pure paraphrase)."""

    by_n: dict[int, NumberedSource]
    sentences: dict[int, list[Sentence]]
    lexical: dict[tuple[int, int], list[float]]
    shortlist: dict[tuple[int, int], list[int]]
    claims: list[str]

    @classmethod
    def of(cls, found: Sequence[Claim], sources: Sequence[NumberedSource]) -> Plan:
        """The plan for ``found`` over ``sources``."""
        by_n = {s.n: s for s in sources}
        cited = {n for c in found for n in c.numbers if n in by_n}
        sentences = {n: sentences_of(by_n[n].hit.segment) for n in cited}
        stats = {n: _weights(sentences[n]) for n in cited}
        lex: dict[tuple[int, int], list[float]] = {}
        short: dict[tuple[int, int], list[int]] = {}
        for k, claim in enumerate(found):
            words = terms(claim.text)
            for n in claim.numbers:
                if n not in cited:
                    continue
                bags, weights = stats[n]
                row = [lexical(words, bag, weights) for bag in bags]
                order = sorted(range(len(row)), key=lambda i: (-row[i], i))
                lex[(k, n)] = row
                short[(k, n)] = order if not any(row) else order[:SHORTLIST]
        return cls(by_n, sentences, lex, short, [c.text for c in found])

    def texts(self) -> list[str]:
        """Every text whose vector the alignment needs."""
        picked = [self.sentences[n][i].text for (_, n), idx in self.shortlist.items() for i in idx]
        return list(dict.fromkeys([*self.claims, *picked]))


def texts_to_compare(text: str, sources: Sequence[NumberedSource]) -> list[str]:
    """The texts alignment will encode for ``text`` (an answer, or as much as has
    streamed): prefetch them while Claude writes."""
    return Plan.of(claims(text), sources).texts()


class Aligner:
    """Resolves an answer's citations to moments (see the module docstring)."""

    def __init__(self, embedder: Embedder | None = None) -> None:
        self.vectors = sentence_vectors(embedder)

    async def _vectors(self, texts: Sequence[str]) -> dict[str, list[float]] | None:
        if self.vectors is None or not texts:
            return None
        try:
            unique = list(dict.fromkeys(texts))
            return dict(zip(unique, await self.vectors.embed_documents(unique), strict=True))
        except Exception:  # alignment must never cost the answer: fall back to words
            log.warning("embedding for citation alignment failed; using words only")
            return None

    async def moments(
        self,
        found: Sequence[Claim],
        sources: Sequence[NumberedSource],
        pins: Mapping[int, str] | None = None,
    ) -> list[list[Moment]]:
        """For each claim, one moment per number it cites (``pins`` fixes the sentence
        of a claim by its index: an extractive quote cites what it quotes)."""
        plan = Plan.of(found, sources)
        vectors = await self._vectors(plan.texts())
        out: list[list[Moment]] = []
        for k, claim in enumerate(found):
            row: list[Moment] = []
            for n in claim.numbers:
                if n not in plan.by_n:
                    continue
                options = plan.sentences[n]
                if not options:
                    row.append(Moment(plan.by_n[n], None, 0.0))
                    continue
                lex = plan.lexical[(k, n)]
                scores: dict[int, float] = {}
                for i in plan.shortlist[(k, n)]:
                    score = LEXICAL_WEIGHT * lex[i]
                    if vectors is not None:
                        score += cosine(vectors[claim.text], vectors[options[i].text])
                    scores[i] = score / (1 + LEXICAL_WEIGHT if vectors else LEXICAL_WEIGHT)
                best = max(scores, key=lambda i: (scores[i], -i))
                pinned = (pins or {}).get(k)
                if pinned is not None:
                    want = " ".join(pinned.split())
                    best = next(
                        (i for i, s in enumerate(options) if " ".join(s.text.split()) == want),
                        best,
                    )
                support = scores.get(best, LEXICAL_WEIGHT * lex[best] / (1 + LEXICAL_WEIGHT))
                row.append(Moment(plan.by_n[n], options[best], max(0.0, support)))
            out.append(row)
        return out

    async def align(
        self, answer: Answer, pins: Mapping[int, str] | None = None, *, check: bool = True
    ) -> Alignment:
        """``answer`` with every marker resolved to a moment (a second moment of one source
        gets its own number); markers whose claim has no support are dropped (unless
        pinned) and listed."""
        found = claims(answer.text)
        if not found or not answer.sources:
            return Alignment(answer)
        per_claim = await self.moments(found, answer.sources, pins)
        numbers: dict[tuple[int, str | None], int] = {}
        spare = [max(s.n for s in answer.sources)]  # the last number handed out
        citations: list[Citation] = []
        untraced: list[str] = []
        parts: list[str] = []
        cursor = 0
        for k, (claim, row) in enumerate(zip(found, per_claim, strict=True)):
            shown: list[int] = []
            for moment in row:
                if check and k not in (pins or {}) and moment.support < MIN_SUPPORT:
                    untraced.append(f"{claim.text} [{moment.source.n}]")
                    continue
                if moment.key not in numbers:
                    numbers[moment.key] = self._number(moment, numbers, spare)
                    citations.append(citation_of(numbers[moment.key], moment))
                if numbers[moment.key] not in shown:
                    shown.append(numbers[moment.key])
            m = claim.marker
            parts.append(answer.text[cursor : m.start()])
            if shown:
                parts.append(f"{m.group(1)}[{', '.join(map(str, shown))}]")
            cursor = m.end()
        parts.append(answer.text[cursor:])
        text = "".join(parts)
        note = answer.note
        if untraced:
            text = re.sub(r"[ \t]+([.,;:!?])", r"\1", text)
            text = re.sub(r"[ \t]{2,}", " ", text).strip()
            note = f"{note} {UNTRACED_NOTE}" if note else UNTRACED_NOTE
            log.info("dropped %d citation(s) without support", len(untraced))
        citations.sort(key=lambda c: c.n)
        aligned = replace(answer, text=text, citations=tuple(citations), note=note)
        return Alignment(aligned, tuple(untraced))

    @staticmethod
    def _number(
        moment: Moment, numbers: Mapping[tuple[int, str | None], int], spare: list[int]
    ) -> int:
        """A source's first moment keeps its number (the text streamed so far stays as it
        was); another moment of the same source takes the next number after all sources."""
        if moment.source.n not in numbers.values():
            return moment.source.n
        spare[0] += 1
        return spare[0]
