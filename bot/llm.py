"""Claude, behind a small seam (``LLM``): a plain completion, a streamed one, and a raw
``messages.create`` with tools for deep research.

``ClaudeLLM`` wraps ``AsyncAnthropic`` with the SDK's own retries off (``max_retries=0``)
and retries itself, so one overall deadline covers every attempt and the backoff between
them: 429, 5xx and 529 (overloaded) are retried with exponential backoff and jitter,
honouring ``retry-after``; a wait that would pass the deadline is not started. Whatever
still fails becomes one ``LLMError``. A reply that breaks while it is read (a reset
connection, malformed or truncated events or JSON, an empty stream, a stream that ends
without ``message_stop``) is a ``BrokenReply`` and is retried like a connection error:
a half-read reply is never returned as whole. The static system prompt is sent as a block marked
``cache_control: ephemeral`` so repeated questions reuse the cached prefix. Token usage
is counted per call and in total.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import random
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

import anthropic
from anthropic.types import Message, MessageParam, TextBlockParam, ToolParam

from bot.config import Settings
from bot.errors import LLMError

log = logging.getLogger("quorum.llm")
T = TypeVar("T")
TextSink = Callable[[str], Awaitable[None]]
RETRYABLE_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


@dataclass
class Usage:
    """Tokens spent, as Claude reports them."""

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

    @classmethod
    def of(cls, message: Message) -> Usage:
        """The usage of one response."""
        u = message.usage
        return cls(
            input_tokens=u.input_tokens or 0,
            output_tokens=u.output_tokens or 0,
            cache_read_input_tokens=u.cache_read_input_tokens or 0,
            cache_creation_input_tokens=u.cache_creation_input_tokens or 0,
        )


@dataclass(frozen=True)
class Completion:
    """Claude's text reply with what it cost."""

    text: str
    model: str
    stop_reason: str | None
    usage: Usage
    attempts: int = 1


class LLM(Protocol):
    """What the answer pipeline and deep research need from a language model."""

    model: str
    fast_model: str

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[MessageParam],
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
        messages: Sequence[MessageParam],
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
        messages: Sequence[MessageParam],
        tools: Sequence[ToolParam],
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Message:
        """The raw Message for a request with tools (deep research's loop)."""
        ...


class BrokenReply(Exception):
    """Claude's reply could not be read whole; retried, then an ``LLMError``."""


@contextlib.contextmanager
def _reading() -> Iterator[None]:
    """Turn anything raised while reading a reply, other than the SDK's own API errors,
    into ``BrokenReply``: the SDK lets transport and parsing errors of a body escape."""
    try:
        yield
    except (anthropic.APIError, BrokenReply):
        raise
    except Exception as exc:
        raise BrokenReply(f"a broken reply ({type(exc).__name__})") from exc


def text_of(message: Message) -> str:
    """The text blocks of a reply, joined."""
    return "".join(block.text for block in message.content if block.type == "text")


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


def _retryable(exc: anthropic.APIStatusError) -> bool:
    status = exc.status_code
    if status in (408, 409, 429) or status >= 500:
        return True
    # An error event in the middle of a stream arrives on a 200 response.
    return status < 400 and (exc.type or "") in RETRYABLE_TYPES


def _describe(exc: BaseException) -> str:
    if isinstance(exc, anthropic.APIStatusError):
        kind = exc.type or "error"
        if exc.status_code < 400:
            return f"{kind} (mid-stream)"
        return f"{kind} (HTTP {exc.status_code})"
    if isinstance(exc, anthropic.APIConnectionError):
        return "a connection error"
    if isinstance(exc, BrokenReply):
        return str(exc)
    return type(exc).__name__


