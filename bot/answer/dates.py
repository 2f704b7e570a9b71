"""Dates a question names, as a range of recording days relative to when it is asked:
"last week", "yesterday", "this month", "in January 2024", "in March" (the latest
March not after today), "in 2023", "on 2024-01-23", "on January 9", "in the past two
weeks". A question naming two different ranges names none (ambiguous).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, timedelta


@dataclass(frozen=True)
class DateRange:
    """Recording days from ``after`` to ``before``, inclusive, and how to say it."""

    after: date
    before: date
    label: str


_MONTHS = {name.casefold(): i for i, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.casefold(): i for i, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = r"(January|February|March|April|May|June|July|August|September|October|November|"
_MONTH += r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
_NUMBERS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}
_NUMBERS.update({w: i for i, w in enumerate("x x x x x x seven eight nine ten".split()) if i > 6})

_RELATIVE = re.compile(
    r"\b(today|yesterday|(?:this|last|past|previous) (?:week|month|year))\b", re.I
)
_PAST_N = re.compile(
    r"\b(?:in |over |during )?the (?:last|past) (\d{1,3}|[a-z]+) (day|week|month)s?\b", re.I
)
# A capitalised month (so the verb "may" is never May), optionally with a year.
_IN_MONTH = re.compile(
    rf"\b(?:in|during|from|of|since)\s+(?:early |late |mid-?)?{_MONTH}"
    r"(?:,?\s+(\d{4}))?\b"
)
_IN_YEAR = re.compile(r"\b(?:in|during|from|of)\s+((?:19|20)\d{2})\b(?![-/]\d)")
_ISO = re.compile(r"\b((?:19|20)\d{2})-(\d{2})-(\d{2})\b")
_ON_DAY = re.compile(
    rf"\b(?:on|from)\s+{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?(?:,?\s+(\d{{4}}))?\b"
)


def _month_range(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def _label_month(year: int, month: int) -> str:
    return f"{calendar.month_abbr[month]} {year}"


def _relative(phrase: str, today: date) -> DateRange:
    phrase = " ".join(phrase.casefold().split())
    if phrase == "today":
        return DateRange(today, today, "today")
    if phrase == "yesterday":
        day = today - timedelta(days=1)
        return DateRange(day, day, "yesterday")
    which, unit = phrase.split()
    this = which == "this"
    if unit == "week":
        monday = today - timedelta(days=today.weekday())
        start = monday if this else monday - timedelta(days=7)
        return DateRange(start, today if this else start + timedelta(days=6), phrase)
    if unit == "month":
        year, month = today.year, today.month
        if not this:
            year, month = (year, month - 1) if month > 1 else (year - 1, 12)
        lo, hi = _month_range(year, month)
        return DateRange(lo, min(hi, today), phrase)
    year = today.year if this else today.year - 1
    return DateRange(date(year, 1, 1), min(date(year, 12, 31), today), phrase)


def _past_n(count: str, unit: str, today: date) -> DateRange | None:
    n = int(count) if count.isdigit() else _NUMBERS.get(count.casefold())
    if not n:
        return None
    days = {"day": 1, "week": 7, "month": 30}[unit.casefold()] * n
    return DateRange(today - timedelta(days=days), today, f"the past {n} {unit.casefold()}s")


def _safe(year: int, month: int, day: int) -> date | None:
    try:
        return date(year, month, day)
    except ValueError:
        return None


def date_ranges(question: str, today: date) -> list[DateRange]:
    """Every date range the question names, in the order found."""
    found: list[DateRange] = []
    for m in _RELATIVE.finditer(question):
        found.append(_relative(m.group(1), today))
    for m in _PAST_N.finditer(question):
        if (r := _past_n(m.group(1), m.group(2), today)) is not None:
            found.append(r)
    for m in _ISO.finditer(question):
        if (d := _safe(int(m.group(1)), int(m.group(2)), int(m.group(3)))) is not None:
            found.append(DateRange(d, d, d.isoformat()))
    for m in _ON_DAY.finditer(question):
        month, year = _MONTHS[m.group(1).casefold().rstrip(".")], m.group(3)
        y = int(year) if year else today.year
        d = _safe(y, month, int(m.group(2)))
        if d is not None and not year and d > today:
            d = _safe(y - 1, month, int(m.group(2)))
        if d is not None:
            found.append(DateRange(d, d, f"{calendar.month_abbr[month]} {d.day}, {d.year}"))
    for m in _IN_MONTH.finditer(question):
        month = _MONTHS[m.group(1).casefold().rstrip(".")]
        year = int(m.group(2)) if m.group(2) else today.year
        if not m.group(2) and date(year, month, 1) > today:
            year -= 1  # "in March" asked in January: the March just past
        lo, hi = _month_range(year, month)
        if m.group(0).casefold().startswith("since"):
            found.append(DateRange(lo, today, f"since {_label_month(year, month)}"))
        else:
            found.append(DateRange(lo, hi, _label_month(year, month)))
    for m in _IN_YEAR.finditer(question):
        year = int(m.group(1))
        found.append(DateRange(date(year, 1, 1), date(year, 12, 31), str(year)))
    return found


def named_dates(question: str, today: date) -> DateRange | None:
    """The one date range the question names; None when it names none, or two that
    differ (a day inside a month it also names counts as the day)."""
    found = date_ranges(question, today)
    if not found:
        return None
    narrowest = min(found, key=lambda r: (r.before - r.after, r.after))
    if all(r.after <= narrowest.after and narrowest.before <= r.before for r in found):
        return narrowest
    return None
