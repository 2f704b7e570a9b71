"""``quorum eval``: does search find the moment, and does the answer's link open on it?

An eval file is JSON Lines, one question per line, with its gold written by reading the
transcripts (never copied from Quorum's output):

    {"id": "kickoff-why", "question": "Why did we leave Auth0?",
     "source": "Auth kickoff", "window": [96, 131]}
    {"question": "Which page lists the rollback steps?", "source": "Auth plan", "page": 5}
    {"question": "What does lesson 3 cover?", "source": "Intro to MCP", "lesson": 3}
    {"question": "How do I page the on-call?", "source": "On-call", "heading": "Paging"}
    {"question": "What did we spend on catering?", "source": null}

``source`` is a title or id; the gold is one of ``window`` ([lo, hi] seconds, with
optional ``also``: more windows that answer it equally), ``page``, ``lesson`` or
``heading``. ``"source": null`` marks a question the archive cannot answer: the right
answer is "nothing found". Optional: ``id``, ``type`` (why, how, when, ...), ``speaker``.

Every question is asked through the real engine (Claude when a key is set, else the
extractive answer) and searched through the real search service. Measured:

- retrieval moment@k: a hit of the right source overlapping the gold among the top k;
- first-citation accuracy: the answer's first citation lands inside the gold;
- all-citation accuracy: the share of all citations that land inside the gold;
- offset: seconds between the first cited second and the gold start (same recording);
- for unanswerable questions, whether the answer is "nothing found".
"""

from __future__ import annotations

import json
import math
import statistics
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bot.cite.citations import cited_numbers
from bot.errors import InvalidInput
from bot.models import Answer, Citation, Mode, NumberedSource, Question, ThreadKey
from retrieval.archive import Archive
from retrieval.models import Hit, Segment, Source

KS = (1, 3, 5)
MAX_LINES = 10_000


@dataclass(frozen=True)
class Gold:
    """Where the answer to one question is: a source and a place in it (or nowhere)."""

    source: str | None
    windows: tuple[tuple[float, float], ...] = ()
    page: int | None = None
    lesson: int | None = None
    heading: str | None = None

    @property
    def answerable(self) -> bool:
        """False for a question the archive cannot answer."""
        return self.source is not None

    def is_source(self, source: Source) -> bool:
        """True when ``source`` is the gold's (by title or id, ignoring case)."""
        want = (self.source or "").casefold().strip()
        return want in (source.title.casefold().strip(), source.id.casefold())

    def holds(self, source: Source, seg: Segment, second: float | None = None) -> bool:
        """True when a place in ``source`` (a segment, or one second of it) is the gold's."""
        if not self.answerable or not self.is_source(source):
            return False
        if self.windows:
            if second is not None:
                return any(math.floor(lo) <= second <= hi for lo, hi in self.windows)
            if seg.start_s is None or seg.end_s is None:
                return False
            return any(seg.start_s <= hi and seg.end_s >= lo for lo, hi in self.windows)
        if self.page is not None:
            return seg.page == self.page
        if self.lesson is not None:
            return seg.lesson == self.lesson
        if self.heading is not None:
            return self.heading.casefold() in (seg.heading or "").casefold()
        return True


@dataclass(frozen=True)
class Case:
    """One line of an eval file."""

    line: int
    id: str
    question: str
    gold: Gold
    type: str | None = None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_case(line: int, raw: str) -> Case:
    """One eval line, or InvalidInput naming the line and what is wrong with it."""

    def bad(why: str) -> InvalidInput:
        return InvalidInput(f"line {line}: {why}")

    try:
        row = json.loads(raw)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise bad(f"not valid JSON ({exc.__class__.__name__})") from None
    if not isinstance(row, dict):
        raise bad("each line must be a JSON object")
    question = row.get("question")
    if not isinstance(question, str) or not question.strip():
        raise bad("'question' must be a non-empty string")
    source = row.get("source")
    if source is not None and (not isinstance(source, str) or not source.strip()):
        raise bad("'source' must be a title or id, or null for an unanswerable question")
    places = [k for k in ("window", "page", "lesson", "heading") if k in row]
    if source is None:
        if places:
            raise bad("an unanswerable question (source null) has no window, page or lesson")
        gold = Gold(None)
    else:
        if len(places) != 1:
            raise bad("give exactly one of 'window', 'page', 'lesson' or 'heading'")
        gold = _gold(source.strip(), row, places[0], bad)
    kind = row.get("type")
    ident = row.get("id", f"line-{line}")
    return Case(line, str(ident), question.strip(), gold, kind if isinstance(kind, str) else None)


