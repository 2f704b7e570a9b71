"""Deep research's tool schemas: the typed arguments of each tool (pydantic models, so the
JSON schema Claude sees and the validation of what it sends are one definition), the
tool definitions, and ``parse_args``, which turns a bad call into a ``ToolError`` that
says what was wrong. Unknown keys are rejected, so no argument can widen a tool's scope
(there is no "kb" or "tenant" to name)."""

from __future__ import annotations

import json
import re
from datetime import date
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema

from bot.llm import Tool
from retrieval.models import Level

_TIME = re.compile(r"^(?:(\d+):)?(\d{1,2}):(\d{1,2}(?:\.\d+)?)$")


class ToolError(Exception):
    """A tool call Claude must fix: the message goes back to it as an ``is_error`` result."""


def _seconds(value: object) -> object:
    """``734``, ``"734"``, ``"12:14"`` or ``"1:02:05"`` -> seconds."""
    if isinstance(value, str):
        text = value.strip()
        m = _TIME.match(text)
        if m:
            h, mins, secs = m.groups()
            value = int(h or 0) * 3600 + int(mins) * 60 + float(secs)
        else:
            try:
                value = float(text)
            except ValueError:
                raise ValueError("use seconds (734) or a timestamp (12:14 or 1:02:05)") from None
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        raise ValueError("times start at 0")
    return value


Seconds = Annotated[
    float,
    BeforeValidator(_seconds),
    WithJsonSchema({"type": ["number", "string"]}),
]


def _passage_number(value: object) -> object:
    """``7``, ``"7"`` or ``"[7]"`` -> 7."""
    if isinstance(value, str):
        m = re.fullmatch(r"\s*\[?\s*(\d{1,4})\s*\]?\s*", value)
        if not m:
            raise ValueError("give the number n of a passage shown as [n], such as 7")
        return int(m.group(1))
    return value


PassageNumber = Annotated[
    int, BeforeValidator(_passage_number), WithJsonSchema({"type": ["integer", "string"]})
]
_AFTER = "Only sources recorded on or after this date (YYYY-MM-DD)."
_BEFORE = "Only sources recorded on or before this date (YYYY-MM-DD)."


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True, frozen=True)


class SearchArgs(Args):
    """Arguments of ``search``."""

    query: str = Field(
        min_length=1, max_length=300, description="What to look for: keywords or a question."
    )
    speaker: str | None = Field(
        None, max_length=100, description="Only passages where this person speaks (full name)."
    )
    source_ids: list[str] | None = Field(
        None,
        min_length=1,
        max_length=20,
        description="Only these sources: ids from the archive summary or list_sources.",
    )
    after: date | None = Field(None, description=_AFTER)
    before: date | None = Field(None, description=_BEFORE)
    limit: int = Field(8, ge=1, le=20, description="How many passages, best first (1-20).")

    level: ClassVar[Level | None] = None  # None: the level the query calls for


class TurnSearchArgs(SearchArgs):
    """Arguments of ``search_turns``: one speaker's turns."""

    level: ClassVar[Level | None] = "turn"


class TopicSearchArgs(SearchArgs):
    """Arguments of ``search_topics``: stretches on one subject (sections, pages)."""

    level: ClassVar[Level | None] = "topic"


class SummarySearchArgs(SearchArgs):
    """Arguments of ``search_summaries``: one summary per source."""

    level: ClassVar[Level | None] = "summary"


class ListSourcesArgs(Args):
    """Arguments of ``list_sources``."""

    query: str | None = Field(
        None, max_length=200, description="Words in the title, description or speakers."
    )
    kind: Literal["video", "audio", "document", "course"] | None = Field(
        None, description="Only sources of this kind."
    )
    after: date | None = Field(None, description=_AFTER)
    before: date | None = Field(None, description=_BEFORE)
    limit: int = Field(20, ge=1, le=50, description="How many sources (1-50).")


class TranscriptArgs(Args):
    """Arguments of ``get_transcript``."""

    source_id: str = Field(min_length=1, max_length=200, description="The source's id.")
    start_s: Seconds | None = Field(
        None, description="Start of the range: seconds (600) or a timestamp (10:00). Media only."
    )
    end_s: Seconds | None = Field(
        None, description="End of the range: seconds (900) or a timestamp (15:00). Media only."
    )
    offset: int = Field(
        0, ge=0, le=100_000, description="Windows to skip: the next_offset of the previous page."
    )
    limit: int = Field(8, ge=1, le=20, description="Windows (about a minute or a page each).")


