"""The gold side of bench/citations.py: QMSum questions with their gold windows in
seconds, the emulated Claude's script (one verbatim sentence of the gold span, cited by
its source number), and how one answer's citations score against the windows."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.qmsum import WORDS_PER_SECOND, write_meetings
from bot.cite.citations import cited_numbers
from bot.models import Answer
from retrieval.ingest.metadata import slug
from retrieval.write.chunking import split_sentences
from tests.emulators.anthropic import Reply

REPO = Path(__file__).resolve().parent.parent
KB = "qmsum_cite"
MIN_WORDS = 8  # the emulated answer prefers a sentence at least this long
MISS_REPLY = "The sources do not say this directly [1]."

_SECTION = re.compile(r"^\[(\d+)\] ?(.*)$")
_LINE = re.compile(r"^\((\d+(?::\d{2}){1,2})\) (.*)$")
_NOISE = re.compile(r"\{\w+\}|(?<!\w)[^\w\s]+(?!\w)")


@dataclass(frozen=True)
class Case:
    """One question with its meeting and gold windows (seconds)."""

    meeting: str
    query: str
    windows: tuple[tuple[float, float], ...]
    gold: tuple[str, ...]  # the gold utterances' texts, whitespace-normalised
    gold_starts: tuple[float, ...]  # and where each starts


@dataclass
class Result:
    """What one question's answer cited, and how it scores."""

    meeting: str
    query: str
    windows: list[tuple[float, float]]
    kind: str
    cited: list[float | None]
    quotes: list[str | None]
    align_ms: float | None
    miss: bool
    nothing: bool = False  # answered "nothing found"
    gold_in_hits: bool | None = None  # ... although the search hits overlap a gold window
    picked: str | None = None  # (b): the sentence the emulated Claude quoted
    picked_s: float | None = None  # and when it is said
    first_inside: bool = False
    all_inside: bool = False
    off_start: float | None = None
    outside_by: float | None = None


def norm(text: str) -> str:
    return " ".join(text.split())


def load_cases(data: Path, out: Path) -> list[Case]:
    """Write the meetings as WebVTT (bench/qmsum.py's way) into ``out``; return the cases."""
    if not any(data.glob("*.json")):
        raise SystemExit(f"no QMSum meetings (*.json) in {data}: pass --data")
    meetings = {m.id: m for m in write_meetings(data, out)}
    cases: list[Case] = []
    for path in sorted(data.glob("*.json")):
        meeting = meetings[slug(path.stem)]
        texts = [
            norm(str(u["content"])) for u in json.loads(path.read_text())["meeting_transcripts"]
        ]
        # write_meetings' layout: utterance i lasts max(1 s, words / 2.5) from starts[i]
        ends = [
            s + max(1.0, len(t.split()) / WORDS_PER_SECOND)
            for s, t in zip(meeting.starts, texts, strict=True)
        ]
        for query, gold in meeting.queries:
            idx = sorted(gold)
            runs: list[list[int]] = []
            for i in idx:
                if runs and i == runs[-1][-1] + 1:
                    runs[-1].append(i)
                else:
                    runs.append([i])
            windows = tuple((meeting.starts[r[0]], ends[r[-1]]) for r in runs)
            gold_texts = tuple(texts[i] for i in idx)
            starts = tuple(meeting.starts[i] for i in idx)
            cases.append(Case(meeting.id, query, windows, gold_texts, starts))
    return cases


def inside(second: float, windows: Any) -> bool:
    """True when a link second lies in a gold window (links carry whole seconds)."""
    return any(math.floor(a) <= second <= b for a, b in windows)


def outside_by(second: float, windows: Any) -> float:
    """0 inside a window, else the distance to the nearest one."""
    if inside(second, windows):
        return 0.0
    return min(min(abs(second - math.floor(a)), abs(second - b)) for a, b in windows)


def off_start(second: float, windows: Any) -> float:
    """|second - start| of the window nearest to ``second``."""
    nearest = min(windows, key=lambda w: (outside_by(second, [w]), abs(second - w[0])))
    return abs(second - nearest[0])


def _seconds(stamp: str) -> float:
    total = 0
    for part in stamp.split(":"):
        total = total * 60 + int(part)
    return float(total)


