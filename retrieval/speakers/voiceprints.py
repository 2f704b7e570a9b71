"""Voiceprints: each recording's speakers as vectors (label -> the centroid of that
speaker's CAM++ embeddings, float32), kept under the data dir only when
``QUORUM_VOICES=on``.

A voiceprint is biometric data: it can recognise a person in another recording. So it is
off by default, kept per knowledge base and source (``voiceprints/<kb>/<source id>.npz``),
and removed when its source is forgotten (``bot.holdings`` calls ``drop`` through a
``ForgetHook``). Files are written whole (temporary file, then renamed) and read without
pickle.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt

from retrieval.models import check_kb, check_source_id

VOICEPRINTS = "voiceprints"  # the folder under the data dir
SUFFIX = ".npz"
Vector = npt.NDArray[np.float32]


class Voiceprints:
    """Per-source speaker centroids under ``root`` (``data_dir/voiceprints``); ``enabled``
    (``QUORUM_VOICES=on``) decides whether ``save`` keeps anything. Reading, listing and
    dropping work either way, so turning the setting off never strands a file."""

    def __init__(self, root: Path, enabled: bool = False) -> None:
        self.root = root
        self.enabled = enabled

    def _file(self, kb: str, source_id: str) -> Path:
        return self.root / check_kb(kb) / (check_source_id(source_id) + SUFFIX)

    def save(self, kb: str, source_id: str, centroids: Mapping[str, npt.ArrayLike]) -> Path | None:
        """Keep ``centroids`` (label -> vector) for a source, replacing what it had; None
        (nothing written, and an older file dropped) when voices are off or there are none."""
        if not self.enabled or not centroids:
            self.drop(kb, source_id)
            return None
        file = self._file(kb, source_id)
        labels = np.array(list(centroids), dtype=np.str_)
        vectors = np.stack([np.asarray(v, dtype=np.float32).ravel() for v in centroids.values()])
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("wb") as f:
                np.savez(f, labels=labels, vectors=vectors)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, file)
        finally:
            tmp.unlink(missing_ok=True)
        return file

    def load(self, kb: str, source_id: str) -> dict[str, Vector]:
        """A source's speakers and their vectors; empty when none are kept."""
        file = self._file(kb, source_id)
        try:
            with np.load(file, allow_pickle=False) as data:
                labels = [str(x) for x in data["labels"]]
                vectors = data["vectors"].astype(np.float32)
        except (FileNotFoundError, NotADirectoryError):
            return {}
        except (OSError, ValueError, KeyError):  # a damaged file holds nothing usable
            return {}
        return {label: vectors[i] for i, label in enumerate(labels)}

    def sources(self, kb: str) -> list[str]:
        """The ids of ``kb``'s sources with voiceprints kept, sorted."""
        folder = self.root / check_kb(kb)
        if not folder.is_dir():
            return []
        return sorted(
            f.name.removesuffix(SUFFIX)
            for f in folder.iterdir()
            if f.name.endswith(SUFFIX) and not f.name.startswith(".") and f.is_file()
        )

    def drop(self, kb: str, source_id: str) -> list[str]:
        """Delete a source's voiceprints (a forgotten source, a renamed speaker saved
        again); the files that went."""
        file = self._file(kb, source_id)
        try:
            file.unlink()
        except FileNotFoundError:
            return []
        return [str(file)]
