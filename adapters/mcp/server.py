"""The MCP server of one knowledge base, on the official SDK's ``MCPServer``: five tools
with JSON schemas and descriptions a model can act on, and one resource per source (its
transcript). The same server runs over stdio (``quorum mcp``) and Streamable HTTP
(``/mcp`` on ``quorum serve``'s port), so the two cannot drift.

A bad argument, whether the SDK's schema check or Quorum's own, comes back as the tool's
error with one sentence; a crash as the SDK's generic error, its traceback in the log.
"""

from __future__ import annotations

import logging
from datetime import date
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp_types import CallToolResult, Resource, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from adapters.mcp import tools
from adapters.mcp.tools import Reach, Result
from bot.errors import ConfigError, InvalidInput, QuorumError, SearchUnavailable
from bot.models import Event, ProgressEvent
from retrieval.search.search import MAX_K, MAX_QUERY_CHARS

log = logging.getLogger("quorum.mcp")

NAME = "quorum"
TRANSCRIPT_URI = "quorum://transcript/{source_id}"
UNREACHABLE = "The archive is unreachable right now; try again shortly."
BROKEN = "Something went wrong on Quorum's side; the server's log has the details."
INSTRUCTIONS = """Quorum answers from a team's recorded meetings and documents. Every passage,
answer and transcript line carries a link that opens the recording at that second (or the
document at that page): give those links to the user with what you quote.
Use `ask` for a question in plain words (it searches, then writes a cited answer; pass the
returned session_id back for a follow-up), `search` to see the passages themselves, `sources`
to learn what the archive holds, `transcript` to read a stretch of one recording, and
`summary` for a recording's topics, decisions and action items."""

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

Query = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for, in words."),
]
SourceName = Annotated[
    str,
    Field(min_length=1, max_length=300, description="A source's id or title (see `sources`)."),
]
Since = Annotated[date | None, Field(description="Only sources recorded on or after (YYYY-MM-DD).")]
Until = Annotated[
    date | None, Field(description="Only sources recorded on or before (YYYY-MM-DD).")
]


