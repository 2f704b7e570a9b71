"""Who writes a quick answer from its numbered passages: the model, streamed (alignment's
texts encoded while it writes), or, without a model (none set up, or chosen off) or when
it fails or says nothing, the extractive quotes (``bot.answer.extractive``), each
sentence's meaning compared to the query with MiniLM.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from bot.answer import prompts
from bot.answer.extractive import MODEL_OFF, NO_MODEL, UNAVAILABLE, extractive
from bot.answer.passages import Passage
from bot.cite.align import texts_to_compare
from bot.cite.vectors import SentenceVectors
from bot.errors import LLMError
from bot.llm import LLM, Usage
from bot.models import AnswerKind, EventSink, NumberedSource, PartialAnswer
from bot.models import ProgressEvent as Progress
from bot.sessions import Exchange
from bot.words import shared, terms
from retrieval.encoding.embed import cosine

log = logging.getLogger("quorum.answer")
EXTRACT_PASSAGES = 3  # the extractive answer compares meaning in this many passages
SHARED_WORDS = 2  # ... and in the others, the sentences holding this many of the query's words


class Clock:
    """Milliseconds per step, and the LLM time spent against one deadline."""

    def __init__(self, llm_budget_s: float) -> None:
        self.t0 = time.perf_counter()
        self.ms: dict[str, float] = {}
        self.llm_left_s = llm_budget_s

    def lap(self, name: str, since: float) -> float:
        now = time.perf_counter()
        self.ms[name] = self.ms.get(name, 0.0) + (now - since) * 1000
        return now


class Writer:
    """Writes the answer: Claude when there is one, else (or when it fails) extractively."""

    def __init__(
        self,
        llm: LLM | None,
        embedder: SentenceVectors | None,
        max_tokens: int = 1200,
        model_off: bool = False,
    ) -> None:
        self.llm = llm
        self.embedder = embedder
        self.max_tokens = max_tokens
        # without a model: chosen off (QUORUM_LLM=none), or none set up
        self.no_model = MODEL_OFF if model_off else NO_MODEL

    async def write(
        self,
        question: str,
        query: str,
        history: Sequence[Exchange],
        best_first: Sequence[tuple[NumberedSource, Passage]],
        clock: Clock,
        usage: Usage,
        emit: EventSink,
        meaning: dict[str, float],
        speaker: str | None = None,
    ) -> tuple[str, AnswerKind, dict[int, str]]:
        """Claude's answer (streamed), or the extractive one when Claude is absent or fails.

        ``best_first`` pairs each numbered source with its passage, best passage first;
        ``speaker`` is the person whose words the question asks for, if any."""

        async def fallback(reason: str) -> tuple[str, AnswerKind, dict[int, str]]:
            t = time.perf_counter()
            near = meaning or await self.meaning(query, [p for _, p in best_first], speaker)
            found = extractive(query, best_first, reason, near, speaker)
            clock.lap("extractive", t)
            return found.text, "extractive", found.pins

        if self.llm is None:
            return await fallback(self.no_model)
        await emit(Progress("Writing the answer..."))
        sources = sorted((n for n, _ in best_first), key=lambda s: s.n)  # as numbered

        async def partial(text_so_far: str) -> None:
            await emit(PartialAnswer(text_so_far))
            if self.embedder is not None:
                # While Claude writes, encode what alignment will compare: each claim is
                # final once its marker has streamed, and so is its shortlist.
                self.embedder.prefetch(texts_to_compare(text_so_far, sources))

        t = time.perf_counter()
        try:
            done = await self.llm.stream(
                system=prompts.SYSTEM_PROMPT,
                messages=prompts.answer_messages(question, history, sources),
                max_tokens=self.max_tokens,
                on_text=partial,
                timeout_s=max(0.001, clock.llm_left_s),
            )
        except LLMError as exc:
            log.warning("the model failed (%s); answering extractively", exc)
            return await fallback(UNAVAILABLE)
        finally:
            clock.llm_left_s -= time.perf_counter() - t
            clock.lap("llm", t)
        usage.add(done.usage)
        if not done.text.strip():
            log.warning("the model returned an empty answer; answering extractively")
            return await fallback(UNAVAILABLE)
        return done.shown(), "answer", {}

    async def meaning(
        self, query: str, passages: Sequence[Passage], speaker: str | None = None
    ) -> dict[str, float]:
        """The similarity in meaning to the query (MiniLM cosine) of every sentence of the
        first ``EXTRACT_PASSAGES`` passages (best first), and of the sentences of the
        others that hold ``SHARED_WORDS`` of the query's words or are said by ``speaker``
        (the person the question asks about: "what did Dana ask for ..." is answered in
        her words, which need not repeat the question's); empty without an embedder or
        when it fails (words alone then pick the quotes).

        Unencoded, a sentence competes by words alone and loses to any sentence that was
        encoded: "John, can you own a two-week spike on Cognito?" in the fifth passage
        answered "who was given the two-week Cognito spike?" best. Those few sentences
        (2 per answer on average, over examples/eval.jsonl and QMSum val's first 120)
        gave 22 of 35 first citations inside the gold, from 21, and 49 of 120 on QMSum,
        unchanged; every passage's sentences cost a median of 97 more to encode."""
        words = terms(query)
        first = [s.text for p in passages[:EXTRACT_PASSAGES] for s in p.sentences]
        rest = [
            s.text
            for p in passages[EXTRACT_PASSAGES:]
            for s in p.sentences
            if len(shared(words, s.text)) >= SHARED_WORDS or (speaker and s.speaker == speaker)
        ]
        texts = list(dict.fromkeys(first + rest))
        if self.embedder is None or not texts:
            return {}
        try:
            q = await self.embedder.embed_query(query)
            rows = await self.embedder.embed_documents(texts)
        except Exception:
            log.warning("embedding sentences for the extractive answer failed", exc_info=True)
            return {}
        return {t: cosine(q, v) for t, v in zip(texts, rows, strict=True)}
