"""Markdown: one unit per paragraph, each with its heading path (``"On-call > Paging"``)."""

from __future__ import annotations

import re
from pathlib import Path

from retrieval.write.chunking import Unit

_HEADING = re.compile(r"(#{1,6})\s+(.*?)(?:\s+#+)?\s*")
_FENCE = re.compile(r"\s*(`{3,}|~{3,})")


def read_markdown(text: str, path: Path) -> list[Unit]:
    """The paragraphs of a Markdown file; fenced code blocks stay whole."""
    units: list[Unit] = []
    headings: list[tuple[int, str]] = []
    paragraph: list[str] = []
    fence: str | None = None

    def flush() -> None:
        if paragraph:
            heading = " > ".join(title for _, title in headings) or None
            units.append(Unit("\n".join(paragraph).strip(), heading=heading))
            paragraph.clear()

    for line in text.splitlines():
        if fence is not None:  # inside code, '#' and blank lines are content
            paragraph.append(line)
            if line.strip().startswith(fence):
                fence = None
        elif opening := _FENCE.match(line):
            fence = opening[1]
            paragraph.append(line)
        elif heading := _HEADING.fullmatch(line):
            flush()
            level = len(heading[1])
            headings = [(lv, t) for lv, t in headings if lv < level] + [(level, heading[2])]
        elif not line.strip():
            flush()
        else:
            paragraph.append(line)
    flush()
    return units
