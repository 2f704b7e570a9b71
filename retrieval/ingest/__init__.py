"""Reading source files into documents: finding them, parsing them, cutting them up.

``discover`` lists the files under some paths; ``read_source`` turns one file into a
``Document`` or raises ``IngestError`` naming the file and what is wrong with it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.errors import IngestError, InvalidInput
from retrieval.ingest.course import is_course, read_course
from retrieval.ingest.markdown import read_markdown
from retrieval.ingest.media import MEDIA_SUFFIXES, file_digest, read_media
from retrieval.ingest.metadata import (
    MANIFEST,
    SIDECAR_SUFFIX,
    Metadata,
    from_file_name,
    from_manifests,
    read_sidecar,
    slug,
    split_front_matter,
)
from retrieval.ingest.pdf import read_pdf
from retrieval.ingest.srt import read_srt
from retrieval.ingest.transcript import read_transcript
from retrieval.ingest.vtt import read_vtt
from retrieval.ingest.whisper import read_whisper
from retrieval.links.kept_media import PLAYABLE
from retrieval.models import Document, Kind, Original, Source, check_source_id
from retrieval.write.chunking import ChunkConfig, Unit, chunk, unique_speakers
from retrieval.write.levels import turns
from retrieval.write.transcribe import OnProgress, Transcriber

if TYPE_CHECKING:
    from retrieval.speakers.diarize import Diarizer

__all__ = ["SUPPORTED_SUFFIXES", "ChunkConfig", "discover", "read_source"]

_TEXT_READERS: dict[str, Callable[[str, Path], list[Unit]]] = {
    ".vtt": read_vtt,
    ".srt": read_srt,
    ".json": read_whisper,
    ".txt": read_transcript,
    ".md": read_markdown,
    ".markdown": read_markdown,
}
SUPPORTED_SUFFIXES: frozenset[str] = frozenset({*_TEXT_READERS, ".pdf", *MEDIA_SUFFIXES})
_FRONT_MATTER = {".md", ".markdown", ".txt"}
_DOCUMENTS = {".md", ".markdown", ".pdf"}
# A transcript a person wrote, beside the recording it transcribes (``call.vtt`` next to
# ``call.m4a``): the transcript is the source, the recording its page's media.
_TRANSCRIPTS = (".vtt", ".srt", ".json", ".txt")
_BESIDE = sorted(MEDIA_SUFFIXES, key=lambda s: (s not in PLAYABLE, s))


def _is_metadata_file(name: str) -> bool:
    return name == MANIFEST or name.endswith(SIDECAR_SUFFIX)


def discover(paths: Sequence[Path]) -> list[Path]:
    """The files to ingest under ``paths``, sorted.

    Directories are walked recursively, skipping hidden entries, metadata files and
    unsupported types. Files named explicitly are kept as given, so that
    ``read_source`` can say what is wrong with them.
    """
    found: set[Path] = set()
    for path in paths:
        if not path.is_dir():
            found.add(path)
            continue
        for folder, dirs, files in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            found.update(
                Path(folder, name)
                for name in files
                if not name.startswith(".")
                and not _is_metadata_file(name)
                and Path(name).suffix.lower() in SUPPORTED_SUFFIXES
            )
    # A recording whose transcript is ingested too is that transcript's media, not a
    # second source of the same id (and is never transcribed again).
    return sorted(p for p in found if not transcribed_beside(p, found))


def transcribed_beside(path: Path, found: set[Path]) -> bool:
    """True when ``path`` is a recording whose transcript is among ``found``."""
    return path.suffix.lower() in MEDIA_SUFFIXES and any(
        path.with_suffix(s) in found for s in _TRANSCRIPTS
    )


def recording_beside(path: Path) -> Path | None:
    """The recording of the same name beside a transcript (playable containers first)."""
    if path.suffix.lower() not in _TRANSCRIPTS:
        return None
    for suffix in _BESIDE:
        p = path.with_suffix(suffix)
        # A plain file only: a link beside a transcript could name any file (the session
        # database, the link secret), and this one is never parsed, only kept and served.
        if not p.is_symlink() and p.is_file():
            return p
    return None


def _decode(data: bytes, path: Path) -> str:
    try:
        text = data.decode("utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig")
    except UnicodeDecodeError as exc:
        raise IngestError(str(path), "not UTF-8 text; re-save it as UTF-8") from exc
    if "\x00" in text:
        raise IngestError(str(path), "looks like a binary file, not text")
    return text


def read_source(
    path: Path,
    *,
    root: Path | None = None,
    chunking: ChunkConfig | None = None,
    transcriber: Transcriber | None = None,
    on_progress: OnProgress | None = None,
    diarizer: Diarizer | None = None,
    speakers: int | None = None,
    on_diarize: OnProgress | None = None,
    origin: str | None = None,
    default_id: str | None = None,
) -> Document:
    """Parse one file into a ``Document``; ``root`` bounds the search for manifests. Audio
    and video are transcribed with ``transcriber`` (``on_progress`` hears how far) and,
    with a ``diarizer``, given speakers (``speakers``: how many, else the metadata's
    ``speakers`` count, else found; ``on_diarize`` hears how far). ``origin``: where the
    file really came from when ``path`` is a download of it (``s3://bucket/key``), kept as
    the source's path; ``default_id``: its source id unless the metadata names one (else
    the file's stem, slugged)."""
    name = str(path)
    data = _load(path, transcriber)
    sidecar, sidecar_bytes = read_sidecar(path)
    voices: tuple[tuple[str, tuple[float, ...]], ...] = ()
    if path.suffix.lower() in MEDIA_SUFFIXES:
        assert transcriber is not None  # _load refused media without one
        if speakers is None:
            speakers = sidecar.over(from_manifests(path, root)).speaker_count
        heard = read_media(
            path,
            data.decode(),
            transcriber,
            on_progress,
            diarizer=diarizer,
            speakers=speakers,
            on_diarize=on_diarize,
        )
        units, kind, in_file, voices = heard.units, heard.kind, Metadata(), heard.voices
    else:
        units, kind, in_file = _parse(path, data)
    if not any(u.text.strip() for u in units):
        raise IngestError(name, "no text found in the file")

    meta = (
        sidecar.over(in_file)
        .over(from_manifests(path, root))
        .over(from_file_name(path))
        .over(Metadata(kind=kind))
    )
    source_id = (
        meta.id
        or default_id
        or slug(path.stem)[:200].strip("-")  # a long file name still names its source
        or "source-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    )
    try:
        check_source_id(source_id)
    except InvalidInput as exc:
        raise IngestError(name, str(exc)) from None
    original = _original(path, data, meta.kind or kind)
    if original is not None and original.path != path:  # a recording beside its transcript
        data += original.digest.encode()  # a new recording re-ingests the transcript
    segments = chunk(units, source_id, chunking)
    source = Source(
        id=source_id,
        title=meta.title or path.name,
        kind=meta.kind or kind,
        url=meta.url,
        recorded_at=meta.recorded_at,
        speakers=meta.speakers if meta.speakers is not None else unique_speakers(segments),
        path=origin or name,
        # The sidecar is hashed too, so editing only the sidecar re-ingests the file.
        content_hash=hashlib.sha256(data + sidecar_bytes).hexdigest(),
        description=meta.description,
    )
    return Document(
        source=source,
        segments=tuple(segments),
        levels=tuple(turns(units, source_id)),
        original=original,
        voices=voices,
    )


def _original(path: Path, data: bytes, kind: Kind) -> Original | None:
    """The file the source's page serves, with the digest of the bytes read: the
    recording itself or beside its transcript, or a document's own file."""
    suffix = path.suffix.lower()
    if suffix in MEDIA_SUFFIXES:
        return Original(path, data.decode())  # its bytes' digest stands for it
    if beside := recording_beside(path):
        return Original(beside, file_digest(beside))
    if kind in ("document", "course") and suffix in (*_DOCUMENTS, ".txt"):
        return Original(path, hashlib.sha256(data).hexdigest())
    return None


def _load(path: Path, transcriber: Transcriber | None) -> bytes:
    """The bytes that stand for a file (a recording's digest, any other file's content),
    once it is known to be a file Quorum can ingest; IngestError says why not."""
    name, suffix = str(path), path.suffix.lower()
    if _is_metadata_file(path.name):
        raise IngestError(name, "this is a metadata file; ingest the file it describes")
    if suffix not in SUPPORTED_SUFFIXES:
        supported = ", ".join(sorted(SUPPORTED_SUFFIXES))
        raise IngestError(name, f"unsupported file type {suffix or '(none)'}; use {supported}")
    if suffix in MEDIA_SUFFIXES:
        if transcriber is None:
            raise IngestError(name, "audio and video need a transcriber to be ingested")
        # Media is hashed in blocks, never read whole: its digest stands for its bytes
        # (in the source's content hash) and keys its kept transcript.
        return file_digest(path).encode()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise IngestError(name, f"cannot read the file: {exc.strerror or exc}") from exc
    if not data.strip():
        raise IngestError(name, "the file is empty")
    return data


def _parse(path: Path, data: bytes) -> tuple[list[Unit], Kind, Metadata]:
    """A text or PDF file's units in its format's reader, its kind, and the metadata
    written inside it (front matter, a course's header)."""
    suffix = path.suffix.lower()
    kind: Kind = "document" if suffix in _DOCUMENTS else "video"
    if suffix == ".pdf":
        return read_pdf(data, path), kind, Metadata()
    in_file, text = Metadata(), _decode(data, path)
    if suffix in _FRONT_MATTER:
        in_file, text = split_front_matter(text, path)
    if suffix == ".txt" and is_course(text):
        course = read_course(text, path)
        speakers = (course.instructor,) if course.instructor else None
        header = Metadata(title=course.title, url=course.url, speakers=speakers)
        return course.units, "course", in_file.over(header)
    return _TEXT_READERS[suffix](text, path), kind, in_file
