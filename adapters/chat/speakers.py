"""``/speakers`` in chat, written once for every platform: list a recording's speakers
(talk time, excerpts linked at their second, remembered voices they sound like), rename
one, merge two. Who may is the same rule as ``/forget`` (the platform checks
``may_manage`` first); everything else is said here. Free of SDK imports."""

from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass

from adapters.chat.uploads import NO_LIBRARY, clock
from adapters.chat.view import one_line
from bot.models import Actor, Library, Listing
from retrieval.errors import QuorumError

log = logging.getLogger("quorum.chat")

USAGE = (
    'Usage: `/speakers SOURCE`, `/speakers rename SOURCE "Speaker 2" "Amara Osei"` or '
    '`/speakers merge SOURCE "Speaker 3" "Speaker 1"`.'
)
MAX_TEXT = 500  # a command's text: a source and two names fit many times over
_QUOTES = str.maketrans({"“": '"', "”": '"', "‘": "'", "’": "'"})  # phones type these


@dataclass(frozen=True)
class Asked:
    """What ``/speakers`` was asked: ``list``, ``rename`` or ``merge``, and its names."""

    action: str
    source: str
    label: str = ""
    name: str = ""


def parse(text: str) -> Asked | str:
    """The request in a ``/speakers`` command's text, or what to say when it is not one."""
    if len(text) > MAX_TEXT:
        return f"That is too long for /speakers (at most {MAX_TEXT} characters). {USAGE}"
    try:
        words = shlex.split(text.translate(_QUOTES))
    except ValueError:
        return f"A quote is not closed. {USAGE}"
    if len(words) == 1:
        return Asked("list", words[0])
    if len(words) == 4 and words[0].lower() in ("rename", "merge"):
        return Asked(words[0].lower(), words[1], words[2], words[3])
    return USAGE


def options(source: str, action: str, label: str | None, name: str | None) -> Asked | str:
    """A request from a platform's typed options (an app command's fields)."""
    if action not in ("list", "rename", "merge"):
        return USAGE
    if action == "list":
        return Asked("list", source)
    return Asked(action, source, label or "", name or "")


def listing_text(listing: Listing) -> str:
    """A recording's speakers as one message: most talk first, three excerpts each."""
    src = listing.source
    if not listing.speakers:
        return f"*{one_line(src.title, 80)}* has no speakers."
    lines = [f"*{one_line(src.title, 80)}* (`{src.id}`):"]
    for s in listing.speakers:
        talk = f"{clock(s.talk_s)} of talk" if s.talk_s else f"{s.words} words"
        lines.append(f"• *{s.name}*: {talk}")
        for e in s.excerpts:
            at = f"{clock(e.start_s)} " if e.start_s is not None else ""
            link = f" {e.link}" if e.link else ""
            lines.append(f"    {at}“{one_line(e.text, 120)}”{link}")
    lines += [f"{x}: name them with `/speakers rename`?" for x in listing.suggestions]
    lines.append('Rename one: `/speakers rename SOURCE "Speaker 2" "Full Name"`.')
    return "\n".join(lines)


async def answer(library: Library | None, kb: str, asked: Asked | str, by: Actor) -> str:
    """What ``/speakers`` says back to ``asked`` (``parse``'s result, or a platform's own
    options); never raises."""
    if library is None:
        return NO_LIBRARY
    if isinstance(asked, str):
        return asked
    if asked.action != "list" and not (asked.label.strip() and asked.name.strip()):
        return f"{asked.action} needs a source, a speaker and a name. {USAGE}"
    speakers = library.speakers
    try:
        if asked.action == "list":
            return listing_text(await speakers.listing(kb, asked.source))
        if asked.action == "rename":
            done = await speakers.rename(kb, asked.source, asked.label, asked.name, by)
            verb = "is now"
        else:
            done = await speakers.merge(kb, asked.source, asked.label, asked.name, by)
            verb = "is merged into"
    except QuorumError as exc:
        return str(exc)
    except Exception:
        log.exception("/speakers failed in %s", kb)
        return "Sorry — something went wrong on my side. Please try again."
    return (
        f"In *{one_line(done.title, 80)}*, {asked.label.strip()} {verb} {asked.name.strip()}. "
        f"Its speakers: {', '.join(done.speakers)}."
    )
