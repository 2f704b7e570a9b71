"""``quorum transcript``: a recording's transcript as WebVTT, SRT or timestamped text.

An ingested recording (named by id or title) is exported from what the knowledge base
holds, each cue with its speaker's current name (a renamed speaker is named so: VTT voice
tags, SRT ``Name:``); a media file is exported from the transcript kept when it was
ingested (by the file's content), so exporting costs no second transcription; a file
never ingested is transcribed now.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from adapters.cli.app import KbOpt, app, err, kb_name, out, run
from adapters.cli.ingest_progress import realtime_factor
from bot.config import Settings
from bot.wiring import open_retrieval, retrieval_config
from retrieval.errors import InvalidInput
from retrieval.search.names import title_matches
from retrieval.write.captions import FORMATS, WRITERS, Said
from retrieval.write.relabel import Cue, cues, read_all
from retrieval.write.transcribe import OnProgress, Transcriber, Transcript


def _transcribe(transcriber: Transcriber, path: Path, heard: OnProgress) -> Transcript:
    from retrieval.ingest.media import decode_audio, file_digest

    return transcriber.transcribe(str(path), file_digest(path), lambda: decode_audio(path), heard)


async def _stored_cues(settings: Settings, source: str, kb: str | None) -> list[Cue]:
    """An ingested recording's cues as the knowledge base holds them, with its speakers'
    names, found by id or title."""
    name = kb_name(settings, kb)
    async with open_retrieval(settings, one_shot=True) as r:
        infos = await r.store.list_sources(name)
        exact = [i.source for i in infos if i.source.id == source]
        found = exact or [i.source for i in infos if title_matches(source, i.source)]
        if not found:
            raise InvalidInput(
                f"No file or source {source!r} in knowledge base {name!r} (see `quorum sources`)."
            )
        if len(found) > 1:
            ids = ", ".join(s.id for s in found[:5])
            raise InvalidInput(f"{source!r} matches several sources ({ids}); give one id.")
        stored = await read_all(r.store, name, found[0])
    said = cues(stored.windows)
    if not said:
        raise InvalidInput(
            f"{found[0].title} has no timed transcript to export (it is a document)."
        )
    return said


@app.command("transcript")
def transcript_cmd(
    source: Annotated[
        str, typer.Argument(help="An audio or video file, or an ingested recording's id or title.")
    ],
    kb: KbOpt = None,
    fmt: Annotated[str, typer.Option("--format", help="vtt, srt or txt.")] = "vtt",
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file, not stdout.")
    ] = None,
) -> None:
    """Export a recording's transcript as WebVTT, SRT or timestamped text."""
    # Here, not at the top: the media readers cost every other command (a one-shot
    # `quorum search`) half a second on two cores.
    from retrieval.ingest.media import MEDIA_SUFFIXES

    writer = WRITERS.get(fmt.lower())  # type: ignore[call-overload]

    given = Path(source)
    local = given if given.suffix.lower() in MEDIA_SUFFIXES and given.is_file() else None

    async def go(settings: Settings) -> Sequence[Said]:
        if writer is None:
            raise InvalidInput(f"--format {fmt!r} is not one of {', '.join(FORMATS)}.")
        if local is None:
            return await _stored_cues(settings, source, kb)
        path = local
        with err.status(escape(f"Reading {path.name}..."), spinner="dots") as status:
            t0 = time.perf_counter()

            def heard(done_s: float, total_s: float) -> None:
                factor = realtime_factor(done_s, time.perf_counter() - t0)
                status.update(
                    escape(f"Transcribing {path.name}: {done_s / 60:.1f}/{total_s / 60:.1f} min")
                    + f", {factor:.1f}x real time"
                )

            transcript = await asyncio.to_thread(
                _transcribe, retrieval_config(settings).transcriber(), path, heard
            )
            return transcript.cues

    said = run(go)
    assert writer is not None
    text = writer(said)
    if output is None:
        sys.stdout.write(text)
        return
    output.write_text(text, encoding="utf-8")
    out.print(f"Wrote {len(said)} cues to {output}.", highlight=False)
