"""Which mode answers a question: quick (one search, one answer) or deep (the model researches
the archive with tools first); and ``ResearchRouter``, the engine's research hook, which
routes, runs deep research, and falls back to a quick answer.

- ``/research``, ``quorum ask --deep`` and ``/research`` in ``quorum chat`` ask for deep.
- Otherwise the setting decides (``QUORUM_RESEARCH_MODE``: quick, deep or auto). Adapters
  send ``mode="quick"`` for every plain question, so a requested "quick" means "nothing
  asked" and the setting applies; ``mode="auto"`` asks for the heuristic explicitly.
- Auto sends hard questions deep with a cheap heuristic: comparisons, "why", how something
  changed over time, questions that span many recordings, or that name several dates or
  sources. It returns a short reason, fit for the query log (never the question itself).
- Deep research needs a model: without one an explicit request for it gets a quick
  answer and ``NEEDS_API_KEY`` as the answer's note; auto silently stays quick. A model or
  server that cannot call tools (found on the first try, or by ``quorum doctor``) gets the
  same treatment with ``NO_TOOLS``. When the model fails before the research found
  anything, the quick answer (itself extractive if the model stays down) comes back with
  ``DEEP_FAILED`` as its note.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from bot.answer.answer import AnswerConfig, Outcome, QuickAnswerer, SearchRecord
from bot.config import Settings
from bot.errors import LLMError
from bot.llm import LLM, NoTools
from bot.models import EventSink, Mode, Question
from bot.research.loop import MODEL_OFF, NEEDS_API_KEY, NO_TOOLS, Researcher, ResearchResult
from bot.research.schema import SearchArgs, TimelineArgs, ToolError, parse_args
from bot.sessions import Exchange
from retrieval.archive import Archive
from retrieval.encoding.embed import Embedder
from retrieval.models import SearchFilters

__all__ = [
    "DEEP_FAILED",
    "MODEL_OFF",
    "NEEDS_API_KEY",
    "NO_TOOLS",
    "ResearchRouter",
    "Route",
    "looks_deep",
    "route",
]

log = logging.getLogger("quorum.router")
DEEP_FAILED = "Deep research could not finish (the model did not answer); here is a quick answer."

_SIGNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (reason, re.compile(pattern, re.IGNORECASE))
    for reason, pattern in (
        (
            "compares",
            r"\bcompar(?:e|es|ed|ing|ison|isons)\b|\bversus\b|\bvs\.?\s+(?!code\b)"
            r"|\bdifferen(?:ce|ces|t)\s+(?:between|from)\b|\bpros\s+and\s+cons\b"
            r"|\btrade-?offs?\b|\bcontrast\b",
        ),
        (
            "asks why",
            r"\bwhy\b|\bwhat\s+led\s+(?:to|us)\b|\breasons?\s+(?:for|behind|why)\b"
            r"|\broot\s+cause\b",
        ),
        (
            "asks how something changed over time",
            r"\bevol(?:ve|ved|ves|ving|ution)\b|\bover\s+time\b|\btime\s*line\b"
            r"|\bhistory\s+of\b|\bchang(?:e|ed|es|ing)\s+(?:over|since|between|from)\b"
            r"|\bhow\s+(?:did|has|have)\b.{0,60}\bchange\b|\bbefore\s+and\s+after\b"
            r"|\bover\s+the\s+(?:weeks|months|meetings)\b",
        ),
        (
            "spans many recordings",
            r"\bacross\b|\bthroughout\b"
            r"|\b(?:all|every|each)\s+(?:of\s+)?(?:the\s+|our\s+)?"
            r"(?:meetings?|recordings?|calls?|sessions?|lectures?|sources?|documents?|lessons?)\b"
            r"|\bin\s+(?:any|every)\s+(?:meeting|recording|call)\b",
        ),
    )
)
_MONTHS = (
    "jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    "|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?"
)
_DATES = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?\b"
    rf"|\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:{_MONTHS})\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Route:
    """The mode a question gets, why, and a note for the user when a request was refused."""

    mode: Literal["quick", "deep"]
    reason: str
    note: str | None = None


def _named_sources(text: str, titles: Sequence[str]) -> int:
    low = " ".join(text.casefold().split())
    count = 0
    for title in titles:
        # "Auth kickoff: leaving Auth0?" is named as "auth kickoff" as often as in full.
        short = title.split(":")[0].casefold().strip()
        if len(short) >= 4 and (short in low or title.casefold() in low):
            count += 1
    return count


def looks_deep(text: str, titles: Sequence[str] = ()) -> str | None:
    """Why a question needs deep research, or None for a quick one."""
    for reason, pattern in _SIGNS:
        if pattern.search(text):
            return reason
    dates = {m.group(0).casefold() for m in _DATES.finditer(text)}
    if len(dates) >= 2:
        return f"names {len(dates)} dates"
    named = _named_sources(text, titles)
    if named >= 2:
        return f"names {named} sources"
    return None


def route(
    text: str,
    requested: Mode = "quick",
    default: Mode = "quick",
    *,
    has_llm: bool = True,
    titles: Sequence[str] = (),
    model_off: bool = False,
) -> Route:
    """The mode for a question: ``requested`` is ``Question.mode``, ``default`` the
    ``research_mode`` setting, ``has_llm`` whether a model is configured, ``titles`` the
    knowledge base's source titles (optional, for "names several sources")."""
    if requested == "deep":
        if has_llm:
            return Route("deep", "asked for deep research")
        if model_off:
            return Route("quick", "answering without a model by choice", note=MODEL_OFF)
        return Route("quick", "deep research needs an API key", note=NEEDS_API_KEY)
    mode = "auto" if requested == "auto" else default
    if mode == "deep":
        if has_llm:
            return Route("deep", "deep research is the default")
        return Route("quick", "deep is the default but there is no API key")
    if mode == "auto":
        reason = looks_deep(text, titles)
        if reason is None:
            return Route("quick", "a direct question")
        if has_llm:
            return Route("deep", reason)
        return Route("quick", f"{reason}, but there is no API key")
    return Route("quick", "quick is the default")


