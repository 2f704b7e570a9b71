"""Files added and sources removed in chat, written once for every platform: who may,
what is refused before any byte is downloaded (type, size), the download into the
knowledge base's inbox, the ingest with its progress, and every message said about it.
A platform only says who the user is, how to download the file, and how to reply.
Free of SDK imports (``tests/test_architecture.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
from collections.abc import AsyncIterable, Awaitable, Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from adapters.chat.view import one_line
from bot.models import Actor, Added, Event, Library, ProgressEvent, Stage
from retrieval.errors import QuorumError
from retrieval.ingest import SUPPORTED_SUFFIXES
from retrieval.models import SourceInfo

log = logging.getLogger("quorum.chat")

MB = 1024 * 1024
NOT_ADMIN = "Sorry — only Quorum's admins can add or remove sources here."
NO_LIBRARY = "Sorry — adding and removing sources is not switched on for this bot."
TOO_LARGE = "Sorry — {name} is larger than it said; the limit here is {max_mb} MB."
FAILED = "Sorry — something went wrong on my side while adding {name}. Please try again."
LISTED = (
    15  # sources named in one /sources reply (within every platform's limits); the rest counted
)
MAX_SPEAKERS = 20
BAD_SPEAKERS = (
    "Sorry — `speakers:` says how many people speak in the recording, a number from 1 to "
    f"{MAX_SPEAKERS} (e.g. `speakers:3`). Nothing was added; share the file again with it."
)
SPEAKERS_SAID = re.compile(r"(?<![\w-])speakers\s*[:=]\s*(\S*)", re.I)


@dataclass(frozen=True)
class Upload:
    """A file shared in chat: its name and size as the platform reports them, the
    platform's authenticated download of it to a path (at most a limit of bytes, else
    ``TooLarge``: a declared size is only a claim)."""

    name: str
    size: int
    fetch: Callable[[Path, int], Awaitable[None]]


class TooLarge(Exception):
    """A download passed the size limit; it was stopped there."""


async def write_capped(chunks: AsyncIterable[bytes], to: Path, limit: int) -> None:
    """Write ``chunks`` to ``to``, stopping with ``TooLarge`` as soon as they pass
    ``limit`` bytes: the platform's declared size is not trusted."""
    written = 0
    file = await asyncio.to_thread(to.open, "wb")
    try:
        async for chunk in chunks:
            written += len(chunk)
            if written > limit:
                raise TooLarge(f"more than {limit} bytes")
            await asyncio.to_thread(file.write, chunk)
    finally:
        await asyncio.to_thread(file.close)


class UploadReply(Protocol):
    """Where an upload's progress and result are shown: one message, edited."""

    async def start(self, placeholder: str) -> None: ...

    async def on_event(self, event: Event) -> None: ...

    async def done(self, text: str) -> None:
        """Replace the progress with ``text``; must not raise."""
        ...


def may_manage(
    user: str,
    admins: Collection[str] = (),
    *,
    roles: Collection[str] = (),
    admin_role: str | None = None,
    manages_server: bool = False,
) -> bool:
    """May ``user`` add and remove sources: a listed admin, a member of the admin role
    (by id or name), or someone who manages the server."""
    return user in admins or manages_server or (admin_role is not None and admin_role in roles)


def speakers_said(text: str) -> int | None | str:
    """How many people speak in the recordings a message shares, when it says so
    (``speakers:3``, the upload command's option typed beside the file); None when it does
    not; ``BAD_SPEAKERS`` when what follows is not a count."""
    found = SPEAKERS_SAID.search(text)
    if found is None:
        return None
    said = found.group(1).rstrip(".,;")
    if not said.isascii() or not said.isdigit() or not 1 <= int(said) <= MAX_SPEAKERS:
        return BAD_SPEAKERS
    return int(said)


