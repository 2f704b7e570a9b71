"""Course files: a ``Course Title:`` header, then ``Lesson N: Title`` sections.

::

    Course Title: Introduction to MCP
    Course Link: https://example.com/courses/mcp
    Course Instructor: Ada Okafor
    Lesson 0: Welcome
    Lesson Link: https://example.com/courses/mcp/lesson-0
    <lesson text>
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from retrieval.write.chunking import Unit

_HEADER = re.compile(r"Course (Title|Link|Instructor):\s*(.*)")
_LESSON = re.compile(r"Lesson\s+(\d+)\s*:\s*(.*)")
_LESSON_LINK = re.compile(r"Lesson Link:\s*(.*)")


@dataclass(frozen=True)
class Course:
    """A course's header and its paragraphs as units."""

    title: str | None
    url: str | None
    instructor: str | None
    units: list[Unit]


def is_course(text: str) -> bool:
    """True when the first non-blank line starts with ``Course Title:``."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    return first.strip().startswith("Course Title:")


def read_course(text: str, path: Path) -> Course:
    """The header and one unit per paragraph, each with its lesson."""
    header: dict[str, str] = {}
    units: list[Unit] = []
    paragraph: list[str] = []
    number: int | None = None
    title: str | None = None
    url: str | None = None
    has_text = False  # a Link line counts only before any text of its lesson

    def flush() -> None:
        if paragraph:
            units.append(
                Unit(
                    " ".join(paragraph),
                    speaker=header.get("Instructor") or None,
                    lesson=number,
                    lesson_title=title,
                    lesson_url=url,
                )
            )
            paragraph.clear()

    for raw in text.splitlines():
        line = raw.strip()
        if number is None and not has_text and (head := _HEADER.fullmatch(line)):
            header[head[1]] = head[2].strip()
        elif lesson := _LESSON.fullmatch(line):
            flush()
            number, title, url, has_text = int(lesson[1]), lesson[2].strip() or None, None, False
        elif number is not None and not has_text and (link := _LESSON_LINK.fullmatch(line)):
            url = link[1].strip() or None
        elif not line:
            flush()
        else:
            paragraph.append(line)
            has_text = True
    flush()
    return Course(
        title=header.get("Title") or None,
        url=header.get("Link") or None,
        instructor=header.get("Instructor") or None,
        units=units,
    )
