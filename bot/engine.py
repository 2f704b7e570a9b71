"""The core the adapters call (``bot.models.Core``): a question in its thread's context in,
an Answer out, progress events in between.

``Engine.ask`` loads the thread's history, picks the knowledge base's archive, routes the
question (through the ``research`` hook when there is one, which picks quick or deep;
else quick, with a note when deep was asked for), stores the exchange
and its searches, and turns every failure a user can meet into an Answer of kind "error"
with one sentence. Tracebacks go to the log, never a question's or answer's text.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from bot.answer import prompts
from bot.answer.answer import AnswerConfig, Outcome, QuickAnswerer
from bot.answer.followup import error_answer, precheck
from bot.cite.align import Aligner
from bot.cite.citations import citation_json, resolve, source_json
from bot.cite.vectors import sentence_vectors
from bot.config import Settings
from bot.errors import InvalidInput, LLMError, QuorumError, SearchUnavailable
from bot.llm import CUT_LINE, LLM, Message
from bot.models import Answer, EventSink, Library, Question, ThreadKey, guarded_sink
from bot.research.loop import Researcher
from bot.router import ResearchRouter
from bot.sessions import Exchange, ExchangeRecord, QueryRecord, Sessions, clip
from bot.sessions.privacy import cited_ids
from retrieval.archive import Archive
from retrieval.encoding.embed import Embedder
from retrieval.models import SearchFilters, SourceInfo

log = logging.getLogger("quorum.engine")
REVISE_TIMEOUT_S = 20.0  # one revision of unsupported claims; the answer stands without it

SEARCH_DOWN = "I can't reach the archive right now, so I can't answer; please try again shortly."
BROKEN = "Something went wrong on my side while answering; please try again."
REMOVED_MEANWHILE = (
    "A source this answer drew on was removed while it was being written, so it is not "
    "kept or shown; please ask again."
)


class ResearchHook(Protocol):
    """Deep research plugged into the engine (``bot.router.ResearchRouter``): given every
    question that needs an answer, it picks quick or deep and answers."""

    async def research(
        self,
        question: Question,
        archive: Archive,
        history: Sequence[Exchange],
        on_event: EventSink | None,
    ) -> Outcome:
        """Answer a question in the mode it calls for."""
        ...


def _filters_json(f: SearchFilters) -> dict[str, object]:
    raw = {
        "speaker": f.speaker,
        "source": f.source,
        "source_ids": list(f.source_ids),
        "lesson": f.lesson,
        "kind": f.kind,
        "after": f.after.isoformat() if f.after else None,
        "before": f.before.isoformat() if f.before else None,
    }
    return {k: v for k, v in raw.items() if v not in (None, [])}


class Engine:
    """Quorum's conversation engine; implements ``bot.models.Core``."""

    def __init__(
        self,
        *,
        archives: Callable[[str], Archive],
        sessions: Sessions,
        llm: LLM | None,
        config: AnswerConfig | None = None,
        history_turns: int = 5,
        research: ResearchHook | None = None,
        embedder: Embedder | None = None,
        library: Library | None = None,
    ) -> None:
        self.archives = archives
        self.library = library
        self.sessions = sessions
        self.llm = llm
        self.config = config or AnswerConfig()
        self.history_turns = history_turns
        vectors = sentence_vectors(embedder)
        self._vectors = vectors
        if research is None:
            # The router is the only path: quick or deep per question (quick without a key).
            quick = QuickAnswerer(llm, self.config, vectors)
            research = ResearchRouter(None if llm is None else Researcher(llm), quick)
        self.research: ResearchHook = research
        self.aligner = Aligner(vectors)

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        *,
        archives: Callable[[str], Archive],
        sessions: Sessions,
        llm: LLM | None,
        research: ResearchHook | None = None,
        embedder: Embedder | None = None,
        library: Library | None = None,
    ) -> Engine:
        """An engine configured by ``settings``."""
        return cls(
            archives=archives,
            sessions=sessions,
            llm=llm,
            config=AnswerConfig.from_settings(settings),
            history_turns=settings.history_turns,
            research=research,
            embedder=embedder,
            library=library,
        )

    async def ask(self, question: Question, on_event: EventSink | None = None) -> Answer:
        """Answer a question in its thread's context; never raises for user-facing trouble."""
        t0, asked_at = time.perf_counter(), time.time()
        sink = guarded_sink(on_event)
        timings: dict[str, float] = {}
        outcome = await self._outcome(question, sink, timings)
        t = time.perf_counter()
        outcome.answer = await self._align(question, outcome, timings)
        spent = (time.perf_counter() - t) * 1000 - timings.get("revise", 0.0)
        timings["align"] = round(spent, 2)
        answer = outcome.answer
        t1 = time.perf_counter()
        if await self._removed_meanwhile(question, outcome, asked_at):
            answer = outcome.answer = error_answer(REMOVED_MEANWHILE, answer.mode)
        exchange_id = await self._store(question, outcome, asked_at)
        t2 = time.perf_counter()
        timings.update(answer.timings)
        timings["store"] = round((t2 - t1) * 1000, 2)
        timings["total"] = round((t2 - t0) * 1000, 2)
        return replace(answer, exchange_id=exchange_id, timings=timings)

    async def warm(self, kb: str, text: str) -> Answer:
        """Answer ``text`` from ``kb`` quickly and extractively, storing nothing: every step
        a quick answer takes (names and dates read, the routed search, passages widened,
        sentences encoded and scored, citations aligned) runs once, so the first real
        question pays none of it (``quorum serve`` calls this before ``/readyz``)."""
        quick = QuickAnswerer(None, self.config, self._vectors)
        question = Question(text, ThreadKey("warm-up", "-", "-", "-"), "quorum", kb)
        await self._history(question.thread)  # the session store's first read
        outcome = await quick.answer(question, self.archives(kb))
        return await self._align(question, outcome, {})

    async def _outcome(
        self, question: Question, sink: EventSink | None, timings: dict[str, float]
    ) -> Outcome:
        early = precheck(question, self.config.max_question_chars)
        if early is not None:
            return Outcome(early)
        try:
            archive = self.archives(question.kb)
            t = time.perf_counter()
            history = await self._history(question.thread)
            timings["history"] = round((time.perf_counter() - t) * 1000, 2)
            return await self.research.research(question, archive, history, sink)
        except SearchUnavailable:
            log.error("search is unavailable", exc_info=True)
            return Outcome(error_answer(SEARCH_DOWN))
        except InvalidInput as exc:
            # Written for users (a reversed date range, a bad knowledge base name).
            log.info("question rejected: %s", type(exc).__name__)
            return Outcome(error_answer(str(exc)))
        except QuorumError:
            log.error("answering failed", exc_info=True)
            return Outcome(error_answer(BROKEN))
        except Exception:
            log.exception("answering failed unexpectedly")
            return Outcome(error_answer(BROKEN))

    async def _align(
        self, question: Question, outcome: Outcome, timings: dict[str, float]
    ) -> Answer:
        """Every citation resolved to the sentence it relies on (``bot.cite.align``). Claims no
        cited sentence supports go back to Claude once, named, and the revision is
        aligned again; what is still untraced loses its marker. The answer as it was if
        alignment itself fails."""
        answer = outcome.answer
        if answer.kind not in ("answer", "extractive") or not answer.citations:
            return answer
        try:
            aligned = await self.aligner.align(answer, outcome.pins)
            if not aligned.untraced or answer.kind != "answer" or self.llm is None:
                return aligned.answer
            t = time.perf_counter()
            revised = await self._revise(question, answer, aligned.untraced)
            timings["revise"] = round((time.perf_counter() - t) * 1000, 2)
            if revised is None:
                return aligned.answer
            return (await self.aligner.align(revised)).answer
        except Exception:
            log.exception("citation alignment failed; keeping the passage links")
            return answer

    async def _revise(
        self, question: Question, answer: Answer, untraced: Sequence[str]
    ) -> Answer | None:
        """Claude's answer rewritten after being told which claims its sources do not
        support; None when Claude fails or returns nothing."""
        assert self.llm is not None
        history = await self._history(question.thread)
        messages: list[Message] = [
            *prompts.answer_messages(question.text, history, answer.sources),
            # the model's own words: a cut line is Quorum's, said again if this is cut too
            {"role": "assistant", "content": answer.text.replace(CUT_LINE, "").rstrip()},
            {"role": "user", "content": prompts.revision_request(untraced)},
        ]
        try:
            done = await self.llm.complete(
                system=prompts.SYSTEM_PROMPT,
                messages=messages,
                max_tokens=self.config.answer_max_tokens,
                timeout_s=min(self.config.llm_timeout_s, REVISE_TIMEOUT_S),
            )
        except LLMError as exc:
            log.warning("revising unsupported claims failed (%s)", exc)
            return None
        if not done.text.strip():
            return None
        resolved = resolve(done.shown(), answer.sources)
        log.info("revised an answer with %d unsupported claim(s)", len(untraced))
        return replace(answer, text=resolved.text, citations=resolved.citations)

    async def _history(self, thread: ThreadKey) -> list[Exchange]:
        try:
            return await self.sessions.history(thread, self.history_turns)
        except Exception:
            # A broken session store costs the follow-up context, not the answer.
            log.error("could not load the thread's history", exc_info=True)
            return []

    async def _removed_meanwhile(self, question: Question, outcome: Outcome, since: float) -> bool:
        """True when a source the answer drew on was removed after the question came
        (the store checks again as it writes: a removal may land in between)."""
        cited = cited_ids([source_json(s) for s in outcome.answer.sources], outcome.trace)
        if not cited:
            return False
        try:
            return bool(await self.sessions.removed_since(question.kb, cited, since))
        except Exception:
            log.error("could not check the audit trail for removals", exc_info=True)
            return False

    async def _store(self, question: Question, outcome: Outcome, asked_at: float) -> int | None:
        answer = outcome.answer
        if not question.text.strip():
            return None
        record = ExchangeRecord(
            kb=question.kb,
            user=question.user,
            question=clip(question.text, self.config.max_question_chars),
            answer=answer.text,
            kind=answer.kind,
            mode=answer.mode,
            standalone_query=answer.standalone_query,
            sources=[source_json(s) for s in answer.sources],
            citations=[citation_json(c) for c in answer.citations],
            timings=answer.timings,
            input_tokens=outcome.usage.input_tokens,
            output_tokens=outcome.usage.output_tokens,
            research_trace=outcome.trace,
            asked_at=asked_at,
        )
        queries = [
            QueryRecord(question.kb, s.query, _filters_json(s.filters), s.hit_ids, s.ms)
            for s in outcome.searches
        ]
        try:
            return await self.sessions.add_exchange(question.thread, record, queries)
        except Exception:
            log.error("could not store the exchange", exc_info=True)
            return None

    async def claim_event(self, platform: str, event_id: str) -> bool:
        """True the first time an event id is seen (persisted), False for a redelivery."""
        return await self.sessions.claim_event(platform, event_id)

    async def is_active_thread(self, thread: ThreadKey) -> bool:
        """True when Quorum has answered in this thread."""
        return await self.sessions.is_active(thread)

    async def record_feedback(self, exchange_id: int, user: str, value: int) -> None:
        """Store +1/-1 for an exchange (InvalidInput for another value or an unknown id)."""
        await self.sessions.record_feedback(exchange_id, user, value)

    async def reset(self, thread: ThreadKey) -> None:
        """Forget a thread's history."""
        await self.sessions.reset(thread)

    async def sources(self, kb: str) -> list[SourceInfo]:
        """The knowledge base's sources (raises SearchUnavailable when Weaviate is down)."""
        return await self.archives(kb).sources()

    async def speakers(self, kb: str) -> list[str]:
        """Speaker names of a knowledge base; empty when it cannot be read."""
        try:
            return await self.archives(kb).speakers()
        except QuorumError:
            log.warning("could not list speakers", exc_info=True)
            return []

    async def source_titles(self, kb: str) -> list[str]:
        """Source titles of a knowledge base; empty when it cannot be read."""
        try:
            return [i.source.title for i in await self.archives(kb).sources()]
        except QuorumError:
            log.warning("could not list sources", exc_info=True)
            return []
