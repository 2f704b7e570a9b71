"""PDFs through pypdf: one unit per page, numbered from 1."""

from __future__ import annotations

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
    units = [Unit(" ".join(text.split()), page=n) for n, text in enumerate(pages, 1)]
    units = [u for u in units if u.text]
    if not units:
        raise IngestError(
            str(path), "the PDF has no extractable text (scanned? run OCR on it first)"
        )
    return units
