"""A hand-written fake of ``bot.llm.LLM`` (llm's MockModel style): replies are enqueued,
calls are recorded in ``history``. Also a fake archive whose Weaviate is down."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from anthropic.types import Message

from bot.errors import LLMError, SearchUnavailable
from bot.llm import Completion, TextSink, Usage
from retrieval.models import Hit, SearchFilters, SourceInfo

Scripted = str | Exception | Callable[["Call"], str]


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


class FakeLLM:
    """Plays enqueued replies (text, an exception to raise, or ``fn(call) -> text``)."""

    def __init__(self, model: str = "fake-model", fast_model: str = "fake-fast") -> None:
        self.model = model
        self.fast_model = fast_model
        self.replies: deque[Scripted] = deque()
        self.history: list[Call] = []

    def enqueue(self, *replies: Scripted) -> None:
        """Script the next replies."""
        self.replies.extend(replies)

    def _next(self, call: Call) -> str:
        self.history.append(call)
        if not self.replies:
            raise AssertionError(f"FakeLLM: no reply enqueued for a {call.kind} call")
        reply = self.replies.popleft()
        if isinstance(reply, Exception):
            raise reply
        return reply(call) if callable(reply) else reply

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[Any],
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        call = Call("complete", system, list(messages), model or self.model, max_tokens, timeout_s)
        text = self._next(call)
        return Completion(
            text, call.model, "end_turn", Usage(len(call.prompt) // 4, len(text) // 4)
        )

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
        call = Call("stream", system, list(messages), model or self.model, max_tokens, timeout_s)
        text = self._next(call)
        if on_text is not None:
            words = text.split(" ")
            for i in range(1, len(words) + 1):
                await on_text(" ".join(words[:i]))
        return Completion(
            text, call.model, "end_turn", Usage(len(call.prompt) // 4, len(text) // 4)
        )

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
        call = Call(
            "create",
            system,
            list(messages),
            model or self.model,
            max_tokens,
            timeout_s,
            list(tools),
        )
        text = self._next(call)
        return Message.model_validate(
            {
                "id": "msg_fake",
                "type": "message",
                "role": "assistant",
                "model": call.model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        )


def overloaded() -> LLMError:
    """What ClaudeLLM raises when Claude stays overloaded."""
    return LLMError("Claude failed with overloaded_error (HTTP 529) after 3 attempts.", status=529)


class DownArchive:
    """An archive whose Weaviate cannot be reached."""

    kb = "down"

    async def search(
        self, query: str, filters: SearchFilters | None = None, k: int = 8
    ) -> list[Hit]:
        raise SearchUnavailable("Weaviate at http://127.0.0.1:1 is not reachable or failed.")

    async def neighbours(self, hit_id: str, before: int = 1, after: int = 1) -> list[Hit]:
        raise SearchUnavailable("down")

    async def transcript(
        self,
        source_id: str,
        start_s: float | None = None,
        end_s: float | None = None,
        offset: int = 0,
        limit: int = 200,
    ) -> list[Hit]:
        raise SearchUnavailable("down")

    async def sources(self) -> list[SourceInfo]:
        raise SearchUnavailable("down")

    async def speakers(self) -> list[str]:
        raise SearchUnavailable("down")