class ExpandArgs(Args):
    """Arguments of ``expand_context``."""

    segment_id: PassageNumber = Field(
        description="The passage to widen: its number n as shown in [n] (e.g. 7)."
    )
    before: int = Field(2, ge=0, le=10, description="Windows before it (0-10).")
    after: int = Field(2, ge=0, le=10, description="Windows after it (0-10).")


class TimelineArgs(Args):
    """Arguments of ``topic_timeline``."""

    query: str = Field(min_length=1, max_length=300, description="The topic to trace.")
    limit: int = Field(10, ge=1, le=20, description="Passages in the timeline (1-20).")
    per_source: int = Field(2, ge=1, le=3, description="Passages per recording at most (1-3).")


ARGS: dict[str, type[Args]] = {
    "search": SearchArgs,
    "search_turns": TurnSearchArgs,
    "search_topics": TopicSearchArgs,
    "search_summaries": SummarySearchArgs,
    "list_sources": ListSourcesArgs,
    "get_transcript": TranscriptArgs,
    "expand_context": ExpandArgs,
    "topic_timeline": TimelineArgs,
}
DESCRIPTIONS = {
    "search": "Hybrid (keyword + meaning) search of the team's archive: meeting and lecture "
    "transcripts, documents, course materials. Returns passages best first, each as "
    "`[n] Title @ 12:14 (date) — Speaker: text`. Narrow by speaker, sources or dates. The "
    "[n] numbers stay the same for the whole research: cite them in the answer.",
    "search_turns": "Like search, over single speaker turns (a paragraph of a document): "
    "for who said what, quotes and exact moments.",
    "search_topics": "Like search, over topics: stretches of a few minutes on one subject "
    "(a document's sections and pages). For what a discussion covered as a whole.",
    "search_summaries": "Like search, over one summary per source (its topics, decisions "
    "and action items, each line at its moment). For what a recording was about, or "
    "which recordings discussed something.",
    "list_sources": "List the archive's sources (recordings, documents, courses) with their "
    "ids, titles, kinds, dates, speakers and descriptions, oldest first. Use the ids with "
    "search (source_ids) and get_transcript.",
    "get_transcript": "Read one source in order, a page at a time: a recording's transcript "
    "(optionally a time range) or a document's pages. Each window is a numbered passage. "
    "When there is more, the result gives the offset of the next page.",
    "expand_context": "Read what was said just before and after a passage already shown "
    "(by its number [n]): the neighbouring windows of the same source.",
    "topic_timeline": "Trace a topic through time: searches the whole archive, keeps the best "
    "one or two passages per recording, and lists them oldest recording first. Use it for "
    "how a plan or opinion evolved across meetings.",
}


def _clean(schema: Any) -> Any:
    """Pydantic's schema made plain for Claude: no titles, optional fields as their type."""
    if isinstance(schema, list):
        return [_clean(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _clean(v) for k, v in schema.items() if k != "title"}
    options = out.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options:
        rest = [o for o in options if o != {"type": "null"}]
        if len(rest) == 1:
            del out["anyOf"]
            out = {**rest[0], **out}
    if "default" in out and out["default"] is None:
        del out["default"]
    return out


def tool_params() -> list[Tool]:
    """The tool definitions sent to the model."""
    return [
        Tool(name, DESCRIPTIONS[name], _clean(model.model_json_schema()))
        for name, model in ARGS.items()
    ]


TOOLS: list[Tool] = tool_params()


def parse_args(name: str, raw: object) -> Args:
    """Validate a tool call's input against its schema; ``ToolError`` says what is wrong."""
    model = ARGS.get(name)
    if model is None:
        raise ToolError(f"Unknown tool {name[:40]!r}; the tools are {', '.join(ARGS)}.")
    if not isinstance(raw, dict):
        raise ToolError(f"The input of {name} must be an object.")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        problems = []
        for err in exc.errors()[:6]:
            where = ".".join(str(p) for p in err["loc"]) or "input"
            if err["type"] == "extra_forbidden":
                takes = ", ".join(model.model_fields)
                problems.append(f"unknown argument {where[:40]!r} ({name} takes {takes})")
            else:
                given = json.dumps(err.get("input"), default=str)[:60]
                problems.append(f"{where}: {err['msg']} (got {given})")
        raise ToolError(f"Invalid arguments for {name}: {'; '.join(problems)}.") from None
