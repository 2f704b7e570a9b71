"""Quick mode: one question in, one cited answer out.

Rewrite a follow-up into a standalone query -> search with the question's filters ->
widen hits with their neighbours and merge -> numbered sources within the token budget ->
Claude writes the answer citing ``[n]`` (streamed) -> citations checked and linked. (The
engine checked the question first: ``bot.answer.followup.precheck``.) Without an API key,
or when Claude fails, the answer is extractive; with no hits it says what to try instead.
All LLM calls of one question share one deadline.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any

from bot.answer import prompts
from bot.answer.expand import RERANK_TOP, alternative_queries, fuse, is_hard, model_rerank
from bot.answer.extractive import nothing_found
from bot.answer.followup import error_answer, heuristic_rewrite, looks_like_follow_up
from bot.answer.passages import Passage, assemble, merge, widen
from bot.answer.relevance import relevant
from bot.answer.understand import choice_note, understand
from bot.answer.write import Clock, Writer
from bot.cite.citations import resolve
from bot.cite.vectors import sentence_vectors
from bot.config import Settings
from bot.errors import LLMError
from bot.llm import LLM, Usage
from bot.models import Answer, EventSink, NumberedSource, Question, guarded_sink
from bot.models import ProgressEvent as Progress
from bot.sessions import Exchange
from retrieval.archive import Archive
from retrieval.encoding.embed import Embedder
from retrieval.models import Hit, SearchFilters
from retrieval.search.names import choose_sources
from retrieval.search.search import MAX_QUERY_CHARS

# re-exported: callers and tests import the question checks from the pipeline
__all__ = [
    "AnswerConfig",
    "Outcome",
    "QuickAnswerer",
    "SearchRecord",
    "error_answer",
    "heuristic_rewrite",
    "looks_like_follow_up",
]

log = logging.getLogger("quorum.answer")
# A best window this close to the question in meaning (MiniLM cosine, from the stored
# vectors: free) is relevant; under it, the top passages' sentences are compared one by
# one (bot.answer.relevance.relevant), which costs an encode. Of the 53 answerable questions
# of examples/eval.jsonl and bench/answer.py, 7 fall under it, as do both unanswerable.
RELEVANT_WINDOW = 0.35


@dataclass(frozen=True)
class AnswerConfig:
    """The pipeline's knobs (from Settings)."""

    max_question_chars: int = 4000
    search_k: int = 8
    context_token_budget: int = 6000
    answer_max_tokens: int = 1200
    llm_timeout_s: float = 60.0
    rewrite_timeout_s: float = 10.0
    rewrite_max_tokens: int = 120
    neighbours: int = 1
    expand_queries: bool = False  # with a model: other phrasings of a hard question
    model_rerank: bool = False  # with a model: its fast model orders the top 20
    model_off: bool = False  # QUORUM_LLM=none: answers are extractive by choice

    @classmethod
    def from_settings(cls, s: Settings) -> AnswerConfig:
        """The config Settings describe."""
        return cls(
            max_question_chars=s.max_question_chars,
            search_k=s.search_k,
            context_token_budget=s.context_token_budget,
            answer_max_tokens=s.answer_max_tokens,
            llm_timeout_s=s.llm_timeout_s,
            rewrite_timeout_s=min(10.0, s.llm_timeout_s),
            expand_queries=s.expand_queries,
            model_rerank=s.model_rerank,
            model_off=s.llm == "none",
        )


@dataclass(frozen=True)
class SearchRecord:
    """One search made while answering (for the query log)."""

    query: str
    filters: SearchFilters
    hit_ids: tuple[str, ...]
    ms: float


@dataclass
class Outcome:
    """An answer with what it cost and what it searched (deep research returns one too)."""

    answer: Answer
    usage: Usage = field(default_factory=Usage)
    searches: list[SearchRecord] = field(default_factory=list)
    trace: Any = None
    pins: dict[int, str] = field(default_factory=dict)  # marker index -> quoted sentence


def _search_text(query: str) -> str:
    text = " ".join(query.split())
    if len(text) <= MAX_QUERY_CHARS:
        return text
    return text[:MAX_QUERY_CHARS].rsplit(" ", 1)[0]