def _gold(source: str, row: dict[str, Any], place: str, bad: Callable[[str], Exception]) -> Gold:
    if place == "window":
        windows = [row["window"], *(row.get("also") or [])]
        if not isinstance(row.get("also", []), list):
            raise bad("'also' must be a list of [lo, hi] windows")
        spans: list[tuple[float, float]] = []
        for w in windows:
            ok = isinstance(w, list) and len(w) == 2 and all(_number(x) for x in w)
            if not ok or not 0 <= w[0] < w[1]:
                raise bad("'window' must be [lo, hi] in seconds, with 0 <= lo < hi")
            spans.append((float(w[0]), float(w[1])))
        return Gold(source, windows=tuple(spans))
    value = row[place]
    if place in ("page", "lesson"):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise bad(f"'{place}' must be a whole number")
        return Gold(source, page=value) if place == "page" else Gold(source, lesson=value)
    if not isinstance(value, str) or not value.strip():
        raise bad("'heading' must be a non-empty string")
    return Gold(source, heading=value.strip())


def load_cases(path: Path) -> list[Case]:
    """Every case of an eval file; InvalidInput naming every bad line (nothing is asked
    when one is bad)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInput(f"No eval file at {path}.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"Could not read {path}: {exc.__class__.__name__}.") from None
    cases: list[Case] = []
    errors: list[str] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        if number > MAX_LINES:
            errors.append(f"more than {MAX_LINES:,} lines; split the file")
            break
        try:
            cases.append(parse_case(number, raw))
        except InvalidInput as exc:
            errors.append(str(exc))
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            errors.append(f"line {case.line}: id {case.id!r} is used twice")
        seen.add(case.id)
    if errors:
        raise InvalidInput(f"{path} has {len(errors)} bad line(s):\n" + "\n".join(errors))
    if not cases:
        raise InvalidInput(f"{path} holds no questions.")
    return cases


@dataclass
class Result:
    """What one question scored."""

    case: Case
    rank: int | None = None  # 1-based rank of the first hit on the gold; None: not in top 5
    kind: str = ""
    first: Citation | None = None
    first_inside: bool = False
    inside: int = 0
    citations: int = 0
    offset_s: float | None = None
    nothing_found: bool = False

    @property
    def correct(self) -> bool:
        """The question's headline: first citation inside (or "nothing found" when right)."""
        if not self.case.gold.answerable:
            return self.nothing_found
        return self.first_inside

    def json(self) -> dict[str, Any]:
        """The result as JSON (``quorum eval --json``)."""
        first = self.first
        return {
            "id": self.case.id,
            "type": self.case.type,
            "question": self.case.question,
            "answerable": self.case.gold.answerable,
            "kind": self.kind,
            "moment_rank": self.rank,
            "first_citation": None
            if first is None
            else {"label": first.label, "start_s": first.start_s, "page": first.page},
            "first_inside": self.first_inside,
            "citations": self.citations,
            "citations_inside": self.inside,
            "offset_s": self.offset_s,
            "correct": self.correct,
        }


