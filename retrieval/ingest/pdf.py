"""PDFs through pypdf: one unit per page, numbered from 1, without the running header and
footer a page repeats ("Northwind Engineering - auth migration plan v1.2", "Internal.
Page 3 of 7"): they name the document rather than say anything on the page, and quoted
they opened an answer on the header instead of the line that answers."""

from __future__ import annotations

import re
from collections import Counter
from io import BytesIO
from pathlib import Path

from pypdf import PdfReader

from retrieval.errors import IngestError
from retrieval.write.chunking import Unit


def read_pdf(data: bytes, path: Path) -> list[Unit]:
    """The text of each page; a PDF with no text at all is an error."""
    try:
        reader = PdfReader(BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise IngestError(str(path), "the PDF is password-protected; save an unlocked copy")
        pages = [page.extract_text() or "" for page in reader.pages]
    except IngestError:
        raise
    except Exception as exc:  # pypdf raises many built-in exception types on damaged files
        raise IngestError(str(path), f"not a readable PDF ({exc})") from exc
    pages = _without_running_lines(pages)
    units = [Unit(" ".join(text.split()), page=n) for n, text in enumerate(pages, 1)]
    units = [u for u in units if u.text]
    if not units:
        raise IngestError(
            str(path), "the PDF has no extractable text (scanned? run OCR on it first)"
        )
    return units


# A line among the first or last ``_EDGE`` lines of at least half the pages (and of
# ``_MIN_PAGES`` or more) runs on every page: a header or footer. Digits are compared as
# one sign, so "Page 3 of 7" repeats as "Page # of #".
_EDGE = 2
_MIN_PAGES = 3
_DIGITS = re.compile(r"\d+")


def _shape(line: str) -> str:
    return _DIGITS.sub("#", " ".join(line.split())).casefold()


def _edges(lines: list[str]) -> list[int]:
    """The indices of a page's first and last ``_EDGE`` lines with text."""
    kept = [i for i, ln in enumerate(lines) if ln.strip()]
    return sorted(set(kept[:_EDGE] + kept[-_EDGE:]))


def _without_running_lines(pages: list[str]) -> list[str]:
    """Each page's text without the lines that head or foot most pages."""
    split = [text.splitlines() for text in pages]
    seen = Counter(shape for lines in split for shape in {_shape(lines[i]) for i in _edges(lines)})
    enough = max(_MIN_PAGES, (sum(1 for lines in split if lines) + 1) // 2)
    running = {shape for shape, n in seen.items() if n >= enough}
    if not running:
        return pages
    out = []
    for lines in split:
        dropped = {i for i in _edges(lines) if _shape(lines[i]) in running}
        out.append("\n".join(ln for i, ln in enumerate(lines) if i not in dropped))
    return out