def source_lines(content: str) -> list[tuple[int, float, str]]:
    """The ``(m:ss) Speaker: text`` lines of a request's ``<sources>``: (n, second, text
    without the speaker), read the way Claude reads them."""
    block = re.search(r"<sources>\n(.*)\n</sources>", content, re.S)
    if block is None:
        return []
    out: list[tuple[int, float, str]] = []
    n: int | None = None
    speakers: list[str] = []
    for line in block.group(1).split("\n"):
        if head := _SECTION.match(line):
            n = int(head.group(1))
            names = head.group(2).split(" \u00b7 ", 1)[-1]
            speakers = sorted(names.split(", "), key=len, reverse=True)
        elif n is not None and (timed := _LINE.match(line)):
            text = timed.group(2)
            for name in speakers:
                if name and text.startswith(f"{name}: "):
                    text = text[len(name) + 2 :]
                    break
            out.append((n, _seconds(timed.group(1)), text))
    return out


def pick(case: Case, content: str) -> tuple[int, str, float] | None:
    """The numbered source and sentence an ideal answer quotes: a sentence of a line said
    inside a gold window that belongs to a gold utterance (a turn's line can run on past
    the window), at least ``MIN_WORDS`` words when there is one; and when it is said."""
    found: list[tuple[int, str, float]] = []
    for n, second, text in source_lines(content):
        if not inside(second, case.windows):
            continue
        for sentence in split_sentences(text):
            s = norm(sentence)
            for utt, start in zip(case.gold, case.gold_starts, strict=True):
                at = utt.find(s)
                if at >= 0:
                    duration = max(1.0, len(utt.split()) / WORDS_PER_SECOND)
                    found.append((n, s, start + duration * at / max(1, len(utt))))
                    break
    if not found:
        return None
    # QMSum's {disfmarker}, {vocalsound} ... are not words
    long = [f for f in found if len(_NOISE.sub(" ", f[1]).split()) >= MIN_WORDS]
    return long[0] if long else max(found, key=lambda f: len(f[1]))


class Script:
    """The emulated Claude: answers the question being asked from its gold span."""

    def __init__(self) -> None:
        self.case: Case | None = None
        self.picked: tuple[int, str, float] | None = None
        self.mismatched = 0
        self.revisions = 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        asks = [m for m in body["messages"] if "<sources>" in str(m["content"])]
        content = str(asks[-1]["content"]) if asks else ""
        if asks and asks[-1] is not body["messages"][-1]:
            # the engine asking once to revise claims their sources do not support: only
            # the generic reply of a retrieval miss should ever be sent back
            self.revisions += 1
            return Reply(text=MISS_REPLY)
        case = self.case
        asked = re.search(r"\nQuestion: (.*)\n", content)
        if case is None or asked is None or norm(asked.group(1)) != norm(case.query):
            self.mismatched += 1  # not the question we are asking: never expected
            return Reply(text=MISS_REPLY)
        self.picked = pick(case, content)
        if self.picked is None:
            return Reply(text=MISS_REPLY)
        n, sentence, _ = self.picked
        return Reply(text=f"{sentence.rstrip('.!?')} [{n}].")


def score(case: Case, answer: Answer, miss: bool) -> Result:
    """One answer's citations against the case's gold windows, in the order the reader
    meets them (an answer's ``citations`` are sorted by number, and a source's number is
    not its place in the text)."""
    order = {n: i for i, n in enumerate(cited_numbers(answer.text))}
    cites = sorted(answer.citations, key=lambda c: (order.get(c.n, len(order)), c.n))
    cited = [c.start_s for c in cites]
    r = Result(
        meeting=case.meeting,
        query=case.query,
        windows=list(case.windows),
        kind=answer.kind,
        cited=cited,
        quotes=[c.quote for c in cites],
        align_ms=answer.timings.get("align"),
        miss=miss,
        nothing=answer.kind == "nothing_found",
    )
    seconds = [s for s in cited if s is not None]
    if cited and cited[0] is not None:
        r.first_inside = inside(cited[0], case.windows)
        r.off_start = off_start(cited[0], case.windows)
        r.outside_by = outside_by(cited[0], case.windows)
    r.all_inside = bool(cited) and len(seconds) == len(cited)
    r.all_inside = r.all_inside and all(inside(s, case.windows) for s in seconds)
    return r


def overlaps(case: Case, segments: Any) -> bool:
    """True when one of ``segments`` overlaps a gold window in time."""
    for seg in segments:
        if seg.start_s is None or seg.end_s is None:
            continue
        if any(seg.start_s <= b and math.floor(a) <= seg.end_s for a, b in case.windows):
            return True
    return False