class QuickPath(Protocol):
    """The quick answer pipeline (``bot.answer.answer.QuickAnswerer``)."""

    async def answer(
        self,
        question: Question,
        archive: Archive,
        history: Sequence[Exchange] = (),
        on_event: EventSink | None = None,
    ) -> Outcome:
        """A quick answer."""
        ...


def searches_of(result: ResearchResult) -> list[SearchRecord]:
    """The research's searches, for the query log: query, filters, hits, archive time."""
    by_n = {s.n: s.hit.id for s in result.answer.sources}
    out: list[SearchRecord] = []
    for step in result.trace:
        if step.is_error or step.tool not in ("search", "topic_timeline"):
            continue
        try:
            args = parse_args(step.tool, step.args)
        except ToolError:
            continue
        filters = SearchFilters()
        if isinstance(args, SearchArgs):
            filters = SearchFilters(
                speaker=args.speaker,
                source_ids=tuple(args.source_ids or ()),
                after=args.after,
                before=args.before,
            )
        if isinstance(args, SearchArgs | TimelineArgs):
            hits = tuple(by_n[n] for n in step.passages if n in by_n)
            out.append(SearchRecord(args.query, filters, hits, step.archive_ms))
    return out


class ResearchRouter:
    """The engine's research hook (``bot.engine.ResearchHook``): picks the mode, runs deep
    research, and answers quickly when the mode is quick or Claude fails."""

    def __init__(
        self,
        researcher: Researcher | None,
        quick: QuickPath,
        *,
        default_mode: Mode = "quick",
        model_off: bool = False,
    ) -> None:
        self.researcher = researcher
        self.quick = quick
        self.default_mode = default_mode
        self.model_off = model_off  # QUORUM_LLM=none: no model by choice, not by omission

    @classmethod
    def from_settings(
        cls, settings: Settings, llm: LLM | None, embedder: Embedder | None = None
    ) -> ResearchRouter:
        """A router with the configured budgets and default mode (no ``llm``: quick only)."""
        researcher = None if llm is None else Researcher.from_settings(llm, settings)
        quick = QuickAnswerer(llm, AnswerConfig.from_settings(settings), embedder)
        return cls(
            researcher, quick, default_mode=settings.research_mode, model_off=settings.llm == "none"
        )

    async def route(self, question: Question, archive: Archive) -> Route:
        """The mode for ``question`` (source titles are read only when auto needs them)."""
        auto = question.mode == "auto" or (question.mode == "quick" and self.default_mode == "auto")
        titles = [i.source.title for i in await archive.sources()] if auto else []
        return route(
            question.text,
            question.mode,
            self.default_mode,
            has_llm=self.researcher is not None,
            titles=titles,
            model_off=self.model_off,
        )

    async def research(
        self,
        question: Question,
        archive: Archive,
        history: Sequence[Exchange],
        on_event: EventSink | None,
    ) -> Outcome:
        """Answer ``question`` in the mode it routes to."""
        chosen = await self.route(question, archive)
        log.info("mode=%s reason=%s", chosen.mode, chosen.reason)
        if chosen.mode == "deep" and self.researcher is not None:
            asked = NO_TOOLS if question.mode == "deep" else None
            if self.researcher.llm.tools_supported is False:
                return await self._quick(question, archive, history, on_event, asked)
            pairs = [(ex.question, ex.answer) for ex in history]
            try:
                result = await self.researcher.run(question, archive, pairs, on_event)
            except NoTools as exc:
                log.warning("deep research is off: %s", exc)
                return await self._quick(question, archive, history, on_event, NO_TOOLS)
            except LLMError as exc:
                log.warning("deep research failed, answering quickly: %s", exc)
                return await self._quick(question, archive, history, on_event, DEEP_FAILED)
            return Outcome(result.answer, result.usage, searches_of(result), result.to_json())
        return await self._quick(question, archive, history, on_event, chosen.note)

    async def _quick(
        self,
        question: Question,
        archive: Archive,
        history: Sequence[Exchange],
        on_event: EventSink | None,
        note: str | None,
    ) -> Outcome:
        outcome = await self.quick.answer(question, archive, history, on_event)
        if note and outcome.answer.kind not in ("help", "error"):
            old = outcome.answer.note
            outcome.answer = replace(outcome.answer, note=f"{note} {old}" if old else note)
        return outcome
