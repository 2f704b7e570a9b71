"""Summaries written by the fast model at ingest, and reading a stored summary back.

With a model configured, ``ModelSummarizer`` is handed to the write path (``bot.write``): it sends
a source's topics (each line with its second) to the fast model and asks for topics,
decisions and action items as JSON, each with the second it is about. A second outside
the source, a broken reply or a failed call leaves the extractive summary in place
(``retrieval.write.summary``); ingest never fails because of a summary.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator, Sequence

from bot.config import Settings
from bot.llm import LLM, Model, from_settings
from retrieval.links.links import format_timestamp
from retrieval.models import Segment, Source
from retrieval.write.summary import Line, Section

log = logging.getLogger("quorum.summary")
MAX_PROMPT_CHARS = 24_000  # about 6k tokens of transcript per source
MAX_LINES = 8  # per section
SYSTEM = (
    "You summarise one recording or document for a team's archive. Reply with JSON only: "
    '{"topics": [{"text": "...", "at": SECONDS}], "decisions": [...], "actions": [...]}. '
    "topics: what was discussed, one short sentence each, in order; decisions: what was "
    "decided; actions: who will do what (by when). A decision or action starts with the "
    "speaker's name as the transcript gives it and a colon (\"Amara: restore drill by "
    "Tuesday\"). Every item's 'at' is the second, taken "
    "from the [seconds] marks given, where it is said. Leave a list empty rather than "
    "invent an item. At most 8 items per list."
)
_SECTIONS: dict[str, Section] = {"topics": "topic", "decisions": "decision", "actions": "action"}


def _transcript(topics: Sequence[Segment]) -> str:
    """The topics as text, each line led by the second it starts at."""
    lines: list[str] = []
    for topic in topics:
        heading = f"## {topic.heading}" if topic.heading else "##"
        lines.append(heading)
        starts = {m.at: m.start_s for m in topic.marks}
        pos = 0
        for raw in topic.text.split("\n"):
            second = max((s for at, s in starts.items() if at <= pos + len(raw)), default=None)
            lines.append(f"[{second:.0f}] {raw}" if second is not None else raw)
            pos += len(raw) + 1
    text = "\n".join(lines)
    return text if len(text) <= MAX_PROMPT_CHARS else text[:MAX_PROMPT_CHARS] + "\n[...]"


def parse(reply: str, start_s: float | None, end_s: float | None) -> list[Line]:
    """Summary lines from the model's JSON; items without a second inside the source are
    dropped (a line must link to a moment that exists)."""
    found = re.search(r"\{.*\}", reply, re.DOTALL)
    if not found:
        return []
    try:
        data = json.loads(found.group(0))
    except json.JSONDecodeError:
        return []
    if not isinstance(data, dict):
        return []
    lines: list[Line] = []
    for key, section in _SECTIONS.items():
        items = data.get(key)
        if not isinstance(items, list):
            continue
        for item in items[:MAX_LINES]:
            if not isinstance(item, dict):
                continue
            text = " ".join(str(item.get("text") or "").split())
            at = item.get("at")
            if not text or not isinstance(at, int | float) or isinstance(at, bool):
                continue
            if start_s is not None and end_s is not None and not start_s <= at <= end_s:
                continue
            lines.append(Line(section, text[:300], float(at)))
    return lines


class ModelSummarizer:
    """Summary lines from the model's fast model, Claude's or a server's
    (``retrieval.write.summary.Summarizer``)."""

    def __init__(self, llm: LLM, timeout_s: float = 60.0) -> None:
        self.llm = llm
        self.timeout_s = timeout_s

    async def summarize(self, source: Source, topics: Sequence[Segment]) -> list[Line] | None:
        """The lines for ``source``, or None when its topics are untimed (a document keeps
        the extractive summary: its lines link to pages, which the model cannot see)."""
        if not topics or topics[0].start_s is None:
            return None
        start = min(t.start_s or 0.0 for t in topics)
        end = max(t.end_s or 0.0 for t in topics)
        prompt = (
            f"Recording: {source.title} ({format_timestamp(end - start)})\n\n{_transcript(topics)}"
        )
        done = await self.llm.complete(
            system=SYSTEM,
            messages=[{"role": "user", "content": prompt}],
            max_tokens=1500,
            model=self.llm.fast_model,
            timeout_s=self.timeout_s,
        )
        lines = parse(done.text, start, end)
        log.info("summary of %s: %d lines from %s", source.id, len(lines), done.model)
        return lines or None


@contextlib.asynccontextmanager
async def model_summarizer(settings: Settings) -> AsyncIterator[ModelSummarizer | None]:
    """The model's summarizer for an ingest when one is configured (closed after), else
    None."""
    llm: Model | None = from_settings(settings)
    if llm is None:
        yield None
        return
    try:
        yield ModelSummarizer(llm, settings.llm_timeout_s)
    finally:
        await llm.aclose()
