"""The model seam in Quorum's own types: messages, content blocks, tools, usage and one
streamed model turn (``Backend.execute``), with the retry policy every backend shares.

    caller --complete/stream/create--> Model --execute(Request)--> Backend (claude | openai)
                                         |                            |
                                         +-- retries, one deadline    +-- vendor SDK, its
                                             usage, errors counted        errors translated

A backend does one attempt and says how it failed: ``Transient`` (429, 5xx, overload, a
dropped connection, a reply broken while read: worth another attempt, maybe after the
server's ``retry-after``), ``TimeoutError``, or ``LLMError`` (rejected for good; ``NoTools``
when the model or server cannot call tools). ``Model`` retries with exponential backoff and
jitter under one overall deadline (``QUORUM_LLM_TIMEOUT_S``); a wait that would pass it is
not started. A half-read reply is never returned as whole.
"""

from __future__ import annotations

import asyncio
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol, TypedDict

from bot.errors import LLMError

log = logging.getLogger("quorum.llm")
TOOLS_RECHECK_S = 120.0
TextSink = Callable[[str], Awaitable[None]]
Role = Literal["user", "assistant"]


@dataclass(frozen=True)
class Text:
    """Text in a message."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """The model asks for a tool: ``input`` is what it sent (an object, if it behaved)."""

    id: str
    name: str
    input: Any


@dataclass(frozen=True)
class ToolResult:
    """A tool's answer to one ``ToolCall`` (by its id)."""

    call_id: str
    content: str
    is_error: bool = False


Content = Text | ToolCall | ToolResult


class Message(TypedDict):
    """One turn of a conversation: a user's (text, tool results) or the model's (text,
    tool calls)."""

    role: Role
    content: str | Sequence[Content]


@dataclass(frozen=True)
class Tool:
    """A tool the model may call: ``schema`` is the JSON Schema of its input (an object)."""

    name: str
    description: str
    schema: dict[str, Any]


@dataclass
class Usage:
    """Tokens spent. ``input_tokens`` excludes what was read from or written to a cache."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0

    def add(self, other: Usage) -> None:
        """Accumulate another call's usage."""
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_read_input_tokens += other.cache_read_input_tokens
        self.cache_creation_input_tokens += other.cache_creation_input_tokens


CUT_REASONS = frozenset({"max_tokens", "length"})  # Claude's and Chat Completions' words
CUT_LINE = "(Cut short: the model reached its length limit here; ask for less, or in parts.)"


@dataclass(frozen=True)
class Completion:
    """One reply: its text, the tools it calls (if any), and what it cost."""

    text: str
    model: str
    stop_reason: str | None
    usage: Usage
    attempts: int = 1
    tool_calls: tuple[ToolCall, ...] = ()

    @property
    def cut(self) -> bool:
        """True when the model stopped at its length limit, not at the end of its answer."""
        return self.stop_reason in CUT_REASONS

    def shown(self) -> str:
        """The text as a person may read it: a reply cut at the length limit says so on a
        line of its own, never passing for a whole answer."""
        text = self.text.rstrip()
        return f"{text}\n\n{CUT_LINE}" if self.cut and text else text


@dataclass(frozen=True)
class Request:
    """One model turn as a backend sends it."""

    system: str
    messages: Sequence[Message]
    max_tokens: int
    model: str
    tools: Sequence[Tool] = ()
    stream: bool = False


class Transient(Exception):
    """An attempt that failed in a way worth another one; ``wait_s`` is the server's ask."""

    def __init__(self, description: str, *, status: int | None = None, wait_s: float | None = None):
        super().__init__(description)
        self.status = status
        self.wait_s = wait_s


class BrokenReply(Transient):
    """A reply that could not be read whole (reset, malformed, truncated, unfinished)."""


class NoTools(LLMError):
    """The model or its server cannot call tools: deep research is off, quick answers work."""

    def __init__(self, message: str) -> None:
        super().__init__(message, status=400, retryable=False)


class Backend(Protocol):
    """One vendor's API: one attempt at one turn, its failures in the seam's terms."""

    name: str  # "claude" | "openai": the metrics label
    label: str  # how a message names it: "Claude", "the model server at ..."

    async def execute(
        self, request: Request, on_text: TextSink | None, timeout_s: float
    ) -> Completion:
        """Send ``request``; stream text to ``on_text`` when it is set."""
        ...

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        ...


