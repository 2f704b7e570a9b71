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

import logging
import math
import operator
import re
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from bot.cite.citations import MARKER, at_second, parse_numbers
from bot.cite.sentences import Sentence, link_second, sentences_of
from bot.cite.vectors import sentence_vectors
from bot.models import Answer, Citation, NumberedSource
from bot.words import matches, terms
from retrieval.encoding.embed import Embedder
from retrieval.models import Segment

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


PREFIX = 4  # ``matches``: words shorter than this match only exactly


class Vocabulary:
    """The words of one source's sentences, and for a claim's term the words it
    ``matches`` (found once per term: comparing every term with every word of every
    sentence was most of alignment's time)."""

    def __init__(self, words: set[str]) -> None:
        self.words = words
        self.by_prefix: dict[str, list[str]] = {}
        for w in words:
            if len(w) >= PREFIX:
                self.by_prefix.setdefault(w[:PREFIX], []).append(w)
        self._found: dict[str, frozenset[str]] = {}

    def matching(self, term: str) -> frozenset[str]:
        """The words ``term`` matches (itself, or a long shared prefix)."""
        found = self._found.get(term)
        if found is None:
            near = self.by_prefix.get(term[:PREFIX], []) if len(term) >= PREFIX else []
            exact = [term] if term in self.words else []
            found = frozenset([*exact, *(w for w in near if matches(term, w))])
            self._found[term] = found
        return found


def lexical_row(
    claim: Sequence[str], bags: Sequence[set[str]], weights: Mapping[str, float], vocab: Vocabulary
) -> list[float]:
    """Per sentence (its ``bag`` of words), the weighted share of the claim's words it
    holds (0..1); ``vocab`` holds every word of the source the bags belong to."""
    if not claim:
        return [0.0] * len(bags)
    top = max(weights.values(), default=1.0)
    wanted = [(weights.get(t, top), vocab.matching(t)) for t in claim]
    total = sum(w for w, _ in wanted)
    if not total:
        return [0.0] * len(bags)
    return [sum(w for w, m in wanted if not bag.isdisjoint(m)) / total for bag in bags]


_SENTENCES: OrderedDict[tuple[object, ...], list[Sentence]] = OrderedDict()


def _sentences(seg: Segment) -> list[Sentence]:
    """``sentences_of(seg)``, remembered: while Claude streams, every new marker plans
    the alignment again over the same sources."""
    key = (seg.text, seg.marks, seg.speakers, seg.start_s, seg.end_s)
    found = _SENTENCES.get(key)
    if found is None:
        found = _SENTENCES[key] = sentences_of(seg)
        while len(_SENTENCES) > 256:
            _SENTENCES.popitem(last=False)
    else:
        _SENTENCES.move_to_end(key)
    return found


def _dot(a: Sequence[float], b: Sequence[float]) -> float:
    # our vectors are L2-normalised: cosine is the dot product (map is ~2x a generator)
    return float(sum(map(operator.mul, a, b)))


def citation_of(n: int, moment: Moment) -> Citation:
    """The citation numbered ``n`` for a moment: link, label and speaker of its sentence."""
    source, sentence = moment.source, moment.sentence
    hit = source.hit
    second = link_second(sentence) if sentence else None
    if second is None:
        link, label, start = hit.link, source.label, hit.segment.start_s
    else:
        label, link = at_second(hit, second, sentence.start_s if sentence else None)
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
        sentences = {n: _sentences(by_n[n].hit.segment) for n in cited}
        stats = {n: _weights(sentences[n]) for n in cited}
        vocab = {n: Vocabulary(set().union(*stats[n][0])) for n in cited}
        lex: dict[tuple[int, int], list[float]] = {}
        short: dict[tuple[int, int], list[int]] = {}
        for k, claim in enumerate(found):
            words = terms(claim.text)
            for n in claim.numbers:
                if n not in cited:
                    continue
                bags, weights = stats[n]
                row = lexical_row(words, bags, weights, vocab[n])
                order = sorted(range(len(row)), key=lambda i: (-row[i], i))
                lex[(k, n)] = row
                short[(k, n)] = order if not any(row) else order[:SHORTLIST]
        return cls(by_n, sentences, lex, short, [c.text for c in found])

    def texts(self, pinned: Collection[int] = ()) -> list[str]:
        """Every text whose vector the alignment needs (none for a ``pinned`` claim:
        its sentence is known)."""
        picked = [
            self.sentences[n][i].text
            for (k, n), idx in self.shortlist.items()
            if k not in pinned
            for i in idx
        ]
        claims = [c for k, c in enumerate(self.claims) if k not in pinned]
        return list(dict.fromkeys([*claims, *picked]))


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
        # an extractive answer pins every claim: it then costs no encoding at all
        vectors = await self._vectors(plan.texts(pins or {}))
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
                meant = vectors if k not in (pins or {}) else None
                scores: dict[int, float] = {}
                for i in plan.shortlist[(k, n)]:
                    score = LEXICAL_WEIGHT * lex[i]
                    if meant is not None:
                        score += _dot(meant[claim.text], meant[options[i].text])
                    scores[i] = score / (1 + LEXICAL_WEIGHT if meant else LEXICAL_WEIGHT)
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