class ClaudeLLM:
    """Claude through ``AsyncAnthropic`` with Quorum's own retries and deadline."""

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        fast_model: str,
        base_url: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
    ) -> None:
        self.model = model
        self.fast_model = fast_model
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.usage = Usage()
        self.retries = 0  # requests sent again after a 429/5xx/overload/connection error
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> ClaudeLLM | None:
        """Claude as configured, or None when no API key is set (extractive answers)."""
        if settings.anthropic_api_key is None or not settings.anthropic_api_key.get_secret_value():
            return None
        return cls(
            api_key=settings.anthropic_api_key.get_secret_value(),
            base_url=settings.anthropic_base_url,
            model=settings.model,
            fast_model=settings.fast_model,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections."""
        await self.client.close()

    @staticmethod
    def system_blocks(system: str) -> list[TextBlockParam]:
        """The static system prompt as one cacheable block."""
        return [{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}]

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.max_backoff_s, self.backoff_s * 2.0 ** (attempt - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)

    async def _with_retries(
        self, attempt_fn: Callable[[float], Awaitable[T]], timeout_s: float | None
    ) -> tuple[T, int]:
        """Run ``attempt_fn(seconds_left)`` until it succeeds, fails for good, or the
        deadline passes; returns its result and the number of attempts.

        A caller's ``timeout_s`` (deep research passes what is left of its budget) can
        shorten the configured deadline (QUORUM_LLM_TIMEOUT_S), never lengthen it."""
        budget = self.timeout_s if timeout_s is None else min(timeout_s, self.timeout_s)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + budget
        attempt = 0
        while True:
            attempt += 1
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise LLMError(f"Claude did not answer within {budget:g} seconds.")
            try:
                async with asyncio.timeout(remaining):
                    return await attempt_fn(remaining), attempt
            except (TimeoutError, anthropic.APITimeoutError) as exc:
                raise LLMError(f"Claude did not answer within {budget:g} seconds.") from exc
            except anthropic.APIStatusError as exc:
                if not _retryable(exc):
                    raise LLMError(
                        f"Claude rejected the request: {_describe(exc)}.",
                        status=exc.status_code,
                        retryable=False,
                    ) from exc
                error: Exception = exc
                wait = retry_after_s(exc.response.headers)
            except (anthropic.APIConnectionError, BrokenReply) as exc:
                error, wait = exc, None
            status = getattr(error, "status_code", None)
            if attempt > self.max_retries:
                raise LLMError(
                    f"Claude failed with {_describe(error)} after {attempt} attempts.",
                    status=status,
                ) from error
            wait = self._backoff(attempt) if wait is None else wait
            if loop.time() + wait >= deadline:
                raise LLMError(
                    f"Claude failed with {_describe(error)} and a retry would pass the "
                    f"{budget:g} second deadline.",
                    status=status,
                ) from error
            log.warning(
                "Claude %s; retry %d of %d in %.2fs",
                _describe(error),
                attempt,
                self.max_retries,
                wait,
            )
            self.retries += 1
            await asyncio.sleep(wait)

    def _record(self, message: Message, started: float, attempts: int, kind: str) -> Usage:
        usage = Usage.of(message)
        self.usage.add(usage)
        log.info(
            "claude %s model=%s attempts=%d in=%d out=%d cache_read=%d cache_write=%d ms=%.0f",
            kind,
            message.model,
            attempts,
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens,
            (time.perf_counter() - started) * 1000,
        )
        return usage

    async def create(
        self,
        *,
        system: str,
        messages: Sequence[MessageParam],
        tools: Sequence[ToolParam] = (),
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Message:
        """``messages.create`` (with tools, if any) under the retry policy; the raw Message."""
        started = time.perf_counter()

        async def attempt(remaining: float) -> Message:
            with _reading():
                if tools:
                    return await self.client.messages.create(
                        model=model or self.model,
                        max_tokens=max_tokens,
                        system=self.system_blocks(system),
                        messages=list(messages),
                        tools=list(tools),
                        timeout=remaining,
                    )
                return await self.client.messages.create(
                    model=model or self.model,
                    max_tokens=max_tokens,
                    system=self.system_blocks(system),
                    messages=list(messages),
                    timeout=remaining,
                )

        message, attempts = await self._with_retries(attempt, timeout_s)
        self._record(message, started, attempts, "create")
        return message

    async def complete(
        self,
        *,
        system: str,
        messages: Sequence[MessageParam],
        max_tokens: int,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One reply, whole."""
        started = time.perf_counter()

        async def attempt(remaining: float) -> Message:
            with _reading():
                return await self.client.messages.create(
                    model=model or self.model,
                    max_tokens=max_tokens,
                    system=self.system_blocks(system),
                    messages=list(messages),
                    timeout=remaining,
                )

        message, attempts = await self._with_retries(attempt, timeout_s)
        usage = self._record(message, started, attempts, "complete")
        return Completion(text_of(message), message.model, message.stop_reason, usage, attempts)

    async def stream(
        self,
        *,
        system: str,
        messages: Sequence[MessageParam],
        max_tokens: int,
        on_text: TextSink | None = None,
        model: str | None = None,
        timeout_s: float | None = None,
    ) -> Completion:
        """One reply, streamed: ``on_text`` gets the whole text so far after each delta.

        A retry after a partly streamed reply starts the text again from empty."""
        started = time.perf_counter()

        async def attempt(remaining: float) -> Message:
            parts: list[str] = []
            finished = False
            async with self.client.messages.stream(
                model=model or self.model,
                max_tokens=max_tokens,
                system=self.system_blocks(system),
                messages=list(messages),
                timeout=remaining,
            ) as stream:
                events = stream.__aiter__()
                while True:
                    # Only the reading is translated: on_text's own errors are not Claude's.
                    with _reading():
                        event = await anext(events, None)
                    if event is None:
                        break
                    finished = finished or event.type == "message_stop"
                    if event.type == "text" and event.text:
                        parts.append(event.text)
                        if on_text is not None:
                            await on_text("".join(parts))
                if not finished:
                    raise BrokenReply("an incomplete reply (the stream ended before message_stop)")
                with _reading():
                    return await stream.get_final_message()

        message, attempts = await self._with_retries(attempt, timeout_s)
        usage = self._record(message, started, attempts, "stream")
        return Completion(text_of(message), message.model, message.stop_reason, usage, attempts)
