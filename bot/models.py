"""The core's contract with the adapters: a Question in, an Answer out, progress events
in between. Adapters translate platform events into these and nothing more."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from retrieval.models import Hit, SearchFilters, Source, SourceInfo

Mode = Literal["quick", "deep", "auto"]
AnswerKind = Literal["answer", "extractive", "help", "nothing_found", "error"]


@dataclass(frozen=True)
class ThreadKey:
    """Identifies one conversation: a thread on a platform."""

    platform: str  # a chat platform's registered name, or "console"
    workspace: str  # the platform's team or guild id, "local"
    channel: str
    thread: str  # the platform's thread id, a console session id

    def __str__(self) -> str:
        return f"{self.platform}:{self.workspace}:{self.channel}:{self.thread}"


@dataclass(frozen=True)
class Actor:
    """Who added or removed a source, and from where (the audit trail): ``via`` is
    ``cli``, a chat platform's name, ``api`` or ``retention``; ``who`` the user id, the
    API token's name or the login."""

    via: str
    who: str = ""

    def __str__(self) -> str:
        return f"{self.via}:{self.who}" if self.who else self.via


@dataclass(frozen=True)
class Question:
    """A user's question as the core sees it."""

    text: str
    thread: ThreadKey
    user: str
    kb: str
    mode: Mode = "quick"
    filters: SearchFilters = field(default_factory=SearchFilters)
    event_id: str | None = None  # the platform's id for the message, for exactly-once


@dataclass(frozen=True)
class Citation:
    """One ``[n]`` in an answer, resolved to the moment or page it came from: for a
    recording, the second where the sentence it relies on starts."""

    n: int
    hit_id: str
    title: str
    link: str | None
    label: str  # "Auth deep dive @ 12:14" or "Auth migration plan, p. 5"
    start_s: float | None = None
    page: int | None = None
    speaker: str | None = None
    support: float | None = None  # how well the cited sentence supports its claim (0..1)
    source_n: int | None = None  # the numbered source (as Claude saw it) it came from
    quote: str | None = None  # the sentence the link opens at


@dataclass(frozen=True)
class NumberedSource:
    """A passage given to Claude as source ``[n]``."""

    n: int
    hit: Hit
    label: str


@dataclass(frozen=True)
class Answer:
    """What the core returns. ``text`` is Markdown with ``[n]`` markers; ``citations``
    lists only the numbers actually used and valid; ``sources`` every numbered source."""

    text: str
    kind: AnswerKind
    mode: Mode
    citations: tuple[Citation, ...] = ()
    sources: tuple[NumberedSource, ...] = ()
    note: str | None = None  # e.g. "research stopped early"
    timings: dict[str, float] = field(default_factory=dict)  # ms: rewrite, search, llm, total
    exchange_id: int | None = None
    standalone_query: str | None = None


@dataclass(frozen=True)
class ProgressEvent:
    """A step the core is taking ("searching 'Auth0 Cognito'", "writing the answer")."""

    text: str


@dataclass(frozen=True)
class PartialAnswer:
    """The answer text streamed so far (the whole text, not a delta)."""

    text: str


Event = ProgressEvent | PartialAnswer
EventSink = Callable[[Event], Awaitable[None]]

log = logging.getLogger("quorum.events")


def guarded_sink(on_event: EventSink | None) -> EventSink:
    """A sink that never breaks an answer: none given is a no-op, and a failing one (an
    adapter's lost placeholder edit) is logged and skipped."""
    if on_event is None:
        return _ignore
    sink = on_event

    async def guarded(event: Event) -> None:
        try:
            await sink(event)
        except Exception:
            log.warning("event sink failed on a %s", type(event).__name__, exc_info=True)

    return guarded


async def _ignore(event: Event) -> None:
    return None


AddStatus = Literal["added", "updated", "unchanged", "failed"]
Stage = Literal["transcribing", "diarizing", "writing"]
"""Where a recording's ingest is: transcribed, its speakers told apart, its passages
embedded and stored (a document is only written)."""
Heard = Callable[[Stage, float, float], None]  # (stage, audio seconds done, of total), on the loop
Waiting = Callable[[int], None]  # a queued upload: how many jobs are ahead of it


