"""A download's own folder under a connector's scratch folder, and the sweep of the folders
a killed worker left behind: written once for every connector that downloads in its job."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from pathlib import Path

STALE_S = 24 * 3600.0  # a download folder this old was left by a worker that died


def sweep(under: Path) -> None:
    """Download folders a dead worker left behind (older than a day), deleted."""
    with contextlib.suppress(OSError):
        for folder in under.iterdir():
            with contextlib.suppress(OSError):
                if folder.is_dir() and time.time() - folder.stat().st_mtime > STALE_S:
                    shutil.rmtree(folder, ignore_errors=True)


def scratch_folder(under: Path, prefix: str = "") -> Path:
    """A fresh folder under ``under`` for one download, stale ones swept first."""
    under.mkdir(parents=True, exist_ok=True)
    sweep(under)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=under))