def shown_name(name: str, limit: int = 100) -> str:
    """A file name as a message shows it: one line, cut in its stem so the extension
    still shows."""
    flat = one_line(name, len(name) + 1)
    if len(flat) <= limit:
        return flat
    suffix = Path(flat).suffix[:16]
    return one_line(flat[: len(flat) - len(suffix)], limit - len(suffix)) + suffix


def refusal(name: str, size: int, max_mb: int) -> str | None:
    """Why a file is refused before it is downloaded, or None to accept it. ``name`` is the
    file's whole name: its type is read from it, never from a shortened one."""
    suffix = Path(name).suffix.lower()
    name = shown_name(name)
    if suffix not in SUPPORTED_SUFFIXES:
        kinds = " ".join(sorted(SUPPORTED_SUFFIXES))
        what = f"*{suffix}* files" if suffix else "files without an extension"
        return f"Sorry — I can't read {what} like {name}. I take {kinds}."
    if size > max_mb * MB:
        return f"Sorry — {name} is {size / MB:.0f} MB; the limit here is {max_mb} MB."
    if size <= 0:
        return f"Sorry — {name} is empty."
    return None


def safe_name(name: str) -> str:
    """The upload's file name with no folders and no characters a file system minds."""
    base = Path(name.replace("\\", "/")).name
    stem, suffix = Path(base).stem, Path(base).suffix.lower()
    stem = re.sub(r"[^\w.-]+", "-", stem).strip(".-")[:100] or "upload"
    return stem + suffix


def shelf(by: Actor | None) -> str:
    """The folder of a person's uploads inside a knowledge base's inbox: a file's identity
    is who shared it and its name, so the same name from someone else is another file."""
    who = re.sub(r"[^\w-]+", "-", f"{by.via}-{by.who}" if by and by.who else "").strip("-")
    return "by-" + (who[:64] or "someone")


def segments(n: int) -> str:
    """``1 segment``, ``4 segments``."""
    return f"{n} segment{'' if n == 1 else 's'}"


def clock(seconds: float) -> str:
    """``m:ss`` or ``h:mm:ss``."""
    s = int(seconds)
    return (
        f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
    )


def stage_text(stage: Stage, name: str, done_s: float, total_s: float) -> str:
    """What an upload's progress message says of the stage it is in."""
    share = f"{100 * done_s / total_s:.0f} %" if total_s else ""
    if stage == "writing":
        return f"Writing {name} into the archive…"
    if stage == "diarizing":
        return f"Telling speakers apart in {name}{': ' + share if share else ''}…"
    share += ", " if share else ""
    return f"Transcribing {name}: {share}{clock(done_s)} of {clock(total_s)}…"


def result_text(name: str, added: Added) -> str:
    """What the thread is told once an upload is ingested (or could not be)."""
    if added.status == "failed":
        return f"I couldn't add {name}: {added.reason}"
    what = f"*{added.title}* (`{added.source_id}`)"
    length = f", {clock(added.duration_s)} of recording" if added.duration_s else ""
    facts = f"{segments(added.segments)}{length}"
    if added.status == "unchanged":
        line = f"{what} is already in the knowledge base, unchanged ({facts})."
    else:
        verb = "Added" if added.status == "added" else "Updated"
        line = f"{verb} {what}: {facts}. Ask me about it."
        if added.link:
            line += f" Open it: {added.link}"
    if added.summary:
        first = [one_line(x, 300) for x in added.summary.strip().splitlines() if x.strip()]
        line += "\n" + "\n".join(f"> {x}" for x in first[:3])
    for heard in added.suggestions:  # remembered voices: suggested, never applied
        line += f"\n{heard}: name them with `/speakers rename {added.source_id} …`?"
    return line


def sources_text(infos: list[SourceInfo]) -> str:
    """``/sources``: what a knowledge base holds, one line a source."""
    if not infos:
        return "This knowledge base is empty. Share a recording or document with me to add one."
    lines = [f"This knowledge base holds {len(infos)} source{'s' if len(infos) != 1 else ''}:"]
    for i in infos[:LISTED]:
        when = f", {i.source.recorded_at.isoformat()}" if i.source.recorded_at else ""
        lines.append(
            f"• `{i.source.id}` {one_line(i.source.title, 60)} "
            f"({i.source.kind}{when}, {segments(i.segments)})"
        )
    if len(infos) > LISTED:
        lines.append(f"…and {len(infos) - LISTED} more.")
    return "\n".join(lines)


