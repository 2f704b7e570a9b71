"""``quorum transcript``: a recording's transcript as WebVTT, SRT or timestamped text.

The transcript is the one kept when the recording was ingested (by the file's content),
so exporting costs no second transcription; a file never ingested is transcribed now.
"""

from __future__ import annotations

import asyncio
import sys
import time
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
from retrieval.write.captions import FORMATS, WRITERS
from retrieval.write.transcribe import OnProgress, Transcriber, Transcript


def _transcribe(transcriber: Transcriber, path: Path, heard: OnProgress) -> Transcript:
    from retrieval.ingest.media import decode_audio, file_digest

    return transcriber.transcribe(str(path), file_digest(path), lambda: decode_audio(path), heard)


async def _ingested_file(settings: Settings, source: str, kb: str | None) -> Path:
    """The media file an ingested source was read from, found by id or title."""
    from retrieval.ingest.media import MEDIA_SUFFIXES

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
    src = found[0]
    path = Path(src.path)
    if path.suffix.lower() not in MEDIA_SUFFIXES:
        raise InvalidInput(
            f"{src.title} was read from {path.name}, not audio or video: "
            "only recordings Quorum transcribed have a transcript to export."
        )
    if not await asyncio.to_thread(path.is_file):
        raise InvalidInput(
            f"{src.title} was ingested from {src.path}, which is not there now; "
            "give the recording's path instead."
        )
    return path


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

    async def go(settings: Settings) -> Transcript:
        if writer is None:
            raise InvalidInput(f"--format {fmt!r} is not one of {', '.join(FORMATS)}.")
        path = local or await _ingested_file(settings, source, kb)
        with err.status(escape(f"Reading {path.name}..."), spinner="dots") as status:
            t0 = time.perf_counter()

            def heard(done_s: float, total_s: float) -> None:
                factor = realtime_factor(done_s, time.perf_counter() - t0)
                status.update(
                    escape(f"Transcribing {path.name}: {done_s / 60:.1f}/{total_s / 60:.1f} min")
                    + f", {factor:.1f}x real time"
                )

            return await asyncio.to_thread(
                _transcribe, retrieval_config(settings).transcriber(), path, heard
            )

    transcript = run(go)
    assert writer is not None
    text = writer(transcript)
    if output is None:
        sys.stdout.write(text)
        return
    output.write_text(text, encoding="utf-8")
    out.print(f"Wrote {len(transcript.cues)} cues to {output}.", highlight=False)
