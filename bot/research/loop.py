"""Deep research: the model researches one knowledge base step by step with tools, then answers.

One run:

1. Read the archive's catalog (sources, speakers) and put a capped summary of it in the
   system prompt, after the rules (tool results are untrusted data).
2. Loop, at most ``max_iterations`` turns: send the conversation with the tools; when the
   reply calls tools, run every call of the turn concurrently, number their passages in
   call order (``Registry``: one ``[n]`` per passage for the whole run) and send all the
   tool results back in one user message, in the order of the calls. A bad call comes
   back as an error result so the model can fix it on the next turn.
3. A reply without tool calls is the answer. When the iterations, the token budget
   (input + output tokens, from each reply's usage) or the wall-clock budget run out
   first, a last request *without tools* asks for the answer from what was gathered
   (streamed as ``PartialAnswer``), and the Answer says "research stopped early".
4. The answer's ``[n]`` are resolved against every numbered passage (an invented number
   is dropped); the trace of every call comes back with it for the session store.

Nothing here logs a question, a query or a passage: only tool names, counts and times.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from bot.answer.prompts import history_messages
from bot.cite.citations import resolve
from bot.config import Settings
from bot.errors import LLMError
from bot.llm import LLM, Completion, Message, NoTools, ToolCall, ToolResult, Usage
from bot.models import (
    Answer,
    EventSink,
    PartialAnswer,
    ProgressEvent,
    Question,
    guarded_sink,
)
from bot.research.messages import as_input, assistant_content, result_block, trace_args
from bot.research.prompts import (
    final_message,
    question_message,
    research_notes,
    system_prompt,
)
from bot.research.results import Registry, render_draft
from bot.research.schema import TOOLS, ToolError, parse_args
from bot.research.tools import Call, Catalog, progress_text, run_fetch
from bot.research.trace import (
    ResearchResult,
    Stop,
    TimedArchive,
    TraceStep,
    TurnTrace,
    union_ms,
)
from retrieval.archive import Archive

__all__ = [
    "MODEL_OFF",
    "NEEDS_API_KEY",
    "NO_TOOLS",
    "STOPPED_EARLY",
    "ResearchResult",
    "Researcher",
    "TraceStep",
    "TurnTrace",
]

log = logging.getLogger("quorum.research")

NEEDS_API_KEY = (
    "Deep research needs a model (ANTHROPIC_API_KEY, or QUORUM_OPENAI_BASE_URL for your own "
    "server); here is a quick answer instead."
)
MODEL_OFF = (
    "Deep research needs a model, and Quorum is set to answer without one (QUORUM_LLM=none); "
    "here is a quick answer instead."
)
NO_TOOLS = (
    "Deep research needs a model that can call tools, and this one cannot; here is a quick "
    "answer instead."
)
STOPPED_EARLY = "research stopped early"
WRITING = "writing the answer"
MAX_CALLS_PER_TURN = 8
_WHY: dict[Stop, str] = {
    "iterations": "it reached its limit of {n} steps",
    "tokens": "it reached its token budget",
    "time": "it reached its time limit",
    "error": "the model stopped answering mid-way",
}


class Researcher:
    """Runs deep research with Claude's tool use over one knowledge base's Archive."""

    def __init__(
        self,
        llm: LLM,
        *,
        max_iterations: int = 8,
        token_budget: int = 60_000,
        time_budget_s: float = 120.0,
        max_tokens: int = 1500,
        model: str | None = None,
    ) -> None:
        self.llm = llm
        self.max_iterations = max_iterations
        self.token_budget = token_budget
        self.time_budget_s = time_budget_s
        self.max_tokens = max_tokens
        self.model = model

    @classmethod
    def from_settings(cls, llm: LLM, settings: Settings) -> Researcher:
        """A researcher with the configured budgets."""
        return cls(
            llm,
            max_iterations=settings.research_max_iterations,
            token_budget=settings.research_token_budget,
            time_budget_s=settings.research_time_budget_s,
            max_tokens=max(settings.answer_max_tokens, 1500),
        )

    async def run(
        self,
        question: Question,
        archive: Archive,
        history: Sequence[tuple[str, str]] = (),
        on_event: EventSink | None = None,
    ) -> ResearchResult:
        """Research ``question`` in ``archive`` (bound to one knowledge base) and answer it.

        Raises ``LLMError`` when Claude fails before anything was found (the engine then
        answers extractively) and ``SearchUnavailable`` when the archive cannot be read."""
        started = time.perf_counter()
        intervals: list[tuple[float, float]] = []
        catalog = await Catalog.load(TimedArchive(archive, intervals))
        run = _Run(self, question, archive, catalog, history, on_event, started, intervals)
        return await run.go()


class _Run:
    """The state of one research run."""

    def __init__(
        self,
        cfg: Researcher,
        question: Question,
        archive: Archive,
        catalog: Catalog,
        history: Sequence[tuple[str, str]],
        on_event: EventSink | None,
        started: float,
        intervals: list[tuple[float, float]],
    ) -> None:
        self.cfg = cfg
        self.question = question
        self.started = started
        self.intervals = intervals  # when the archive was busy, shared by every call
        self.archive = archive
        self.catalog = catalog
        self.emit = guarded_sink(on_event)
        self.history = history_messages(history)
        self.system = system_prompt(catalog, cfg.max_iterations)
        self.messages: list[Message] = [
            *self.history,
            {"role": "user", "content": question_message(question)},
        ]
        self.registry = Registry()
        self.usage = Usage()
        self.calls: list[tuple[int, Call]] = []
        self.turns: list[TurnTrace] = []
        self.reserve_s = min(30.0, cfg.time_budget_s * 0.25)  # kept for the final answer
        self.next_tokens = 0  # what the next request will cost, about
        self.llm_ms = 0.0
        self.tools_ms = 0.0

    def tokens_used(self) -> int:
        u = self.usage
        return (
            u.input_tokens
            + u.output_tokens
            + u.cache_read_input_tokens
            + u.cache_creation_input_tokens
        )

    @property
    def deadline(self) -> float:
        return self.started + self.cfg.time_budget_s

    async def go(self) -> ResearchResult:
        final, stopped = await self.loop()
        if stopped is not None or not final:
            final = await self.final_answer(stopped)
        else:
            await self.emit(ProgressEvent(WRITING))
            await self.emit(PartialAnswer(final))
        return self.result(final, stopped)

    async def loop(self) -> tuple[str | None, Stop | None]:
        for turn in range(1, self.cfg.max_iterations + 1):
            now = time.perf_counter()
            remaining = self.deadline - now - self.reserve_s
            if remaining < 1.0:
                return None, "time"
            if turn > 1 and self.tokens_used() + self.next_tokens > self.cfg.token_budget:
                return None, "tokens"
            try:
                message = await self.cfg.llm.create(
                    system=self.system,
                    messages=self.messages,
                    tools=TOOLS,
                    max_tokens=self.cfg.max_tokens,
                    model=self.cfg.model,
                    timeout_s=remaining,
                )
            except NoTools:
                raise
            except LLMError as exc:
                if exc.retryable and len(self.registry):
                    log.warning("research turn %d failed: %s", turn, exc)
                    late = self.deadline - time.perf_counter() - self.reserve_s < 1.0
                    return None, "time" if late else "error"
                raise
            llm_ms = (time.perf_counter() - now) * 1000
            self.llm_ms += llm_ms
            usage = message.usage
            self.usage.add(usage)
            uses = message.tool_calls
            if not uses:
                self.turns.append(self.turn_trace(turn, now, llm_ms, 0.0, message, usage, 0))
                return message.shown().strip(), None
            self.messages.append({"role": "assistant", "content": assistant_content(message)})
            t_tools = time.perf_counter()
            timed_out, result_chars = await self.run_tools(turn, uses)
            tools_ms = (time.perf_counter() - t_tools) * 1000
            self.tools_ms += tools_ms
            trace = self.turn_trace(turn, now, llm_ms, tools_ms, message, usage, len(uses))
            self.turns.append(trace)
            # The next request resends all of this one plus the new results.
            self.next_tokens = trace.input_tokens + trace.output_tokens + result_chars // 4
            if timed_out:
                return None, "time"
        return None, "iterations"

    def turn_trace(
        self,
        turn: int,
        started: float,
        llm_ms: float,
        tools_ms: float,
        message: Completion,
        usage: Usage,
        calls: int,
    ) -> TurnTrace:
        return TurnTrace(
            turn=turn,
            llm_ms=llm_ms,
            tools_ms=tools_ms,
            archive_ms=union_ms(self.intervals, started),
            total_ms=(time.perf_counter() - started) * 1000,
            input_tokens=usage.input_tokens
            + usage.cache_read_input_tokens
            + usage.cache_creation_input_tokens,
            output_tokens=usage.output_tokens,
            stop_reason=message.stop_reason,
            calls=calls,
        )

    async def run_tools(self, turn: int, uses: Sequence[ToolCall]) -> tuple[bool, int]:
        """Run one turn's calls concurrently; append their results in call order. Returns
        whether the time budget ran out while they ran, and the results' length."""
        # Claude's input should be an object; anything else is its mistake, told as a tool
        # error by parse_args, not a crash here.
        calls = [Call(id=u.id, name=u.name, input=as_input(u.input)) for u in uses]
        await self.validate(calls)
        wrappers = [TimedArchive(self.archive, self.intervals) for _ in calls]
        timed_out = False
        remaining = max(1.0, self.deadline - time.perf_counter() - self.reserve_s)
        try:
            async with asyncio.timeout(remaining):
                outcomes = await asyncio.gather(
                    *(
                        run_fetch(c, w, self.catalog, self.registry)
                        for c, w in zip(calls, wrappers, strict=True)
                    ),
                    return_exceptions=True,
                )
        except TimeoutError:
            timed_out, outcomes = True, []
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                raise outcome  # SearchUnavailable and the like: the engine says so
        blocks: list[ToolResult] = []
        for call, wrapper in zip(calls, wrappers, strict=True):
            call.archive_ms = wrapper.busy_ms
            if call.draft is not None:
                t = time.perf_counter()
                call.text, call.passages = render_draft(call.draft, self.registry)
                call.ms += (time.perf_counter() - t) * 1000
            elif not call.is_error:
                call.is_error, call.text = True, "Not run: the research ran out of time."
            self.calls.append((turn, call))
            blocks.append(result_block(call, turn))
        self.messages.append({"role": "user", "content": blocks})
        return timed_out, sum(len(c.text) for c in calls)

    async def validate(self, calls: list[Call]) -> None:
        """Check each call's arguments and announce it, in the order Claude made them; a
        call past the per-turn limit or with bad arguments becomes a tool error."""
        for i, call in enumerate(calls):
            if i >= MAX_CALLS_PER_TURN:
                call.is_error = True
                call.text = f"Not run: at most {MAX_CALLS_PER_TURN} tool calls per turn."
                continue
            try:
                call.args = parse_args(call.name, call.input)
            except ToolError as exc:
                call.is_error, call.text = True, str(exc)
                continue
            await self.emit(ProgressEvent(progress_text(call.args, self.catalog, self.registry)))

    async def final_answer(self, stopped: Stop | None) -> str:
        """Ask for the answer from what was gathered, without tools, streamed."""
        await self.emit(ProgressEvent(WRITING))
        why = _WHY[stopped].format(n=self.cfg.max_iterations) if stopped else None
        content = final_message(self.question, research_notes(self.calls), why)
        messages: list[Message] = [*self.history, {"role": "user", "content": content}]

        async def on_text(text: str) -> None:
            await self.emit(PartialAnswer(text))

        started = time.perf_counter()
        completion = await self.cfg.llm.stream(
            system=self.system,
            messages=messages,
            max_tokens=self.cfg.max_tokens,
            on_text=on_text,
            model=self.cfg.model,
            timeout_s=max(self.deadline - started, self.reserve_s),
        )
        self.llm_ms += (time.perf_counter() - started) * 1000
        self.usage.add(completion.usage)
        return completion.shown()

    def result(self, text: str, stopped: Stop | None) -> ResearchResult:
        sources = self.registry.sources
        resolved = resolve(text, sources)
        note = None
        if stopped is not None:
            why = _WHY[stopped].format(n=self.cfg.max_iterations)
            note = f"{STOPPED_EARLY} ({why}); the answer uses what was found so far."
        total_ms = (time.perf_counter() - self.started) * 1000
        answer = Answer(
            text=resolved.text,
            kind="answer" if sources else "nothing_found",
            mode="deep",
            citations=resolved.citations,
            sources=sources,
            note=note,
            timings={
                "llm": self.llm_ms,
                "tools": self.tools_ms,
                "archive": union_ms(self.intervals, self.started),
                "total": total_ms,
            },
        )
        trace = tuple(
            TraceStep(
                turn=turn,
                tool=call.name,
                args=trace_args(call.input),
                ms=call.ms,
                archive_ms=call.archive_ms,
                is_error=call.is_error,
                error=call.text if call.is_error else None,
                passages=call.passages,
            )
            for turn, call in self.calls
        )
        log.info(
            "research done turns=%d calls=%d passages=%d cited=%d stopped=%s ms=%.0f",
            len(self.turns),
            len(trace),
            len(sources),
            len(resolved.citations),
            stopped,
            total_ms,
        )
        return ResearchResult(answer, trace, tuple(self.turns), self.usage, stopped)
