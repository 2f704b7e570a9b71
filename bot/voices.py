"""Remembered voices (only with ``QUORUM_VOICES=on``): a speaker named in one recording is
recognised in the next, as a suggestion ("Speaker 2 sounds like Amara Osei, 0.86"),
never applied without someone saying so.

A remembered voice holds no vector of its own: it is a name and the (source, label) pairs
it was named in, kept per knowledge base in ``voiceprints/<kb>/named.json``; its vector is
the mean of those sources' kept centroids (``retrieval.speakers.voiceprints``), read when compared.
So forgetting a source (its voiceprint file goes through ``Holdings``' hook) leaves
nothing of it in any remembered voice, and a name whose every source is forgotten is
dropped from the file too (``forget_source``). ``forget`` removes a name and its vectors
in every source of the knowledge base.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval.models import Source, check_kb
from retrieval.speakers.voiceprints import Vector, Voiceprints

NAMED = "named.json"
MATCH = 0.65  # CAM++ cosine: the same voice is well above, different voices well below
_UNNAMED = re.compile(r"Speaker \d+")


@dataclass(frozen=True)
class Suggestion:
    """An unnamed speaker of a source that sounds like a remembered voice."""

    label: str
    name: str
    score: float

    def __str__(self) -> str:
        return f"{self.label} sounds like {self.name}, {self.score:.2f}"


def unnamed(label: str) -> bool:
    """True for a label diarization gave ("Speaker 2"), not a person's name."""
    return bool(_UNNAMED.fullmatch(label))


def _unit(vectors: list[Vector]) -> Vector:
    total = np.sum(np.stack([v / (np.linalg.norm(v) or 1.0) for v in vectors]), axis=0)
    unit: Vector = (total / (np.linalg.norm(total) or 1.0)).astype(np.float32)
    return unit


class Voices:
    """The remembered voices of every knowledge base, over the kept voiceprints."""

    def __init__(self, prints: Voiceprints) -> None:
        self.prints = prints

    @property
    def enabled(self) -> bool:
        """``QUORUM_VOICES=on``."""
        return self.prints.enabled

    def _file(self, kb: str) -> Path:
        return self.prints.root / check_kb(kb) / NAMED

    def named(self, kb: str) -> dict[str, list[tuple[str, str]]]:
        """Each remembered name and the (source id, label) pairs it was named in."""
        try:
            raw = json.loads(self._file(kb).read_text())
        except (FileNotFoundError, NotADirectoryError, ValueError):
            return {}
        if not isinstance(raw, dict):
            return {}
        return {
            str(name): [(str(s), str(label)) for s, label in pairs]
            for name, pairs in raw.items()
            if isinstance(pairs, list) and all(isinstance(p, list) and len(p) == 2 for p in pairs)
        }

    def _write(self, kb: str, named: Mapping[str, list[tuple[str, str]]]) -> None:
        file = self._file(kb)
        kept = {name: [list(p) for p in pairs] for name, pairs in named.items() if pairs}
        if not kept:
            file.unlink(missing_ok=True)
            return
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
        try:
            tmp.write_text(json.dumps(kept, ensure_ascii=False))
            os.replace(tmp, file)
        finally:
            tmp.unlink(missing_ok=True)

    def relabel(self, kb: str, source_id: str, mapping: Mapping[str, str]) -> None:
        """A source's kept centroids follow a rename or merge (two labels onto one name:
        the mean of both); a name it gains is remembered. Nothing while voices are off."""
        if not self.enabled:
            return
        kept = self.prints.load(kb, source_id)
        if not kept:
            return
        grouped: dict[str, list[Vector]] = {}
        for label, vector in kept.items():
            grouped.setdefault(mapping.get(label, label), []).append(vector)
        self.prints.save(kb, source_id, {k: _unit(v) for k, v in grouped.items()})
        named = self.named(kb)
        for old, new in mapping.items():
            for pairs in named.values():  # the source's old label, remembered before
                pairs[:] = [(s, new if s == source_id and lb == old else lb) for s, lb in pairs]
            if not unnamed(new) and new in grouped and (source_id, new) not in named.get(new, []):
                named.setdefault(new, []).append((source_id, new))
        self._write(kb, named)

    def _vector(self, kb: str, pairs: list[tuple[str, str]], but: str) -> Vector | None:
        found = [
            v
            for s, label in pairs
            if s != but
            for lb, v in self.prints.load(kb, s).items()
            if lb == label
        ]
        return _unit(found) if found else None

    def suggest(self, kb: str, source: Source) -> list[Suggestion]:
        """For each unnamed speaker of ``source``, the remembered voice it sounds most
        like (cosine at least ``MATCH``), best first."""
        if not self.enabled:
            return []
        kept = self.prints.load(kb, source.id)
        named = self.named(kb)
        voices = {n: self._vector(kb, pairs, but=source.id) for n, pairs in named.items()}
        out: list[Suggestion] = []
        for label, vector in kept.items():
            if not unnamed(label) or label not in source.speakers:
                continue
            mine = _unit([vector])
            scored = [
                (float(np.dot(mine, v)), n)
                for n, v in voices.items()
                if v is not None and v.shape == mine.shape and n not in source.speakers
            ]
            if scored and (best := max(scored))[0] >= MATCH:
                out.append(Suggestion(label, best[1], round(best[0], 2)))
        return sorted(out, key=lambda s: -s.score)

    def forget(self, kb: str, name: str) -> list[str]:
        """A remembered voice removed everywhere: the name, and its vectors in every
        source of ``kb``; the sources whose voiceprints changed."""
        named = self.named(kb)
        wanted = " ".join(name.split()).casefold()
        names = [n for n in named if n.casefold() == wanted]
        named = {n: p for n, p in named.items() if n not in names}
        self._write(kb, named)
        changed: list[str] = []
        for sid in self.prints.sources(kb):
            kept = self.prints.load(kb, sid)
            rest = {lb: v for lb, v in kept.items() if lb.casefold() != wanted}
            if len(rest) != len(kept):
                if rest and self.enabled:
                    self.prints.save(kb, sid, rest)
                else:
                    self.prints.drop(kb, sid)
                changed.append(sid)
        return changed if names or changed else []

    def forget_source(self, kb: str, source_id: str) -> None:
        """A forgotten source's pairs out of every remembered voice; a voice left with
        none goes."""
        named = self.named(kb)
        if not named:
            return
        pruned = {n: [p for p in pairs if p[0] != source_id] for n, pairs in named.items()}
        if pruned != named:
            self._write(kb, pruned)


def forget_named(voices: Voices) -> Callable[[str, Source], Awaitable[None]]:
    """The ``ForgetHook`` that takes a forgotten source out of the remembered voices."""

    async def hook(kb: str, source: Source) -> None:
        await asyncio.to_thread(voices.forget_source, kb, source.id)

    return hook