def find(infos: list[SourceInfo], wanted: str) -> SourceInfo | None:
    """The source ``/forget`` names, by id or by title (case-insensitive)."""
    w = wanted.strip().strip("`").lower()
    return next(
        (i for i in infos if i.source.id.lower() == w),
        next((i for i in infos if i.source.title.lower() == w), None),
    )


def not_found(wanted: str) -> str:
    """``/forget`` of a name the knowledge base does not hold."""
    return f"There's no source `{one_line(wanted, 80)}` here; /sources lists them."


def confirm_text(info: SourceInfo) -> str:
    """The question under ``/forget``'s confirm button."""
    return (
        f"Remove *{one_line(info.source.title, 80)}* (`{info.source.id}`, "
        f"{segments(info.segments)}) from this knowledge base? Answers will no longer cite it."
    )


class Uploads:
    """Adds files shared in chat to a knowledge base and removes sources, over the core's
    ``Library``."""

    def __init__(self, library: Library | None, max_mb: int) -> None:
        self.library, self.max_mb = library, max_mb
        # One upload at a time per kept file: the same person sharing the same name twice
        # at once is one file updated twice, not two downloads replacing each other under
        # an ingest (another person's same name is refused by the ingest's own claim).
        self._shelves: dict[Path, tuple[asyncio.Lock, int]] = {}  # the lock, its users

    async def add(
        self,
        kb: str,
        upload: Upload,
        reply: UploadReply,
        by: Actor | None = None,
        speakers: int | None = None,
    ) -> Added | None:
        """Check, download, ingest and report one file in ``reply``; never raises. A
        refused file is never downloaded; a failed one is not kept. ``by`` (who shared
        it) goes to the audit trail; ``speakers``: how many people speak in a recording,
        when the person said (the upload command's option)."""
        whole = Path(upload.name.replace("\\", "/")).name
        name = shown_name(whole)
        if self.library is None:
            await reply.done(NO_LIBRARY)
            return None
        if refused := refusal(whole, upload.size, self.max_mb):
            await reply.done(refused)
            return None
        library = self.library
        pending: set[asyncio.Task[None]] = set()

        said: list[str] = []

        def say(text: str) -> None:
            if said == [text]:  # the same again (a job's row read twice): no edit
                return
            said[:] = [text]
            task = asyncio.ensure_future(reply.on_event(ProgressEvent(text)))
            pending.add(task)
            task.add_done_callback(pending.discard)

        def heard(stage: Stage, done_s: float, total_s: float) -> None:
            say(stage_text(stage, name, done_s, total_s))

        def waiting(ahead: int) -> None:
            behind = f" behind {ahead} other file{'s' if ahead != 1 else ''}" if ahead else ""
            say(f"Queued{behind}: {name}…")

        folder = library.inbox(kb) / shelf(by)
        target = folder / safe_name(upload.name)
        lock, users = self._shelves.get(target, (asyncio.Lock(), 0))
        self._shelves[target] = (lock, users + 1)
        try:
            async with lock:
                return await self._add(
                    kb, name, upload, folder, reply, by, heard, waiting, pending, speakers
                )
        finally:
            lock, users = self._shelves[target]
            if users > 1:
                self._shelves[target] = (lock, users - 1)
            else:  # the last one out: no lock kept per file name ever shared
                del self._shelves[target]

    async def _add(
        self,
        kb: str,
        name: str,
        upload: Upload,
        folder: Path,
        reply: UploadReply,
        by: Actor | None,
        heard: Callable[[Stage, float, float], None],
        waiting: Callable[[int], None],
        pending: set[asyncio.Task[None]],
        speakers: int | None = None,
    ) -> Added | None:
        """Download, ingest and report one checked file."""
        assert self.library is not None
        library = self.library
        path: Path | None = None
        previous: Path | None = None
        kept = False
        try:
            await reply.start(f"Downloading {name}…")
            downloaded = await self._download(folder, upload)
            if isinstance(downloaded, str):
                await reply.done(downloaded.format(name=name, max_mb=self.max_mb))
                return None
            path, previous = downloaded
            await reply.on_event(ProgressEvent(f"Reading {name}…"))
            added = await library.add(kb, path, heard, by, waiting, speakers)
            kept = added.status != "failed"
            await asyncio.gather(*pending, return_exceptions=True)
        except QuorumError as exc:
            log.warning("adding an upload to %s failed: %s", kb, exc)
            await reply.done(f"I couldn't add {name}: {exc}")
            return None
        except Exception:
            log.exception("adding an upload to %s failed", kb)
            await reply.done(FAILED.format(name=name))
            return None
        finally:
            if path is not None:
                await asyncio.to_thread(_settle, path, previous, kept)
        await reply.done(result_text(name, added))
        return added

    async def _download(self, folder: Path, upload: Upload) -> tuple[Path, Path | None] | str:
        """The file, downloaded beside its final name then moved there whole, and where
        the version it replaces was set aside (None when it is new); or what to say when the
        platform would not give it or it passed the size limit (stopped right there)."""
        path = folder / safe_name(upload.name)
        part = path.with_name(f".{path.name}.{secrets.token_hex(4)}.part")
        try:
            await asyncio.to_thread(folder.mkdir, parents=True, exist_ok=True)
            await upload.fetch(part, self.max_mb * MB)
            size = part.stat().st_size
            if size > self.max_mb * MB:
                raise TooLarge(f"{size} bytes")
            previous: Path | None = None
            if path.exists():
                previous = path.with_name(f".{path.name}.previous")
                path.replace(previous)
            part.replace(path)
        except Exception as exc:
            log.warning("download of an upload failed: %s", exc)
            with contextlib.suppress(OSError):
                part.unlink()
            if isinstance(exc, TooLarge):
                return TOO_LARGE
            return "Sorry — I couldn't download {name}. Please share it again."
        return path, previous

    async def sources(self, kb: str) -> str:
        """``/sources``, as one message."""
        if self.library is None:
            return NO_LIBRARY
        return sources_text(await self.library.sources(kb))

    async def to_forget(self, kb: str, wanted: str) -> tuple[SourceInfo | None, str]:
        """The source ``/forget`` names and the question to confirm, or None and why not."""
        if self.library is None:
            return None, NO_LIBRARY
        info = find(await self.library.sources(kb), wanted)
        return (info, confirm_text(info)) if info else (None, not_found(wanted))

    async def forget(self, kb: str, source_id: str, by: Actor | None = None) -> str:
        """Remove a confirmed source (every copy of its words); what to say about it."""
        if self.library is None:
            return NO_LIBRARY
        try:
            removed = await self.library.forget(kb, source_id, by)
        except QuorumError as exc:
            return f"I couldn't remove `{source_id}`: {exc}"
        if not removed:
            return not_found(source_id)
        return f"Removed `{source_id}` ({removed} passages). Answers no longer cite it."


def _settle(path: Path, previous: Path | None, kept: bool) -> None:
    """Keep the new file and drop the version it replaced, or (the new one failed) put the
    previous version back: the source still in the knowledge base keeps its file."""
    with contextlib.suppress(OSError):
        if kept:
            if previous is not None:
                previous.unlink(missing_ok=True)
        elif previous is not None:
            previous.replace(path)
        else:
            path.unlink(missing_ok=True)


__all__ = [
    "NOT_ADMIN",
    "TooLarge",
    "UploadReply",
    "Upload",
    "Uploads",
    "may_manage",
    "refusal",
    "result_text",
    "safe_name",
    "sources_text",
    "write_capped",
]