@dataclass(frozen=True)
class Added:
    """What adding one file to a knowledge base did (``Library.add``)."""

    status: AddStatus
    title: str
    source_id: str | None = None
    segments: int = 0
    duration_s: float | None = None  # recordings only
    summary: str | None = None  # when a summarizer is wired in
    reason: str | None = None  # why it failed, one line
    link: str | None = None  # where the source opens (its own URL, or Quorum's page)
    # Remembered voices its unnamed speakers sound like (``QUORUM_VOICES=on``), one line each
    suggestions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Excerpt:
    """A few words a speaker said, and the link that opens them at their second."""

    text: str
    start_s: float | None
    link: str | None


@dataclass(frozen=True)
class Speaker:
    """One speaker of a source: talk time (seconds; 0 for untimed text), words, excerpts."""

    name: str
    talk_s: float
    words: int
    excerpts: tuple[Excerpt, ...] = ()


@dataclass(frozen=True)
class Listing:
    """A source's speakers, most talk first, and lines suggested for unnamed ones."""

    source: Source
    speakers: list[Speaker]
    suggestions: list[str] = field(default_factory=list)


class Naming(Protocol):
    """A knowledge base's speakers listed, renamed and merged (``bot.speakers.Speakers``)."""

    async def listing(self, kb: str, name: str) -> Listing:
        """Each speaker of a source with talk time and excerpts linked at their second."""
        ...

    async def rename(self, kb: str, name: str, label: str, new: str, by: Actor) -> Source:
        """Name a speaker of a source everywhere it is stored."""
        ...

    async def merge(self, kb: str, name: str, label: str, into: str, by: Actor) -> Source:
        """Make ``label`` the same person as ``into``, both speakers of the source."""
        ...


class Library(Protocol):
    """A knowledge base's sources, as chat uploads manage them. Implemented by
    ``bot.library.KbLibrary``."""

    def inbox(self, kb: str) -> Path:
        """The folder uploads to ``kb`` are kept in (re-uploading a name updates it)."""
        ...

    async def add(
        self,
        kb: str,
        path: Path,
        heard: Heard | None = None,
        by: Actor | None = None,
        waiting: Waiting | None = None,
        speakers: int | None = None,
    ) -> Added:
        """Ingest one file (recordings are transcribed); never raises for a bad file.
        ``by`` goes to the audit trail; ``waiting`` hears how many jobs are ahead of it;
        ``speakers``: how many people speak in a recording, when the person said."""
        ...

    async def sources(self, kb: str) -> list[SourceInfo]:
        """What ``kb`` holds."""
        ...

    async def forget(self, kb: str, source_id: str, by: Actor | None = None) -> int:
        """Remove a source and every copy of its words; how many passages went (0: there
        was no such source). ``by`` goes to the audit trail."""
        ...

    @property
    def speakers(self) -> Naming:
        """A source's speakers listed, renamed and merged (``/speakers``)."""
        ...


class Core(Protocol):
    """What the adapters call. Implemented by ``bot.engine.Engine``."""

    library: Library | None  # adding and removing sources; None where uploads are off

    async def ask(self, question: Question, on_event: EventSink | None = None) -> Answer:
        """Answer a question in its thread's context. Never raises for user-facing
        trouble: failures come back as an Answer of kind "error" with one short sentence."""
        ...

    async def claim_event(self, platform: str, event_id: str) -> bool:
        """True the first time an event id is seen (persisted), False for a redelivery."""
        ...

    async def is_active_thread(self, thread: ThreadKey) -> bool:
        """True when Quorum has answered in this thread (follow-ups need no mention)."""
        ...

    async def record_feedback(self, exchange_id: int, user: str, value: int) -> None:
        """Store +1/-1 from a user for an exchange (a second click replaces the first)."""
        ...

    async def reset(self, thread: ThreadKey) -> None:
        """Forget a thread's history."""
        ...

    async def speakers(self, kb: str) -> list[str]:
        """Speaker names known to a knowledge base (for autocomplete and suggestions)."""
        ...

    async def source_titles(self, kb: str) -> list[str]:
        """Source titles in a knowledge base (for autocomplete and suggestions)."""
        ...
