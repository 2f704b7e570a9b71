"""Search options written inside a chat question, shared by every chat platform.

``who decided on Cognito? speaker:John after:2024-01-01 source:"Auth deep dive"`` ->
``("who decided on Cognito?", SearchFilters(speaker="John", after=..., source=...))``.
Values may be quoted with straight or curly quotes (chat apps and phones curl them).
"""

from __future__ import annotations

import re
from datetime import date

from retrieval.errors import InvalidInput
from retrieval.models import KINDS, Kind, SearchFilters

OPTION_NAMES = ("speaker", "source", "after", "before", "kind", "lesson")
USAGE = 'speaker:NAME source:"TITLE" after:YYYY-MM-DD before:YYYY-MM-DD kind:video lesson:N'

_OPTION = re.compile(
    r"(?<!\S)(?P<name>[A-Za-z]+):"
    r"(?:\"(?P<dq>[^\"]*)\"|'(?P<sq>[^']*)'|\u201c(?P<cq>[^\u201d]*)\u201d"
    r"|\u2018(?P<csq>[^\u2019]*)\u2019|(?P<bare>[^\s\"'\u201c\u2018]*))"
)


def parse_date(value: str | None, shown: str, example: str = "2024-01-31") -> date | None:
    """``2024-01-31`` -> date, empty -> None; anything else is one sentence quoting the
    option as its surface shows it (``after:May`` in chat, ``--after 'May'`` on the CLI)
    with an example written the same way."""
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{shown} is not a date; use YYYY-MM-DD, e.g. {example}.") from None


def parse_kind(value: str | None, shown: str) -> Kind | None:
    """A kind of source (any case), empty -> None; anything else is one sentence."""
    if not value:
        return None
    for kind in KINDS:
        if kind == value.lower():
            return kind
    raise InvalidInput(f"{shown} is not one of {', '.join(KINDS)}.")


def check_range(after: date | None, before: date | None, spell: str = "{}:") -> None:
    """A range that ends before it starts is one sentence naming both ends (``spell``
    writes an option's name as the surface does: ``after:`` or ``--after``)."""
    if after and before and after > before:
        raise InvalidInput(
            f"{spell.format('after')}{after.isoformat()} is later than "
            f"{spell.format('before')}{before.isoformat()}; swap them or widen the range."
        )


def _lesson(value: str) -> int:
    if not value.isdigit():  # course lessons start at 0 ("Lesson 0: Welcome")
        raise InvalidInput(f"lesson:{value} is not a lesson number; use e.g. lesson:3.")
    return int(value)


def parse_options(text: str) -> tuple[str, SearchFilters]:
    """Split a question into its text and the filters its ``name:value`` options ask for.

    Raises InvalidInput with one sentence for a bad value, an empty quoted value, a repeated
    option, or a date range that ends before it starts. Words like ``http://x`` or
    ``note:`` that are not option names, and a name followed by a space, stay in the
    question."""
    found: dict[str, str] = {}
    kept: list[str] = []
    last = 0
    for m in _OPTION.finditer(text):
        name = m["name"].lower()
        if name not in OPTION_NAMES:
            continue
        if m["bare"] == "":
            continue  # "Before: we had Auth0" is prose, not an option
        value = next(
            (v for v in (m["dq"], m["sq"], m["cq"], m["csq"], m["bare"]) if v is not None), ""
        ).strip()
        if not value:
            raise InvalidInput(f"{name}: needs a value, e.g. {_example(name)}.")
        if name in found:
            raise InvalidInput(f"{name}: is given twice; keep one.")
        found[name] = value
        kept.append(text[last : m.start()])
        last = m.end()
    kept.append(text[last:])
    question = re.sub(r"[ \t]{2,}", " ", "".join(kept)).strip()

    after = parse_date(found.get("after"), f"after:{found.get('after')}", "after:2024-01-31")
    before = parse_date(found.get("before"), f"before:{found.get('before')}", "before:2024-01-31")
    check_range(after, before)
    filters = SearchFilters(
        speaker=found.get("speaker"),
        source=found.get("source"),
        after=after,
        before=before,
        kind=parse_kind(found.get("kind"), f"kind:{found.get('kind')}"),
        lesson=_lesson(found["lesson"]) if "lesson" in found else None,
    )
    return question, filters


def _example(name: str) -> str:
    return {
        "speaker": "speaker:John",
        "source": 'source:"Auth deep dive"',
        "after": "after:2024-01-01",
        "before": "before:2024-06-30",
        "kind": "kind:video",
        "lesson": "lesson:3",
    }[name]


def describe(filters: SearchFilters) -> str:
    """The filters as the option text a user would write (for echoing a question)."""
    parts: list[str] = []
    if filters.speaker:
        parts.append(f"speaker:{_quote(filters.speaker)}")
    if filters.source:
        parts.append(f"source:{_quote(filters.source)}")
    if filters.after:
        parts.append(f"after:{filters.after.isoformat()}")
    if filters.before:
        parts.append(f"before:{filters.before.isoformat()}")
    if filters.kind:
        parts.append(f"kind:{filters.kind}")
    if filters.lesson is not None:
        parts.append(f"lesson:{filters.lesson}")
    return " ".join(parts)


def _quote(value: str) -> str:
    return f'"{value}"' if re.search(r"\s", value) else value
