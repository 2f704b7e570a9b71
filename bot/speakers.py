"""Who said it: a source's speakers listed (talk time, three excerpts linked at their
second), renamed ("Speaker 2" -> "Amara Osei") and merged (two labels that are one person).

Every door (``quorum speakers``, ``/speakers`` in chat, the recording's page) calls
``Speakers``; the write itself is ``Writer.relabel`` (the one write path), which rewrites
the source where it is stored (``retrieval.write.relabel``) and writes the audit entry. Names are
checked here, once: a speaker's name is what labels, filters (``speaker:``), captions' voice
tags and summaries print, so it may not hold a ``:``, markup or control characters.
"""

from __future__ import annotations

import asyncio
import unicodedata

from bot.errors import InvalidInput
from bot.models import Actor, Excerpt, Listing, Speaker
from bot.sessions import AuditEntry
from bot.voices import Suggestion, Voices
from bot.write import Writer
from retrieval.models import Hit, Source, SourceInfo
from retrieval.search.names import choose_sources
from retrieval.search.search import SearchService
from retrieval.write.relabel import Cue, cues, read_all

MAX_NAME = 80
EXCERPTS = 3
EXCERPT_CHARS = 160
_ALLOWED = set(" .'-")


def check_name(name: str) -> str:
    """A new speaker name, tidied; InvalidInput says what is wrong with it."""
    tidy = " ".join(name.split())
    if not tidy:
        raise InvalidInput("A speaker's name cannot be empty.")
    if len(tidy) > MAX_NAME:
        raise InvalidInput(
            f"A speaker's name is at most {MAX_NAME} characters ({len(tidy)} given)."
        )
    bad = [c for c in tidy if not (c.isalnum() or c in _ALLOWED or unicodedata.category(c) == "Mn")]
    if bad:
        raise InvalidInput(
            f"A speaker's name uses letters, digits, spaces and . ' - only ({bad[0]!r} is not one)."
        )
    return tidy


def find_source(infos: list[SourceInfo], name: str) -> Source:
    """The one source ``name`` (an id or title) names; InvalidInput when none or several."""
    choice = choose_sources(name, [i.source for i in infos])
    if not choice.ids:
        raise InvalidInput(f"No source matches {name!r}; `quorum sources` lists them.")
    if len(choice.ids) > 1:
        raise InvalidInput(
            f"{name!r} matches several sources ({', '.join(choice.ids[:5])}); name one by id."
        )
    return next(i.source for i in infos if i.source.id == choice.ids[0])


def _label(source: Source, label: str) -> str:
    """The source's own spelling of ``label``; InvalidInput when it has no such speaker."""
    wanted = " ".join(label.split()).casefold()
    for name in source.speakers:
        if name.casefold() == wanted:
            return name
    if not source.speakers:
        raise InvalidInput(f"{source.title} has no speakers to name.")
    raise InvalidInput(
        f"{label.strip()!r} is not a speaker of {source.title}; its speakers are "
        f"{', '.join(source.speakers)}."
    )


def _excerpts(name: str, turns: list[Hit], spoken: list[Cue]) -> tuple[Excerpt, ...]:
    """Three of the speaker's longest turns (else cues), in time order."""
    own = [h for h in turns if h.segment.speakers == (name,)]
    picked = sorted(own, key=lambda h: -len(h.segment.text))[:EXCERPTS]
    picked.sort(key=lambda h: (h.segment.start_s or 0.0, h.segment.position))
    out = [Excerpt(_short(h.segment.text), h.segment.start_s, h.link) for h in picked]
    if not out:  # only short remarks: the longest of those
        mine = sorted((c for c in spoken if c.speaker == name), key=lambda c: -len(c.text))
        out = [Excerpt(_short(c.text), c.start_s, None) for c in mine[:EXCERPTS]]
    return tuple(out)


