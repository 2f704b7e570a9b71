"""``quorum speakers``: a source's speakers with talk time and excerpts linked at their
second; ``rename`` and ``merge`` them everywhere the source is stored (``bot.speakers``)."""

from __future__ import annotations

import getpass
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import typer
from rich.table import Table

from adapters.cli.app import JsonOpt, KbOpt, app, fail, kb_name, out, run
from adapters.cli.terminal import plain
from bot.config import Settings
from bot.models import Actor, Listing
from bot.speakers import Speakers
from bot.voices import Voices
from bot.wiring import (
    holdings_of,
    open_retrieval,
    open_session_store,
    retrieval_config,
    speakers_of,
    writer_of,
)
from bot.write import Writer
from retrieval.models import Source
from retrieval.write.captions import clock

USAGE = (
    "Use `quorum speakers SOURCE`, `quorum speakers rename SOURCE LABEL NAME`, "
    "`quorum speakers merge SOURCE LABEL INTO` or `quorum speakers forget NAME`."
)
T = TypeVar("T")


def _actor() -> Actor:
    try:
        return Actor("cli", getpass.getuser())
    except (KeyError, OSError):
        return Actor("cli")


async def _with_speakers(settings: Settings, work: Callable[[Speakers], Awaitable[T]]) -> T:
    async with (
        open_retrieval(settings, one_shot=True) as retrieval,
        open_session_store(settings) as sessions,
    ):
        holdings = holdings_of(settings, retrieval, sessions)
        writer = writer_of(settings, retrieval, holdings)
        return await work(speakers_of(retrieval, writer))


async def suggested(settings: Settings, writer: Writer, kb: str, source_ids: set[str]) -> list[str]:
    """For ``quorum ingest``: the remembered voices each written source's unnamed speakers
    sound like, one line each (none while ``QUORUM_VOICES`` is off)."""
    if not settings.voices or not source_ids:
        return []
    voices = Voices(retrieval_config(settings).voiceprints())
    speakers = Speakers(writer=writer, search=writer.search, voices=voices)
    lines: list[str] = []
    for info in await writer.store.list_sources(kb):
        if info.source.id in source_ids:
            for heard in await speakers.suggest(kb, info.source):
                lines.append(
                    f"{info.source.id}: {heard} (`quorum speakers rename {info.source.id} "
                    f'"{heard.label}" "{heard.name}"` to accept)'
                )
    return lines


def listing_json(listing: Listing) -> dict[str, object]:
    """A listing as JSON: the source, and each speaker with talk time and excerpts."""
    return {
        "source_id": listing.source.id,
        "title": listing.source.title,
        "speakers": [
            {
                "name": s.name,
                "talk_s": round(s.talk_s, 1),
                "words": s.words,
                "excerpts": [
                    {"text": e.text, "start_s": e.start_s, "link": e.link} for e in s.excerpts
                ],
            }
            for s in listing.speakers
        ],
        "suggestions": listing.suggestions,
    }


def _show(listing: Listing) -> None:
    if not listing.speakers:
        out.print(plain(f"{listing.source.title} has no speakers."))
        return
    table = Table(title=plain(listing.source.title))
    for col in ("speaker", "talk", "excerpts"):
        table.add_column(col)
    for s in listing.speakers:
        lines = [
            plain(f"({clock(e.start_s)[:8]}) {e.text}" if e.start_s is not None else e.text, e.link)
            for e in s.excerpts
        ]
        talk = clock(s.talk_s)[:8] if s.talk_s else f"{s.words} words"
        excerpts = plain("\n").join(lines) if lines else plain("")
        table.add_row(plain(s.name), talk, excerpts)
    out.print(table)
    for line in listing.suggestions:
        out.print(plain(line))


@app.command("speakers")
def speakers_cmd(
    words: Annotated[
        list[str],
        typer.Argument(
            help='SOURCE; or rename SOURCE "Speaker 2" "Amara Osei"; or merge SOURCE '
            '"Speaker 3" "Speaker 1".',
            show_default=False,
        ),
    ],
    kb: KbOpt = None,
    as_json: JsonOpt = False,
    admin_link: Annotated[
        bool,
        typer.Option(
            "--admin-link",
            help="Also print the recording's page link (valid a day) whose holder may "
            "rename its speakers there.",
        ),
    ] = False,
) -> None:
    """A recording's speakers with talk time and excerpts; rename or merge them (the
    passages, filters, pages and summary follow, without transcribing again)."""
    action = words[0] if words else ""
    if action == "forget":
        if len(words) != 2:
            raise fail(f"forget takes one name. {USAGE}")

        async def forget(settings: Settings) -> list[str]:
            where = kb_name(settings, kb)
            return await _with_speakers(settings, lambda sp: sp.forget(where, words[1], _actor()))

        gone = run(forget)
        out.print(plain(f"Forgot the voice of {words[1].strip()!r} ({len(gone)} recording(s))."))
        return
    if action in ("rename", "merge"):
        if len(words) != 4:
            raise fail(f"{action} takes a source and two names. {USAGE}")
        _, source, label, name = words

        async def change(settings: Settings) -> Source:
            by, where = _actor(), kb_name(settings, kb)

            async def work(sp: Speakers) -> Source:
                if action == "rename":
                    return await sp.rename(where, source, label, name, by)
                return await sp.merge(where, source, label, name, by)

            return await _with_speakers(settings, work)

        done = run(change)
        verb = "is now" if action == "rename" else "merged into"
        out.print(plain(f"{done.title}: {label.strip()!r} {verb} {name.strip()!r}."))
        out.print(plain(f"Its speakers: {', '.join(done.speakers)}."))
        return
    if len(words) != 1:
        raise fail(USAGE)

    async def show(settings: Settings) -> tuple[Listing, str | None]:
        where = kb_name(settings, kb)

        async def work(sp: Speakers) -> tuple[Listing, str | None]:
            listing = await sp.listing(where, words[0])
            signer = sp.search.signer
            if not admin_link:
                return listing, None
            if signer is None:
                raise fail("Pages are off (QUORUM_PUBLIC_URL is empty): there is no page to link.")
            return listing, signer.admin_page(where, listing.source.id)

        return await _with_speakers(settings, work)

    listing, link = run(show)
    if as_json:
        shown = listing_json(listing) | ({"admin_link": link} if link else {})
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
        return
    _show(listing)
    if link:
        out.print(plain("Rename its speakers on its page (admins only; valid a day): "))
        out.print(plain(link, link), soft_wrap=True)