class LLM(Protocol):
    """What the answer pipeline, summaries and deep research need from a language model."""

    model: str
    fast_model: str

    @property
    def tools_supported(self) -> bool | None:
        """False while a refusal of tools is recent, True once tools worked, else None."""
        ...

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One reply, whole."""
        ...

    async def stream(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        max_tokens: int,
        on_text: TextSink | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One reply, calling ``on_text(text_so_far)`` as it is written."""
        ...

    async def create(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[Tool],
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One turn that may call ``tools`` (deep research's loop)."""
        ...


def retry_after_s(headers: Any) -> float | None:
    """Seconds the server asks us to wait (``retry-after-ms``, ``retry-after``), if any."""
    try:
        ms = headers.get("retry-after-ms")
        if ms:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


@dataclass
class Model:
    """A backend under Quorum's retry policy and deadline, with its usage and errors
    counted (``/metrics`` reads them per backend)."""

    backend: Backend
    model: str
    fast_model: str
    timeout_s: float = 60.0
    max_retries: int = 2
    backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    usage: Usage = field(default_factory=Usage)
    retries: int = 0  # requests sent again after a transient failure
    errors: int = 0  # calls that ended in an LLMError
    # A refusal of tools is believed this long, then tools are tried again: a server
    # given a model that calls tools, or restarted with them on, gets deep research
    # back without restarting Quorum, and a server without them is asked once a while.
    tools_recheck_s: float = TOOLS_RECHECK_S
    _tools_ok: bool | None = field(default=None, repr=False)
    _tools_refused_at: float | None = field(default=None, repr=False)

    @property
    def tools_supported(self) -> bool | None:
        """False while a refusal of tools is recent, True once tools worked, else None
        (not known, or the refusal is old enough to try again)."""
        refused = self._tools_refused_at
        if refused is not None and time.monotonic() - refused < self.tools_recheck_s:
            return False
        return self._tools_ok

    @property
    def name(self) -> str:
        """The backend's name: claude or openai."""
        return self.backend.name

    async def aclose(self) -> None:
        """Close the backend's connections."""
        await self.backend.aclose()

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.max_backoff_s, self.backoff_s * 2.0 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    async def _run(
        self, request: Request, on_text: TextSink | None, timeout_s: float | None, kind: str
    ) -> Completion:
        try:
            done = await self._with_retries(request, on_text, timeout_s, kind)
        except NoTools:
            self.errors += 1
            self._tools_ok, self._tools_refused_at = None, time.monotonic()
            raise
        except LLMError:
            self.errors += 1
            raise
        if request.tools:
            self._tools_ok, self._tools_refused_at = True, None
        self.usage.add(done.usage)
        return done

    async def _with_retries(
        self, request: Request, on_text: TextSink | None, timeout_s: float | None, kind: str
    ) -> Completion:
        """Attempt until success, a permanent failure, or the deadline.

        A caller's ``timeout_s`` (deep research passes what is left of its budget) can
        shorten the configured deadline (QUORUM_LLM_TIMEOUT_S), never lengthen it."""
        who = self.backend.label
        budget = self.timeout_s if timeout_s is None else min(timeout_s, self.timeout_s)
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        deadline = loop.time() + budget
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise LLMError(f"{who} did not answer within {budget:g} seconds.")
            try:
                async with asyncio.timeout(remaining):
                    done = await self.backend.execute(request, on_text, remaining)
            except TimeoutError as exc:
                raise LLMError(f"{who} did not answer within {budget:g} seconds.") from exc
            except Transient as exc:
                error = exc
            else:
                self._log(request, done, attempt, started, kind)
                return Completion(
                    done.text, done.model, done.stop_reason, done.usage, attempt, done.tool_calls
                )
            if attempt > self.max_retries:
                raise LLMError(
                    f"{who} failed with {error} after {attempt} attempts.", status=error.status
                ) from error
            wait = self._backoff(attempt) if error.wait_s is None else error.wait_s
            if loop.time() + wait >= deadline:
                raise LLMError(
                    f"{who} failed with {error} and a retry would pass the {budget:g} second "
                    "deadline.",
                    status=error.status,
                ) from error
            log.warning(
                "%s: %s; retry %d of %d in %.2fs", who, error, attempt, self.max_retries, wait
            )
            self.retries += 1
            await asyncio.sleep(wait)

    def _log(
        self, request: Request, done: Completion, attempts: int, started: float, kind: str
    ) -> None:
        u = done.usage
        log.info(
            "%s %s model=%s tools=%d attempts=%d in=%d out=%d cache_read=%d cache_write=%d ms=%.0f",
            self.backend.name,
            kind,
            done.model,
            len(request.tools),
            attempts,
            u.input_tokens,
            u.output_tokens,
            u.cache_read_input_tokens,
            u.cache_creation_input_tokens,
            (time.perf_counter() - started) * 1000,
        )

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One reply, whole."""
        request = Request(system, list(messages), max_tokens, model or self.model)
        return await self._run(request, None, timeout_s, "complete")

    async def stream(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        max_tokens: int,
        on_text: TextSink | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One reply, streamed: ``on_text`` gets the whole text so far after each delta.
        A retry after a partly streamed reply starts the text again from empty."""
        request = Request(system, list(messages), max_tokens, model or self.model, stream=True)
        return await self._run(request, on_text, timeout_s, "stream")

    async def create(
        self,
        *,
        system: str,
        messages: Sequence[Message],
        tools: Sequence[Tool] = (),
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One turn that may call ``tools``; its calls come back in ``tool_calls``."""
        request = Request(system, list(messages), max_tokens, model or self.model, tuple(tools))
        return await self._run(request, None, timeout_s, "create")
