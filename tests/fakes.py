"""The tests' hand-written fakes, in one place: ``FakeCore`` (the core the adapters call),
``FakeLLM`` (the model: text replies and tool-use steps, every call kept in ``history``) and
``FakeArchive`` (an in-memory archive that can be down or slow). Real parts (Weaviate,
SQLite, the emulators) are used wherever a test is about them; these stand in only
where a test is about something else."""

from __future__ import annotations

import asyncio
import copy
import re
import sqlite3
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import Any

import aiosqlite

from bot.errors import LLMError, SearchUnavailable
from bot.llm import Completion, Text, TextSink, ToolCall, Usage
from bot.models import Answer, Citation, Event, EventSink, Library, Question, ThreadKey
from retrieval.links.links import segment_link
from retrieval.models import Hit, SearchFilters, Segment, Source, SourceInfo

# --- the core -------------------------------------------------------------------------------

LINK = "https://www.youtube.com/watch?v=authdeep&t=734"
CITATION = Citation(
    n=1,
    hit_id="h1",
    title="Auth deep dive",
    link=LINK,
    label="Auth deep dive @ 12:14",
    start_s=734.0,
    speaker="John",
)


def answer(text: str = "We chose Cognito over Auth0 for cost [1].", **kw: object) -> Answer:
    """A quick answer citing the Auth deep dive at 12:14."""
    fields: dict[str, object] = {"kind": "answer", "mode": "quick", "citations": (CITATION,)}
    fields.update(kw)
    return Answer(text, **fields)  # type: ignore[arg-type]


@dataclass
class Script:
    """What the core does for one question."""

    answer: Answer | None = None
    events: Sequence[Event] = ()
    delay_s: float = 0.0  # before each event, and before answering
    error: BaseException | None = None


class FakeCore:
    """Implements ``bot.models.Core``: records questions, plays scripted events and
    answers, keeps per-thread history and feedback. Claims live in memory, or with
    ``claims_path`` in a real SQLite file (so a restarted app on the same file still
    refuses a redelivery)."""

    def __init__(
        self,
        claims_path: Path | None = None,
        delay_s: float = 0.0,
        default_answer: Answer | None = None,
        library: Library | None = None,
    ) -> None:
        self.library = library  # a real KbLibrary in upload tests
        self.claims_path = claims_path
        self.delay_s = delay_s
        self.default_answer = default_answer  # when nothing is scripted
        self.questions: list[Question] = []
        self.feedback: list[tuple[int, str, int]] = []
        self.history: dict[ThreadKey, list[str]] = defaultdict(list)
        self.scripts: deque[Script] = deque()
        self.claimed: set[tuple[str, str]] = set()
        self.speaker_names = ["Alice Chen", "Bob", "alan"]
        self.titles = ["Auth deep dive", "Roadmap Q3"]
        self.kbs: list[str] = []  # knowledge bases the autocomplete asked
        self.broken_store = False  # claim_event raises, like a failing database
        self._exchange = 0
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    def enqueue(
        self,
        script: Script | Answer | BaseException,
        events: Sequence[Event] = (),
        delay_s: float = 0.0,
    ) -> None:
        """Script the next question: an answer (with events before it), an exception to
        raise, or a whole ``Script``."""
        if isinstance(script, BaseException):
            script = Script(events=events, delay_s=delay_s, error=script)
        elif isinstance(script, Answer):
            script = Script(script, events, delay_s)
        self.scripts.append(script)

    async def close(self) -> None:
        """Close the claims database."""
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def ask(self, question: Question, on_event: EventSink | None = None) -> Answer:
        self.questions.append(question)
        script = self.scripts.popleft() if self.scripts else Script(delay_s=self.delay_s)
        for event in script.events:
            await asyncio.sleep(script.delay_s)
            if on_event is not None:
                await on_event(event)
        await asyncio.sleep(script.delay_s)
        if script.error is not None:
            raise script.error
        self.history[question.thread].append(question.text)
        result = script.answer or self.default_answer or answer(mode=question.mode)
        if result.kind != "error" and result.exchange_id is None:
            self._exchange += 1
            result = replace(result, exchange_id=self._exchange)
        return result

    async def claim_event(self, platform: str, event_id: str) -> bool:
        if self.broken_store:
            raise sqlite3.OperationalError("disk I/O error")
        if self.claims_path is None:
            fresh = (platform, event_id) not in self.claimed
        else:
            db = await self._claims()
            cur = await db.execute(
                "INSERT OR IGNORE INTO claims (platform, id) VALUES (?, ?)", (platform, event_id)
            )
            await db.commit()
            fresh = cur.rowcount == 1
        self.claimed.add((platform, event_id))
        return fresh

    async def _claims(self) -> aiosqlite.Connection:
        async with self._lock:
            if self._db is None:
                assert self.claims_path is not None
                self._db = await aiosqlite.connect(self.claims_path)
                await self._db.execute(
                    "CREATE TABLE IF NOT EXISTS claims (platform TEXT, id TEXT, "
                    "PRIMARY KEY (platform, id))"
                )
                await self._db.commit()
        return self._db

    async def is_active_thread(self, thread: ThreadKey) -> bool:
        return thread in self.history

    async def record_feedback(self, exchange_id: int, user: str, value: int) -> None:
        self.feedback.append((exchange_id, user, value))

    async def reset(self, thread: ThreadKey) -> None:
        self.history.pop(thread, None)

    async def speakers(self, kb: str) -> list[str]:
        self.kbs.append(kb)
        return list(self.speaker_names)

    async def source_titles(self, kb: str) -> list[str]:
        self.kbs.append(kb)
        return list(self.titles)


