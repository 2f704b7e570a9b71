"""Suggested prompts for an assistant panel, drawn from what a knowledge base holds: its
most recent recordings (a question scoped to each with ``source:``) and a named speaker
(never an unnamed "Speaker 2": each recording has its own), so the suggestions change as
sources are added and removed and speakers are named. Any platform with such a panel uses
these; free of SDK imports."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date

from adapters.chat.view import one_line
from bot.models import Core
from bot.voices import unnamed

log = logging.getLogger("quorum.chat")

TITLE = "Ask about your recordings"
TITLE_CHARS = 40
MAX_PROMPTS = 4
EMPTY = "Nothing is in the archive yet: add recordings, then ask about them."


@dataclass(frozen=True)
class Suggestion:
    """One prompt: the button's ``title`` and the ``message`` sent as the user's question."""

    title: str
    message: str


async def suggestions(core: Core, kb: str) -> list[Suggestion]:
    """Up to four prompts for ``kb``: its newest sources first, then a speaker; one
    "how to ask" prompt when it holds nothing (or cannot be read)."""
    titles = await _recent_titles(core, kb)
    out = [
        Suggestion(one_line(f"Decisions in {t}", TITLE_CHARS), f'What was decided? source:"{t}"')
        for t in titles[: MAX_PROMPTS - 2]
    ]
    speakers = [s for s in await core.speakers(kb) if not unnamed(s)]
    if speakers:
        who = speakers[0]
        out.append(
            Suggestion(
                one_line(f"What {who} raised", TITLE_CHARS),
                f'What did {who} raise? speaker:"{who}"',
            )
        )
    if titles:
        out.append(Suggestion("Open questions", "Which questions were left open?"))
    else:
        out.append(Suggestion("How to ask", "help"))
    return out[:MAX_PROMPTS]


async def _recent_titles(core: Core, kb: str) -> list[str]:
    """Source titles, the most recently recorded first when the library can tell."""
    if core.library is not None:
        try:
            infos = await core.library.sources(kb)
        except Exception as exc:
            log.warning("could not list sources for suggestions: %s", exc)
            return []
        infos.sort(key=lambda i: i.source.recorded_at or date.min, reverse=True)
        return [i.source.title for i in infos]
    return await core.source_titles(kb)