@dataclass
class Summary:
    """The figures over all questions."""

    results: list[Result] = field(default_factory=list)

    def _answerable(self) -> list[Result]:
        return [r for r in self.results if r.case.gold.answerable]

    def moment_at(self, k: int) -> float:
        """Share of answerable questions with a gold hit among the top ``k``."""
        rows = self._answerable()
        return sum(1 for r in rows if r.rank is not None and r.rank <= k) / max(1, len(rows))

    @property
    def first_citation(self) -> float:
        """Share of answerable questions whose first citation lands inside the gold."""
        rows = self._answerable()
        return sum(r.first_inside for r in rows) / max(1, len(rows))

    @property
    def all_citations(self) -> float:
        """Share of all citations (answerable questions) that land inside the gold."""
        rows = self._answerable()
        return sum(r.inside for r in rows) / max(1, sum(r.citations for r in rows))

    @property
    def median_offset_s(self) -> float | None:
        """Median seconds between the first cited second and the gold start."""
        found = [r.offset_s for r in self.results if r.offset_s is not None]
        return statistics.median(found) if found else None

    @property
    def unanswerable(self) -> tuple[int, int]:
        """(answered "nothing found", unanswerable questions)."""
        rows = [r for r in self.results if not r.case.gold.answerable]
        return sum(r.nothing_found for r in rows), len(rows)

    def json(self) -> dict[str, Any]:
        """The summary and every result as JSON."""
        found, total = self.unanswerable
        return {
            "questions": len(self.results),
            "answerable": len(self._answerable()),
            **{f"moment_at_{k}": round(self.moment_at(k), 4) for k in KS},
            "first_citation_accuracy": round(self.first_citation, 4),
            "all_citation_accuracy": round(self.all_citations, 4),
            "median_offset_s": self.median_offset_s,
            "unanswerable_nothing_found": found,
            "unanswerable": total,
            "results": [r.json() for r in self.results],
        }


def _source_of(c: Citation, sources: Sequence[NumberedSource]) -> NumberedSource | None:
    n = c.source_n if c.source_n is not None else c.n
    return next((s for s in sources if s.n == n), None)


def score_answer(case: Case, answer: Answer, result: Result) -> None:
    """Fill ``result`` with how the answer's citations land on the gold."""
    gold = case.gold
    result.kind = answer.kind
    result.nothing_found = answer.kind == "nothing_found"
    # in the order the reader meets them: a source's number is not its place in the text
    order = {n: i for i, n in enumerate(cited_numbers(answer.text))}
    cites = sorted(answer.citations, key=lambda c: (order.get(c.n, len(order)), c.n))
    result.citations = len(cites)
    for i, c in enumerate(cites):
        ns = _source_of(c, answer.sources)
        if ns is None:
            continue
        hit = ns.hit
        second = c.start_s if gold.windows else None
        seg = hit.segment if c.page is None else _with_page(hit.segment, c.page)
        inside = gold.holds(hit.source, seg, second)
        result.inside += inside
        if i == 0:
            result.first, result.first_inside = c, inside
            if gold.windows and c.start_s is not None and gold.is_source(hit.source):
                result.offset_s = min(abs(c.start_s - lo) for lo, _ in gold.windows)


def _with_page(seg: Segment, page: int) -> Segment:
    return replace(seg, page=page)


def moment_rank(case: Case, hits: Sequence[Hit]) -> int | None:
    """The 1-based rank of the first hit on the gold, if any."""
    return next(
        (i for i, h in enumerate(hits, 1) if case.gold.holds(h.source, h.segment)),
        None,
    )


Ask = Callable[[Question], Awaitable[Answer]]


async def run_eval(
    cases: Sequence[Case],
    archive: Archive,
    ask: Ask,
    kb: str,
    mode: Mode = "quick",
    on_result: Callable[[Result], None] | None = None,
) -> Summary:
    """Ask every case through ``ask`` (the engine) and search ``archive``; score both."""
    summary = Summary()
    run_id = uuid.uuid4().hex[:8]
    for case in cases:
        result = Result(case)
        if case.gold.answerable:
            result.rank = moment_rank(case, await archive.search(case.question, k=max(KS)))
        question = Question(
            text=case.question,
            thread=ThreadKey("eval", "local", run_id, case.id),
            user="eval",
            kb=kb,
            mode=mode,
        )
        score_answer(case, await ask(question), result)
        summary.results.append(result)
        if on_result is not None:
            on_result(result)
    return summary