def _sentence(tool: str, exc: ValidationError) -> str:
    """The first thing wrong with a call's arguments, as one sentence."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "arguments"
    if first["type"] == "missing":
        return f"{tool}: the argument {where!r} is required."
    if first["type"] == "extra_forbidden":
        return f"{tool}: there is no argument {where!r}."
    given = repr(first.get("input"))
    given = given if len(given) <= 40 else given[:37] + "..."
    msg = first["msg"][:1].lower() + first["msg"][1:]
    return f"{tool}: the argument {where!r} {msg.removeprefix('input ')} (got {given})."


def _result(result: Result) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=result.text)], structured_content=result.data
    )


class QuorumMCP(MCPServer[Any]):
    """``MCPServer`` bound to one knowledge base: its tools and its transcripts."""

    def __init__(self, reach: Reach, **kwargs: Any) -> None:
        super().__init__(
            NAME,
            title="Quorum",
            instructions=INSTRUCTIONS,
            log_level="WARNING",
            **kwargs,
        )
        self.reach = reach
        self._tools()
        self._resources()

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> Any:
        """The SDK's call, with every anticipated failure said in one sentence."""
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(_sentence(name, cause)) from cause
            if isinstance(cause, InvalidInput | ConfigError):  # each says how to fix it
                raise ToolError(str(cause)) from cause
            if isinstance(cause, SearchUnavailable):
                log.error("MCP %s failed: search unavailable", name, exc_info=cause)
                raise ToolError(UNREACHABLE) from cause
            if isinstance(cause, QuorumError):
                log.error("MCP %s failed", name, exc_info=cause)
                raise ToolError(BROKEN) from cause
            raise

    async def list_resources(self) -> list[Resource]:
        """One transcript per source of the knowledge base."""
        try:
            infos = await tools.transcripts(self.reach)
        except QuorumError:
            log.error("MCP could not list the sources", exc_info=True)
            return []
        return [
            Resource(
                uri=TRANSCRIPT_URI.format(source_id=i.source.id),
                name=i.source.id,
                title=f"{i.source.title} (transcript)",
                description=f"{i.source.kind}"
                + (f" recorded {i.source.recorded_at.isoformat()}" if i.source.recorded_at else "")
                + ": every line with its speaker and second.",
                mime_type="text/markdown",
            )
            for i in infos
        ]

    def _resources(self) -> None:
        reach = self.reach

        @self.resource(
            TRANSCRIPT_URI,
            name="transcript",
            title="A source's transcript",
            description="A recording's lines with speakers and seconds, or a document's text.",
            mime_type="text/markdown",
        )
        async def transcript_resource(source_id: str) -> str:
            try:
                return await tools.whole_transcript(reach, source_id)
            except InvalidInput as exc:
                raise ResourceNotFoundError(str(exc)) from None

    def _tools(self) -> None:
        reach = self.reach

        @self.tool(
            title="Search the archive",
            description=(
                "Hybrid (keyword + meaning) search over the team's recordings and documents. "
                "Returns passages best first, each with its source's title, the speaker, the "
                "second it starts, a quote, and page_link: a signed link that opens the "
                "recording playing at that second (or the document at the passage)."
            ),
            annotations=READ_ONLY,
        )
        async def search(
            query: Query,
            speaker: Annotated[
                str | None, Field(max_length=200, description="Only passages by this speaker.")
            ] = None,
            source: Annotated[
                str | None,
                Field(max_length=300, description="Only this source (its id or title)."),
            ] = None,
            since: Since = None,
            until: Until = None,
            level: Annotated[
                Literal["turn", "window", "topic", "summary"] | None,
                Field(
                    description="Search one resolution only: a speaker's turn, a window of "
                    "talk, a topic, or a whole source's summary (default: chosen from the query)."
                ),
            ] = None,
            k: Annotated[
                int, Field(ge=1, le=MAX_K, description=f"How many passages (1-{MAX_K}).")
            ] = 8,
        ) -> CallToolResult:
            return _result(
                await tools.search(
                    reach,
                    query,
                    speaker=speaker,
                    source=source,
                    since=since,
                    until=until,
                    level=level,
                    k=k,
                )
            )

        @self.tool(
            title="Ask the archive",
            description=(
                "Ask a question in plain words: Quorum searches the recordings and documents "
                "and writes an answer citing them as [n], each citation with a link to the "
                "second it relies on. Returns a session_id: pass it back to ask a follow-up "
                "in the same conversation ('and who owns that?'). mode 'deep' researches "
                "across many sources (slower); progress is reported while it works."
            ),
            annotations=ToolAnnotations(read_only_hint=False, open_world_hint=False),
        )
        async def ask(
            question: Annotated[
                str, Field(min_length=1, max_length=20000, description="The question.")
            ],
            ctx: Context[Any, Any],
            session_id: Annotated[
                str | None,
                Field(
                    max_length=128,
                    description="Continue this conversation (a session_id ask returned).",
                ),
            ] = None,
            mode: Annotated[
                Literal["quick", "deep", "auto"],
                Field(description="quick (default), deep research, or auto (Quorum picks)."),
            ] = "quick",
        ) -> CallToolResult:
            steps = 0

            async def on_event(event: Event) -> None:
                nonlocal steps
                if isinstance(event, ProgressEvent):
                    steps += 1
                    await ctx.report_progress(steps, None, event.text)

            answer = await tools.ask(
                reach, question, session_id=session_id, mode=mode, on_event=on_event
            )
            return _result(answer)

        @self.tool(
            title="List the sources",
            description=(
                "What the archive holds: recordings and documents, newest first, with id, "
                "title, kind, date, speakers and a page_link. Filter by words of the title or "
                "a speaker's name, kind or dates; long lists are paged (next_offset)."
            ),
            annotations=READ_ONLY,
        )
        async def sources(
            query: Annotated[
                str | None,
                Field(max_length=300, description="Words of a title, or a speaker's name."),
            ] = None,
            kind: Annotated[
                Literal["video", "audio", "document", "course"] | None,
                Field(description="Only this kind of source."),
            ] = None,
            since: Since = None,
            until: Until = None,
            offset: Annotated[
                int, Field(ge=0, le=100_000, description="Where to start (next_offset).")
            ] = 0,
            limit: Annotated[
                int, Field(ge=1, le=200, description="How many sources at most.")
            ] = tools.SOURCES_PAGE,
        ) -> CallToolResult:
            found = await tools.sources(
                reach, query=query, kind=kind, since=since, until=until, offset=offset, limit=limit
            )
            return _result(found)

        @self.tool(
            title="Read a transcript",
            description=(
                "A recording's transcript, line by line with the speaker and the second each "
                "line starts (and a link to it), optionally between start_s and end_s; a "
                "document's text. Paged: call again with next_offset for more."
            ),
            annotations=READ_ONLY,
        )
        async def transcript(
            source: SourceName,
            start_s: Annotated[
                float | None, Field(ge=0, le=1e7, description="From this second.")
            ] = None,
            end_s: Annotated[
                float | None, Field(ge=0, le=1e7, description="Up to this second.")
            ] = None,
            offset: Annotated[
                int, Field(ge=0, le=9_000, description="Where to continue (next_offset).")
            ] = 0,
            limit: Annotated[
                int, Field(ge=1, le=200, description="How many passages (windows) at most.")
            ] = tools.TRANSCRIPT_PAGE,
        ) -> CallToolResult:
            read = await tools.transcript(
                reach, source, start_s=start_s, end_s=end_s, offset=offset, limit=limit
            )
            return _result(read)

        @self.tool(
            title="Summarize a source",
            description=(
                "A recording's or document's summary: its topics, decisions and action items, "
                "each at the moment it was said."
            ),
            annotations=READ_ONLY,
        )
        async def summary(source: SourceName) -> CallToolResult:
            return _result(await tools.summary(reach, source))


def build_server(reach: Reach, **kwargs: Any) -> QuorumMCP:
    """The MCP server of ``reach``'s knowledge base."""
    return QuorumMCP(reach, **kwargs)