def _short(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= EXCERPT_CHARS else line[: EXCERPT_CHARS - 1].rstrip() + "…"


class Speakers:
    """Lists, renames and merges the speakers of one knowledge base's sources."""

    def __init__(
        self, *, writer: Writer, search: SearchService, voices: Voices | None = None
    ) -> None:
        self.writer, self.search, self.voices = writer, search, voices

    async def source(self, kb: str, name: str) -> Source:
        """The source ``name`` (an id or title) names in ``kb``."""
        return find_source(await self.search.store.list_sources(kb), name)

    async def listing(self, kb: str, name: str) -> Listing:
        """Each speaker of a source with talk time and excerpts linked at their second."""
        source = await self.source(kb, name)
        stored = await read_all(self.search.store, kb, source)
        spoken = cues(stored.windows)
        turns = self.search.linked(kb, stored.units["turn"])
        if not any(c.speaker for c in spoken) or not turns:  # untimed, or turns unlinked
            turns = self.search.linked(kb, stored.units["turn"] or stored.units["window"])
        out: list[Speaker] = []
        for speaker in source.speakers:
            talk = sum(c.end_s - c.start_s for c in spoken if c.speaker == speaker)
            words = sum(len(c.text.split()) for c in spoken if c.speaker == speaker)
            if not spoken:
                words = sum(
                    len(h.segment.text.split()) for h in turns if h.segment.speakers == (speaker,)
                )
            out.append(Speaker(speaker, talk, words, _excerpts(speaker, turns, spoken)))
        out.sort(key=lambda s: (-s.talk_s, -s.words))
        return Listing(source, out, [str(s) for s in await self.suggest(kb, source)])

    async def suggest(self, kb: str, source: Source) -> list[Suggestion]:
        """Remembered voices the source's unnamed speakers sound like (voices on only)."""
        if self.voices is None or not self.voices.enabled:
            return []
        return await asyncio.to_thread(self.voices.suggest, kb, source)

    async def _relabel(
        self, kb: str, source: Source, mapping: dict[str, str], by: Actor, detail: str
    ) -> Source:
        done = await self.writer.relabel(kb, source, mapping, by, detail)
        if self.voices is not None:
            await asyncio.to_thread(self.voices.relabel, kb, source.id, mapping)
        return done

    async def forget(self, kb: str, name: str, by: Actor) -> list[str]:
        """A remembered voice removed everywhere in ``kb``; the sources it was kept for.
        InvalidInput when no voice of that name is kept."""
        if self.voices is None:
            raise InvalidInput("No voices are remembered: QUORUM_VOICES is off.")
        gone = await asyncio.to_thread(self.voices.forget, kb, name)
        if not gone:
            raise InvalidInput(f"No voice named {name.strip()!r} is remembered in {kb}.")
        holdings = self.writer.holdings
        if holdings is not None:
            detail = f"voice {name.strip()!r} forgotten ({len(gone)} sources)"
            await holdings.sessions.record_audit(AuditEntry("speakers", kb, "", by, "", detail))
        return gone

    async def rename(self, kb: str, name: str, label: str, new: str, by: Actor) -> Source:
        """Name a speaker of a source (``Speaker 2`` -> ``Amara Osei``) everywhere it is
        stored; a name the source already has is refused (that is a merge)."""
        source = await self.source(kb, name)
        old, tidy = _label(source, label), check_name(new)
        taken = [s for s in source.speakers if s.casefold() == tidy.casefold() and s != old]
        if taken:
            raise InvalidInput(
                f"{source.title} already has a speaker {taken[0]!r}: merge {old!r} into "
                f"{taken[0]!r} instead (speakers merge)."
            )
        if tidy == old:
            return source
        detail = f"speaker {old!r} renamed {tidy!r}"
        return await self._relabel(kb, source, {old: tidy}, by, detail)

    async def merge(self, kb: str, name: str, label: str, into: str, by: Actor) -> Source:
        """Make ``label`` the same person as ``into``, both speakers of the source."""
        source = await self.source(kb, name)
        old, target = _label(source, label), _label(source, into)
        if old == target:
            raise InvalidInput(f"{old!r} and {into.strip()!r} are the same speaker already.")
        detail = f"speaker {old!r} merged into {target!r}"
        return await self._relabel(kb, source, {old: target}, by, detail)
