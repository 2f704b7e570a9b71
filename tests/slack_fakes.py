"""A hand-written core for adapter tests and the Slack benchmark: it records questions,
plays scripted events and answers, keeps per-thread history, and claims event ids in a
real SQLite file (so a restarted app on the same file still refuses a redelivery)."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import defaultdict, deque
from dataclasses import dataclass, replace
from pathlib import Path

import aiosqlite

from bot.models import Answer, Citation, Event, EventSink, Question, ThreadKey

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
    events: tuple[Event, ...] = ()
    delay_s: float = 0.0  # before each event, and before answering
    error: BaseException | None = None


class FakeCore:
    """Implements bot.models.Core for tests."""

    def __init__(self, claims_path: Path, delay_s: float = 0.0) -> None:
        self.claims_path = claims_path
        self.delay_s = delay_s
        self.questions: list[Question] = []
        self.feedback: list[tuple[int, str, int]] = []
        self.history: dict[ThreadKey, list[str]] = defaultdict(list)
        self.scripts: deque[Script] = deque()
        self._exchange = 0
        self.broken_store = False  # claim_event raises, like a failing database
        self._db: aiosqlite.Connection | None = None
        self._lock = asyncio.Lock()

    def enqueue(self, script: Script | Answer) -> None:
        """Script the next question's handling."""
        self.scripts.append(script if isinstance(script, Script) else Script(script))

    async def close(self) -> None:
        """Close the claims database."""
        if self._db is not None:
            await self._db.close()
            self._db = None

    async def _claims(self) -> aiosqlite.Connection:
        async with self._lock:
            if self._db is None:
                self._db = await aiosqlite.connect(self.claims_path)
                await self._db.execute(
                    "CREATE TABLE IF NOT EXISTS claims (platform TEXT, id TEXT, "
                    "PRIMARY KEY (platform, id))"
                )
                await self._db.commit()
        return self._db

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
        result = script.answer or answer(mode=question.mode)
        if result.kind != "error":
            self._exchange += 1
            result = replace(result, exchange_id=self._exchange)
        return result

    async def claim_event(self, platform: str, event_id: str) -> bool:
        if self.broken_store:
            raise sqlite3.OperationalError("disk I/O error")
        db = await self._claims()
        cur = await db.execute(
            "INSERT OR IGNORE INTO claims (platform, id) VALUES (?, ?)", (platform, event_id)
        )
        await db.commit()
        return cur.rowcount == 1

    async def is_active_thread(self, thread: ThreadKey) -> bool:
        return thread in self.history

    async def record_feedback(self, exchange_id: int, user: str, value: int) -> None:
        self.feedback.append((exchange_id, user, value))

    async def reset(self, thread: ThreadKey) -> None:
        self.history.pop(thread, None)

    async def speakers(self, kb: str) -> list[str]:
        return ["John", "Priya"]

    async def source_titles(self, kb: str) -> list[str]:
        return ["Auth deep dive"]
