"""A source's metadata, from the most specific place that gives each field.

Highest first: a sidecar ``NAME.meta.json`` next to the file; YAML front matter at the top
of a ``.md``/``.txt`` file (or a course file's header); ``quorum.yaml`` manifests in the
file's folder and its parents up to the ingest root (nearer wins), mapping relative paths
to metadata; then defaults from the file name (``2024-01-23-auth-deep-dive`` gives
``recorded_at`` 2024-01-23 and the title "Auth deep dive"). Each field falls through on
its own: a sidecar with only ``url`` keeps the title from the front matter.
"""

from __future__ import annotations

import json
import re
import reprlib
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any

import yaml

from retrieval.errors import IngestError, InvalidInput
from retrieval.models import KINDS, Kind, check_source_id

MANIFEST = "quorum.yaml"
SIDECAR_SUFFIX = ".meta.json"
_ALIASES = {"date": "recorded_at"}  # the usual front-matter spelling
_DATED = re.compile(r"(\d{4}-\d{2}-\d{2})(?:[-_ ]+(.*))?")
# Metadata is a handful of short fields: anything bigger is a mistake or an attack, and
# a message echoing it must stay one readable line.
MAX_METADATA_BYTES = 64 * 1024
MAX_MANIFEST_BYTES = 4 * 1024 * 1024  # a manifest lists many files
_SHORT = reprlib.Repr()
_SHORT.maxstring = _SHORT.maxother = 60
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxdict = 4
_SHORT.maxlevel = 2


def shown(value: object) -> str:
    """A bounded repr of a value from a file, for an error message."""
    return _SHORT.repr(value)


class _MetadataLoader(yaml.SafeLoader):
    """YAML without aliases: metadata never needs them, and ``&a [*b, *b, ...]`` chains
    (an alias bomb) turn a few hundred bytes into millions of values."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.composer.ComposerError(
                None, None, "YAML aliases (*name) are not allowed in metadata", event.start_mark
            )
        return super().compose_node(parent, index)


def load_yaml(text: str, origin: str, what: str, limit: int = MAX_METADATA_BYTES) -> Any:
    """Parse a metadata YAML block, bounded in size and without aliases."""
    if len(text) > limit:
        raise IngestError(origin, f"the {what} is larger than {limit // 1024} KiB")
    try:
        return yaml.load(text, Loader=_MetadataLoader)  # a SafeLoader
    except yaml.YAMLError as exc:
        raise IngestError(origin, f"invalid YAML in the {what} ({_first_lines(exc)})") from exc
    except RecursionError as exc:
        raise IngestError(origin, f"the {what} is nested too deeply") from exc


def _first_lines(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]


@dataclass(frozen=True)
class Metadata:
    """Metadata fields for one source; None where this layer says nothing."""

    id: str | None = None
    title: str | None = None
    url: str | None = None
    recorded_at: date | None = None
    kind: Kind | None = None
    speakers: tuple[str, ...] | None = None
    description: str | None = None
    # ``speakers: 3`` (a number, not names): how many people speak in a recording, for
    # finding who said what (``retrieval.speakers``).
    speaker_count: int | None = None

    def over(self, lower: Metadata) -> Metadata:
        """These fields, with the gaps filled from ``lower``."""
        given = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(lower, **{k: v for k, v in given.items() if v is not None})


def _date(value: object, origin: str) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.strip()).date()
        except ValueError:
            pass
    raise IngestError(origin, f"recorded_at {shown(value)} is not an ISO date like 2024-01-23")


def _text(key: str, value: object, origin: str) -> str:
    # YAML reads `title: 2024` as a number; a number is still a fine title.
    if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value).strip():
        return str(value).strip()
    raise IngestError(origin, f"{key} must be a non-empty string, not {shown(value)}")


def parse(raw: object, origin: str) -> Metadata:
    """Check a metadata mapping and convert its values; unknown keys are ignored."""
    if not isinstance(raw, Mapping):
        raise IngestError(origin, "metadata must be a mapping of field names to values")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        key = _ALIASES.get(str(key), str(key))
        if value is None or key == "speaker_count" or key not in {f.name for f in fields(Metadata)}:
            continue
        if key == "recorded_at":
            values[key] = _date(value, origin)
        elif key == "kind":
            if value not in KINDS:
                kinds = ", ".join(KINDS)
                raise IngestError(origin, f"unknown kind {shown(value)}; use one of {kinds}")
            values[key] = value
        elif key == "speakers" and isinstance(value, int) and not isinstance(value, bool):
            values["speaker_count"] = check_speaker_count(value, origin)
        elif key == "speakers":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list):
                raise IngestError(
                    origin, "speakers must be a list of names, or how many people speak (1-20)"
                )
            values[key] = tuple(_text("speakers", name, origin) for name in names)
        elif key == "id":
            try:
                values[key] = check_source_id(_text(key, value, origin))
            except InvalidInput as exc:
                raise IngestError(origin, str(exc)) from None
        else:
            values[key] = _text(key, value, origin)
    return replace(Metadata(), **values)


MAX_SPEAKERS = 20


def check_speaker_count(value: int, origin: str) -> int:
    """A recording's speaker count as a person gave it: 1 to ``MAX_SPEAKERS``."""
    if not 1 <= value <= MAX_SPEAKERS:
        raise IngestError(
            origin, f"speakers must be between 1 and {MAX_SPEAKERS}, not {shown(value)}"
        )
    return value


