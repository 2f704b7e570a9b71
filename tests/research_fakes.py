"""Hand-written fakes for the deep research tests: an in-memory ``Archive`` (word-overlap
search, windows by position) and an ``LLM`` that plays scripted tool_use Messages."""

from __future__ import annotations

import json
import re
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from anthropic.types import Message

from bot.llm import Completion, TextSink, Usage
from retrieval.links import segment_link
from retrieval.models import Hit, SearchFilters, Segment, Source, SourceInfo


def source(sid: str, title: str, kind: Any, day: date | None, speakers: tuple[str, ...]) -> Source:
    return Source(sid, title, kind, f"https://media.example/{sid}.mp4", day, speakers)


class FakeArchive:
    """An in-memory archive: word-overlap search, windows by position."""

    def __init__(self, kb: str = "kb") -> None:
        self._kb = kb
        self.segments: dict[str, Hit] = {}
        self.sources_: list[SourceInfo] = []
        self.calls: list[tuple[str, Any]] = []

    @property
    def kb(self) -> str:
        return self._kb

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
        self.calls.append(("transcript", (source_id, start_s, end_s, offset, limit)))
        rows = [h for h in self.segments.values() if h.source.id == source_id]
        if start_s is not None:
            rows = [h for h in rows if (h.segment.end_s or 0) >= start_s]
        if end_s is not None:
            rows = [h for h in rows if (h.segment.start_s or 0) <= end_s]
        return rows[offset : offset + limit]

    async def sources(self) -> list[SourceInfo]:
        return list(self.sources_)

    async def speakers(self) -> list[str]:
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


# --- a scripted LLM that speaks tool_use ----------------------------------------------------


def message(*blocks: dict[str, Any], tokens: int = 10) -> Message:
    stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
    return Message.model_validate(
        {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": "fake",
            "content": list(blocks),
            "stop_reason": stop,
            "usage": {"input_tokens": tokens, "output_tokens": tokens},
        }
    )


def use(name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:10]}", "name": name, "input": args}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


Step = Message | Exception | Callable[[list[Any]], Message]


@dataclass
class ToolLLM:
    """Plays scripted Messages for ``create`` and texts for ``stream``; records calls."""

    model: str = "fake"
    fast_model: str = "fake-fast"
    steps: deque[Step] = field(default_factory=deque)
    finals: deque[str] = field(default_factory=deque)
    calls: list[dict[str, Any]] = field(default_factory=list)

    async def create(
        self,
        *,
        system: str,
        messages: Sequence[Any],
        tools: Sequence[Any] = (),
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Message:
        self.calls.append(
            {"kind": "create", "messages": json.loads(json.dumps(list(messages))), "tools": tools}
        )
        step = self.steps.popleft()
        if isinstance(step, Exception):
            raise step
        return step(list(messages)) if callable(step) else step

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
        self.calls.append({"kind": "stream", "messages": list(messages)})
        reply = self.finals.popleft()
        if on_text is not None:
            await on_text(reply)
        return Completion(reply, "fake", "end_turn", Usage(5, 5))

    async def complete(self, **kwargs: Any) -> Completion:
        raise AssertionError("research never calls complete()")