# --- Claude ---------------------------------------------------------------------------------


@dataclass
class Call:
    """One call the fake received."""

    kind: str  # "complete" | "stream" | "create"
    system: str
    messages: list[Any]
    model: str
    max_tokens: int
    timeout_s: float | None
    tools: list[Any] = field(default_factory=list)

    @property
    def prompt(self) -> str:
        """The last user message's text."""
        content = self.messages[-1]["content"]
        return content if isinstance(content, str) else str(content)


Scripted = str | Completion | Exception | Callable[[Call], "str | Completion"]


class FakeLLM:
    """Implements ``bot.llm.LLM`` by playing enqueued replies in call order: a text, a
    tool-use step (a ``Completion``, see ``message``/``use``/``text``), an exception to
    raise, or ``fn(call)`` returning either. Every call is kept in ``history``."""

    def __init__(
        self, *replies: Scripted, model: str = "fake-model", fast_model: str = "fake-fast"
    ) -> None:
        self.model = model
        self.fast_model = fast_model
        self.tools_supported: bool | None = None
        self.replies: deque[Scripted] = deque(replies)
        self.history: list[Call] = []

    def enqueue(self, *replies: Scripted) -> None:
        """Script the next replies."""
        self.replies.extend(replies)

    def _next(self, call: Call) -> str | Completion:
        self.history.append(call)
        if not self.replies:
            raise AssertionError(f"FakeLLM: no reply enqueued for a {call.kind} call")
        reply = self.replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        return reply(call) if callable(reply) else reply

    def _text(self, call: Call) -> str:
        reply = self._next(call)
        return reply if isinstance(reply, str) else reply.text

    def _call(self, kind: str, model: str | None, **kw: Any) -> Call:
        messages = copy.deepcopy(list(kw.pop("messages")))  # as sent, before later edits
        return Call(kind, messages=messages, model=model or self.model, **kw)

    def _completion(
        self,
        kind: str,
        system: str,
        messages: Sequence[Any],
        max_tokens: int,
        model: str | None,
        timeout_s: float | None,
    ) -> Completion:
        call = self._call(
            kind,
            model,
            system=system,
            messages=messages,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
        )
        text = self._text(call)
        return Completion(
            text, call.model, "end_turn", Usage(len(call.prompt) // 4, len(text) // 4)
        )

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[Any],
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        return self._completion("complete", system, messages, max_tokens, model, timeout_s)

    async def stream(
        self,
        *,
        system: str,
        messages: Sequence[Any],
        max_tokens: int,
        on_text: TextSink | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        done = self._completion("stream", system, messages, max_tokens, model, timeout_s)
        if on_text is not None:
            words = done.text.split(" ")
            for i in range(1, len(words) + 1):
                await on_text(" ".join(words[:i]))
        return done

    async def create(
        self,
        *,
        system: str,
        messages: Sequence[Any],
        tools: Sequence[Any] = (),
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        call = self._call(
            "create",
            model,
            system=system,
            messages=messages,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
            tools=list(tools),
        )
        reply = self._next(call)
        return message(text(reply)) if isinstance(reply, str) else reply


def overloaded() -> LLMError:
    """What the model raises when Claude stays overloaded."""
    return LLMError("Claude failed with overloaded_error (HTTP 529) after 3 attempts.", status=529)


def message(*blocks: Text | ToolCall, tokens: int = 10) -> Completion:
    """A model turn: its text and tool calls."""
    calls = tuple(b for b in blocks if isinstance(b, ToolCall))
    stop = "tool_use" if calls else "end_turn"
    words = "".join(b.text for b in blocks if isinstance(b, Text))
    return Completion(words, "fake", stop, Usage(tokens, tokens), 1, calls)


def use(name: str, **args: Any) -> ToolCall:
    return ToolCall(f"toolu_{uuid.uuid4().hex[:10]}", name, args)


def text(t: str) -> Text:
    return Text(t)


# --- the archive ----------------------------------------------------------------------------


def source(sid: str, title: str, kind: Any, day: date | None, speakers: tuple[str, ...]) -> Source:
    return Source(sid, title, kind, f"https://media.example/{sid}.mp4", day, speakers)


class FakeArchive:
    """An in-memory archive (implements ``retrieval.archive.Archive``): word-overlap
    search, windows by position; ``down`` makes every read fail as when Weaviate is
    unreachable, ``delay_s`` makes every read slow."""

    def __init__(self, kb: str = "kb", *, down: bool = False, delay_s: float = 0.0) -> None:
        self._kb = kb
        self.down = down  # every read fails as when Weaviate cannot be reached
        self.delay_s = delay_s  # every read takes this long first
        self.segments: dict[str, Hit] = {}
        self.sources_: list[SourceInfo] = []
        self.calls: list[tuple[str, Any]] = []

    @property
    def kb(self) -> str:
        return self._kb

    async def _read(self) -> None:
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.down:
            raise SearchUnavailable("Weaviate at http://127.0.0.1:1 is not reachable or failed.")

    def add(
        self, source: Source, rows: Sequence[tuple[float | None, str, tuple[str, ...]]]
    ) -> None:
        for pos, (start, text, speakers) in enumerate(rows):
            seg = Segment(
                source.id,
                pos,
                text,
                start_s=start,
                end_s=None if start is None else start + 60,
                speakers=speakers,
                page=None if start is not None else pos + 1,
            )
            hid = f"{source.id}#{pos}"
            self.segments[hid] = Hit(hid, seg, source, 0.0, segment_link(source, seg))
        self.sources_.append(SourceInfo(source, len(rows)))

    async def search(
        self, query: str, filters: SearchFilters | None = None, k: int = 8
    ) -> list[Hit]:
        await self._read()
        self.calls.append(("search", (query, filters, k)))
        words = set(re.findall(r"\w+", query.lower()))
        f = filters or SearchFilters()
        scored = []
        for h in self.segments.values():
            if f.source_ids and h.source.id not in f.source_ids:
                continue
            if f.speaker and not any(f.speaker.lower() in s.lower() for s in h.segment.speakers):
                continue
            score = len(words & set(re.findall(r"\w+", h.segment.text.lower())))
            if score:
                scored.append(Hit(h.id, h.segment, h.source, float(score), h.link))
        scored.sort(key=lambda h: (-h.score, h.id))
        return scored[:k]

    async def neighbours(self, hit_id: str, before: int = 1, after: int = 1) -> list[Hit]:
        await self._read()
        self.calls.append(("neighbours", (hit_id, before, after)))
        hit = self.segments[hit_id]
        pos = hit.segment.position
        return [
            h
            for h in self.segments.values()
            if h.source.id == hit.source.id and pos - before <= h.segment.position <= pos + after
        ]

    async def transcript(
        self,
        source_id: str,
        start_s: float | None = None,
        end_s: float | None = None,
        offset: int = 0,
        limit: int = 200,
    ) -> list[Hit]:
        await self._read()
        self.calls.append(("transcript", (source_id, start_s, end_s, offset, limit)))
        rows = [h for h in self.segments.values() if h.source.id == source_id]
        if start_s is not None:
            rows = [h for h in rows if (h.segment.end_s or 0) >= start_s]
        if end_s is not None:
            rows = [h for h in rows if (h.segment.start_s or 0) <= end_s]
        return rows[offset : offset + limit]

    async def sources(self) -> list[SourceInfo]:
        await self._read()
        return list(self.sources_)

    async def speakers(self) -> list[str]:
        await self._read()
        return sorted({s for i in self.sources_ for s in i.source.speakers})


def fake_archive() -> FakeArchive:
    a = FakeArchive()
    kickoff = source("kickoff", "Auth kickoff", "video", date(2024, 1, 9), ("John Park", "Priya"))
    retro = source("retro", "Cut-over retro", "audio", date(2024, 2, 27), ("Marcus Lee",))
    plan = Source("plan", "Migration plan", "document", "https://d.example/plan.pdf", None)
    a.add(
        kickoff,
        [
            (0.0, "John Park: We leave Auth0 because the bill tripled.", ("John Park",)),
            (
                60.0,
                "Priya: Cognito or Keycloak?\nJohn Park: Cognito, for cost.",
                ("Priya", "John Park"),
            ),
            (120.0, "John Park: The Cognito spike takes two weeks.", ("John Park",)),
        ],
    )
    a.add(retro, [(30.0, "Refresh tokens failed with invalid_grant at cut-over.", ("Marcus Lee",))])
    a.add(plan, [(None, "Cognito costs less than Auth0 at our scale.", ())])
    return a