def sidecar_path(path: Path) -> Path:
    """``talk.srt`` -> ``talk.meta.json`` in the same folder."""
    return path.with_name(path.stem + SIDECAR_SUFFIX)


def read_sidecar(path: Path) -> tuple[Metadata, bytes]:
    """The sidecar's metadata and bytes, or empty ones when there is no sidecar."""
    sidecar = sidecar_path(path)
    try:
        data = sidecar.read_bytes()
    except FileNotFoundError:
        return Metadata(), b""
    except OSError as exc:
        raise IngestError(str(sidecar), f"cannot read the sidecar: {exc.strerror or exc}") from exc
    if len(data) > MAX_METADATA_BYTES:
        raise IngestError(
            str(sidecar), f"the sidecar is larger than {MAX_METADATA_BYTES // 1024} KiB"
        )
    try:
        raw = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IngestError(str(sidecar), f"the sidecar is not valid JSON ({exc})") from exc
    except RecursionError as exc:
        raise IngestError(str(sidecar), "the sidecar's JSON is nested too deeply") from exc
    return parse(raw, str(sidecar)), data


def split_front_matter(text: str, path: Path) -> tuple[Metadata, str]:
    """A leading ``---`` YAML block's metadata, and the text without it."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return Metadata(), text
    close = next((n for n, line in enumerate(lines[1:], 1) if line.strip() in ("---", "...")), None)
    if close is None:  # an opening rule with no closing one is not front matter
        return Metadata(), text
    raw = load_yaml("".join(lines[1:close]), str(path), "front matter")
    meta = Metadata() if raw is None else parse(raw, str(path))
    return meta, "".join(lines[close + 1 :])


def _manifest_entry(manifest: Path, key: str) -> Metadata:
    try:
        text = manifest.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise IngestError(str(manifest), f"cannot read the manifest ({exc})") from exc
    raw = load_yaml(text, str(manifest), "manifest", MAX_MANIFEST_BYTES)
    if raw is None:
        return Metadata()
    if not isinstance(raw, Mapping):
        raise IngestError(str(manifest), "a manifest maps relative file paths to metadata")
    entries = {str(k).removeprefix("./"): v for k, v in raw.items()}
    return parse(entries[key], str(manifest)) if key in entries else Metadata()


def from_manifests(path: Path, root: Path | None) -> Metadata:
    """The file's entries in ``quorum.yaml`` manifests from ``root`` down to its folder."""
    folder = path.absolute().parent
    top = root.absolute() if root is not None else folder
    chain = [folder, *folder.parents]
    # Without a root above the file, only the file's own folder is searched.
    chain = chain[: chain.index(top) + 1] if top in chain else [folder]
    meta = Metadata()
    for directory in chain:  # nearest first, so it is the higher layer
        manifest = directory / MANIFEST
        if manifest.is_file():
            key = path.absolute().relative_to(directory).as_posix()
            meta = meta.over(_manifest_entry(manifest, key))
    return meta


def from_file_name(path: Path) -> Metadata:
    """Defaults from the name: ``2024-01-23-auth-deep-dive`` -> 2024-01-23, "Auth deep dive"."""
    stem, recorded = path.stem, None
    if match := _DATED.fullmatch(stem):
        try:
            recorded = date.fromisoformat(match[1])
            stem = match[2] or match[1]
        except ValueError:  # 2024-13-45 is not a date; leave it in the title
            pass
    words = " ".join(re.sub(r"[-_]+", " ", stem).split()) or path.name
    return Metadata(title=words[:1].upper() + words[1:], recorded_at=recorded)


def slug(text: str) -> str:
    """``"2024-01-23 Auth Deep-Dive"`` -> ``"2024-01-23-auth-deep-dive"``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")