class QuickAnswerer:
    """The quick answer pipeline over one knowledge base's archive."""

    def __init__(
        self,
        llm: LLM | None,
        config: AnswerConfig | None = None,
        embedder: Embedder | None = None,
        today: Callable[[], date] = date.today,
    ) -> None:
        self.llm = llm
        self.today = today  # dates in questions ("last week") are relative to this
        self.config = config or AnswerConfig()
        self.writer = Writer(
            llm,
            sentence_vectors(embedder),
            self.config.answer_max_tokens,
            model_off=self.config.model_off,
        )

    async def rewrite(
        self, question: str, history: Sequence[Exchange], clock: Clock, usage: Usage
    ) -> str:
        """A standalone query: Claude's fast model with history, else the heuristic."""
        if not history:
            return question
        if self.llm is None:
            return heuristic_rewrite(question, history)
        t = time.perf_counter()
        try:
            done = await self.llm.complete(
                system=prompts.REWRITE_PROMPT,
                messages=prompts.rewrite_messages(question, history),
                max_tokens=self.config.rewrite_max_tokens,
                model=self.llm.fast_model,
                timeout_s=min(self.config.rewrite_timeout_s, clock.llm_left_s),
            )
        except LLMError as exc:
            log.warning("query rewrite failed (%s); using the heuristic", exc)
            return heuristic_rewrite(question, history)
        finally:
            clock.llm_left_s -= time.perf_counter() - t
        usage.add(done.usage)
        lines = [ln.strip().strip("\"'\u201c\u201d") for ln in done.text.splitlines()]
        query = next((ln for ln in lines if ln), "")
        return query[:MAX_QUERY_CHARS] or heuristic_rewrite(question, history)

    async def answer(
        self,
        question: Question,
        archive: Archive,
        history: Sequence[Exchange] = (),
        on_event: EventSink | None = None,
    ) -> Outcome:
        """Answer ``question`` from ``archive`` in the context of ``history``. The question
        passed the engine's ``precheck`` (not empty, not too long, not a greeting)."""
        clock = Clock(self.config.llm_timeout_s)
        emit = guarded_sink(on_event)
        usage = Usage()
        text = question.text.strip()

        t = time.perf_counter()
        query = _search_text(await self.rewrite(text, history, clock, usage))
        t = clock.lap("rewrite", t)

        await emit(Progress(f"Searching \u201c{query}\u201d..."))
        t = time.perf_counter()
        hits, note, speaker = await self._search(query, question.filters, archive, clock, usage)
        t = clock.lap("search", t)
        searches = [
            SearchRecord(query, question.filters, tuple(h.id for h in hits), clock.ms["search"])
        ]
        scoped = bool(question.filters.source or question.filters.source_ids)
        found = (
            await self._read(query, hits, archive, clock, emit, scoped, speaker) if hits else None
        )
        if found is None:
            return await self._nothing(text, query, question, archive, clock, usage, searches)
        best_first, meaning = found
        reply, kind, pins = await self.writer.write(
            text, query, history, best_first, clock, usage, emit, meaning, speaker
        )
        t = time.perf_counter()
        sources = tuple(sorted((n for n, _ in best_first), key=lambda s: s.n))
        resolved = resolve(reply, sources)
        answer = Answer(
            text=resolved.text,
            kind=kind,
            mode="quick",
            citations=resolved.citations,
            sources=sources,
            standalone_query=query,
            note=note,
        )
        clock.lap("render", t)
        return Outcome(self._timed(answer, clock), usage, searches, pins=pins)

    async def _read(
        self,
        query: str,
        hits: Sequence[Hit],
        archive: Archive,
        clock: Clock,
        emit: EventSink,
        scoped: bool = False,
        speaker: str | None = None,
    ) -> tuple[list[tuple[NumberedSource, Passage]], dict[str, float]] | None:
        """The hits widened, merged and numbered within the budget, best passage first,
        with each sentence's meaning when it was needed; None when no passage is close
        enough to the query to be worth quoting (``bot.answer.relevance.relevant``; more
        leniently when the question is ``scoped`` to one source)."""
        t = time.perf_counter()
        windows = await widen(archive, hits, self.config.neighbours)
        t = clock.lap("expand", t)
        numbered = assemble(merge(hits, windows), self.config.context_token_budget)
        recordings = len({n.hit.source.id for n, _ in numbered})
        t = clock.lap("assemble", t)
        await emit(Progress(f"Reading {len(numbered)} passages from {recordings} sources..."))

        best_first = sorted(numbered, key=lambda item: -item[1].score)
        passages = [p for _, p in best_first]
        meaning: dict[str, float] = {}
        closest = max((h.similarity for h in hits if h.similarity is not None), default=None)
        if closest is not None and closest < RELEVANT_WINDOW:
            meaning = await self.writer.meaning(query, passages, speaker)
        if not relevant(query, [s for p in passages for s in p.sentences], meaning, scoped):
            return None
        clock.lap("relevance", t)
        return best_first, meaning

    async def _search(
        self,
        query: str,
        filters: SearchFilters,
        archive: Archive,
        clock: Clock | None = None,
        usage: Usage | None = None,
    ) -> tuple[list[Hit], str | None, str | None]:
        """Hybrid search, and a note saying what it understood. When the question names a
        recording, a speaker or a date (and no typed option says otherwise), what that
        narrower search finds comes first and the plain search tops it up: a filter when
        it finds enough, a boost when it finds little (``bot.answer.understand``). With a model,
        a hard question is also searched in other words and an optional rerank orders
        the top (``bot.answer.expand``). Also returns the speaker the question asks about."""
        k = self.config.search_k
        rerank = self.llm is not None and self.config.model_rerank
        pool = max(k, RERANK_TOP) if rerank else k
        hits = await archive.search(query, filters, pool)
        known = [i.source for i in await archive.sources()]
        typed = filters.source or filters.source_ids
        notes: list[str] = []
        if filters.source:
            note = choice_note(filters.source, choose_sources(filters.source, known), known)
            notes.extend([note] if note else [])
        speakers = [] if filters.speaker else await archive.speakers()
        dated = filters.after or filters.before
        understood = understand(
            query, [] if typed else known, speakers, None if dated else self.today()
        )
        if not understood.is_empty():
            narrowed = await archive.search(query, understood.narrow(filters), pool)
            if narrowed:
                first = [replace(h, score=1.0 + h.score) for h in narrowed]
                seen = {h.id for h in first}
                hits = first + [h for h in hits if h.id not in seen][: pool - len(first)]
                notes.extend([d] if (d := understood.describe()) else [])
        if self.llm is not None and clock is not None and usage is not None:
            hits = await self._with_claude(query, filters, archive, hits, pool, clock, usage)
        # whose words the question asks for ("what did Marcus say"): the quotes prefer them
        return hits[:k], " ".join(notes) or None, understood.speaker

    async def _with_claude(
        self,
        query: str,
        filters: SearchFilters,
        archive: Archive,
        hits: list[Hit],
        pool: int,
        clock: Clock,
        usage: Usage,
    ) -> list[Hit]:
        """Other phrasings of a hard question fused in, then the optional rerank."""
        assert self.llm is not None
        if self.config.expand_queries and is_hard(hits):
            t = time.perf_counter()
            alternatives = await alternative_queries(
                self.llm, query, min(self.config.rewrite_timeout_s, clock.llm_left_s), usage
            )
            lists = [hits] + [await archive.search(a, filters, pool) for a in alternatives]
            hits = fuse(lists, pool) if alternatives else hits
            clock.llm_left_s -= time.perf_counter() - t
            clock.lap("expand", t)
        if self.config.model_rerank and len(hits) > 1:
            t = time.perf_counter()
            hits = await model_rerank(
                self.llm, query, hits, min(self.config.rewrite_timeout_s, clock.llm_left_s), usage
            )
            clock.llm_left_s -= time.perf_counter() - t
            clock.lap("rerank", t)
        return hits

    async def _nothing(
        self,
        text: str,
        query: str,
        question: Question,
        archive: Archive,
        clock: Clock,
        usage: Usage,
        searches: list[SearchRecord],
    ) -> Outcome:
        """The "nothing found" answer, with what to try instead."""
        known = await archive.sources()
        speakers = await archive.speakers()
        t = time.perf_counter()
        reply = nothing_found(text, question.filters, speakers, known, archive.kb)
        clock.lap("assemble", t)
        answer = Answer(reply, "nothing_found", "quick", standalone_query=query)
        return Outcome(self._timed(answer, clock), usage, searches)

    @staticmethod
    def _timed(answer: Answer, clock: Clock) -> Answer:
        timings = {k: round(v, 2) for k, v in clock.ms.items()}
        timings["total"] = round((time.perf_counter() - clock.t0) * 1000, 2)
        return replace(answer, timings=timings)
