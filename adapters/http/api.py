"""Quorum's JSON API, for programs rather than people in a chat:

    POST /api/ask            a question (optionally in a session) -> an answer, as one JSON
                             or, with ``"stream": true`` / ``Accept: text/event-stream``, as
                             server-sent events: progress, partial, then answer
    POST /api/search         hybrid search -> hits
    GET  /api/sources        what is in the knowledge base
    GET  /api/sessions/{id}  a session's questions and answers
    POST /api/feedback       +1 / -1 on an answer
    GET  /api/openapi.json   this API, described (``adapters.http.openapi``)

Every request carries ``Authorization: Bearer TOKEN``; ``QUORUM_API_TOKENS`` maps each
token to one knowledge base (``tok1:kb1,tok2:kb2``). A body may name its ``kb``
(default: the token's). Unknown token 401, another knowledge base 403, a bad body 422
naming the field. API sessions are threads of their own (platform ``api``, workspace =
knowledge base), so one knowledge base's token never reads another's sessions.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Coroutine
from datetime import date
from typing import Any, Literal, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from adapters.http.auth import Scopes, allowed
from adapters.http.problems import STARTING_TEXT, STOPPING, Reject, guarded, problem
from adapters.http.served import Served
from adapters.shapes import answer_json, held_json, hit_json
from bot.inflight import InFlight
from bot.models import Answer, Event, PartialAnswer, ProgressEvent, Question, ThreadKey
from bot.wiring import CoreServices
from retrieval.models import SearchFilters
from retrieval.search.search import MAX_K

log = logging.getLogger("quorum.api")

PLATFORM = "api"
SESSION_ID = r"^[A-Za-z0-9._:-]{1,128}$"
Body = TypeVar("Body", bound=BaseModel)


# ---------------------------------------------------------------- request bodies


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Filters(_Body):
    """Narrowing a search or an answer; empty fields do not filter."""

    speaker: str | None = None
    source: str | None = Field(default=None, description="Title (or part of it) of one source.")
    source_ids: list[str] = Field(default_factory=list)
    lesson: int | None = Field(default=None, ge=0)
    kind: Literal["video", "audio", "document", "course"] | None = None
    after: date | None = None
    before: date | None = None

    def to_filters(self) -> SearchFilters:
        """Quorum's own filters."""
        return SearchFilters(
            speaker=self.speaker,
            source=self.source,
            source_ids=tuple(self.source_ids),
            lesson=self.lesson,
            kind=self.kind,
            after=self.after,
            before=self.before,
        )


class AskBody(_Body):
    """POST /api/ask."""

    question: str = Field(min_length=1, max_length=20000)
    session_id: str | None = Field(
        default=None, pattern=SESSION_ID, description="Continue this session (default: a new one)."
    )
    kb: str | None = Field(default=None, description="Knowledge base (default: the token's).")
    mode: Literal["quick", "deep", "auto"] = "quick"
    filters: Filters = Field(default_factory=lambda: Filters())
    user: str = Field(default="api", min_length=1, max_length=200)
    stream: bool = Field(default=False, description="Answer as server-sent events.")


class SearchBody(_Body):
    """POST /api/search."""

    query: str = Field(min_length=1, max_length=2000)
    kb: str | None = None
    filters: Filters = Field(default_factory=lambda: Filters())
    k: int = Field(default=8, ge=1, le=MAX_K)


class FeedbackBody(_Body):
    """POST /api/feedback."""

    session_id: str = Field(pattern=SESSION_ID)
    exchange_id: int = Field(ge=1)
    value: Literal[1, -1]
    user: str = Field(default="api", min_length=1, max_length=200)
    kb: str | None = None


def _field(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(p) for p in loc) or "body"


class Api:
    """The API's handlers, on the core the ops server holds."""

    def __init__(self, server: Served, scopes: Scopes) -> None:
        self.server = server
        self.scopes = scopes
        self.answering = InFlight(log)

    def kb_for(self, request: web.Request, asked: str | None) -> str:
        """The knowledge base the token may use; 401/403 otherwise."""
        return allowed(self.scopes.api_kb(request), asked)

    async def body(self, request: web.Request, model: type[Body]) -> Body:
        """The JSON body, validated; 422 naming the first bad field."""
        try:
            raw = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise Reject(problem(422, "body: not JSON.", field="body")) from None
        except RecursionError:  # the parser recurses per level: a hostile body nests deep
            raise Reject(problem(422, "body: nested too deeply.", field="body")) from None
        try:
            return model.model_validate(raw)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = _field(first["loc"])
            raise Reject(problem(422, f"{where}: {first['msg']}.", field=where)) from None

    def services(self) -> CoreServices:
        """The running core's services; 503 while Quorum starts."""
        if self.server.services is None or self.server.core is None:
            raise Reject(problem(503, STARTING_TEXT))
        if self.server.readiness.stopping:
            raise Reject(problem(503, STOPPING))
        return self.server.services

    async def ask(self, request: web.Request) -> web.StreamResponse:
        """POST /api/ask."""
        own = self.scopes.api_kb(request)  # a stranger learns nothing, not even about bodies
        body = await self.body(request, AskBody)
        kb = allowed(own, body.kb)
        self.services()
        core = self.server.core
        assert core is not None
        session = body.session_id or uuid.uuid4().hex
        question = Question(
            text=body.question,
            thread=ThreadKey(PLATFORM, kb, PLATFORM, session),
            user=body.user,
            kb=kb,
            mode=body.mode,
            filters=body.filters.to_filters(),
        )
        wants_stream = body.stream or "text/event-stream" in request.headers.get("Accept", "")
        if not wants_stream:
            answer = await self._answer(core.ask(question))
            if answer is None:
                return problem(503, STOPPING)
            return web.json_response({"session_id": session, **answer_json(answer)})

        stream = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await stream.prepare(request)

        async def send(event: str, data: dict[str, Any]) -> None:
            await stream.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())

        async def on_event(event: Event) -> None:
            try:
                if isinstance(event, ProgressEvent):
                    await send("progress", {"text": event.text})
                elif isinstance(event, PartialAnswer):
                    await send("partial", {"text": event.text})
            except ConnectionError:  # the client left: its answer is not worth finishing
                log.info("API client left mid-answer; stopping its answer")
                if (task := asyncio.current_task()) is not None:
                    task.cancel()

        answer = await self._answer(core.ask(question, on_event))
        try:
            if answer is None:  # shutting down: say so rather than just hang up
                await send("error", {"error": STOPPING})
            else:
                await send("answer", {"session_id": session, **answer_json(answer)})
            await stream.write_eof()
        except ConnectionError:
            log.info("API client left before its answer")
        return stream

    async def _answer(self, asking: Coroutine[Any, Any, Answer]) -> Answer | None:
        """The core's answer, asked on a task of its own: a client that leaves cancels it
        (the handler is cancelled, and with it the task it awaits); a shutdown ends it
        (``drain``) and gets None, so the handler can tell its client to ask again."""
        work = asyncio.ensure_future(asking)
        self.answering.hold(work)
        try:
            return await work
        except asyncio.CancelledError:
            handler = asyncio.current_task()
            if work.cancelled() and handler is not None and not handler.cancelling():
                return None  # ended by drain(), not by the client leaving
            raise

    async def drain(self, within_s: float) -> None:
        """Answers in flight get ``within_s`` to finish; the rest are ended, and each
        handler tells its client to ask again (a final SSE event, a JSON 503)."""
        await self.answering.close(within_s)
        await asyncio.sleep(0)  # let each handler take its cue before the server closes

    async def search(self, request: web.Request) -> web.StreamResponse:
        """POST /api/search."""
        own = self.scopes.api_kb(request)  # a stranger learns nothing, not even about bodies
        body = await self.body(request, SearchBody)
        kb = allowed(own, body.kb)
        hits = await self.services().retrieval.search.search(
            kb, body.query, body.filters.to_filters(), body.k
        )
        return web.json_response({"kb": kb, "hits": [hit_json(h) for h in hits]})

    async def sources(self, request: web.Request) -> web.StreamResponse:
        """GET /api/sources[?kb=]."""
        kb = self.kb_for(request, request.query.get("kb"))
        held = await self.services().holdings.held(kb)
        return web.json_response({"kb": kb, "sources": [held_json(h) for h in held]})

    async def jobs(self, request: web.Request) -> web.StreamResponse:
        """GET /api/jobs[?kb=&limit=]: the knowledge base's latest ingest jobs, newest first
        (file names only, never a path on the server)."""
        kb = self.kb_for(request, request.query.get("kb"))
        raw = request.query.get("limit", "50")
        if not raw.isdigit() or not 1 <= int(raw) <= 500:
            return problem(422, "limit: a whole number from 1 to 500.", field="limit")
        jobs = await self.services().jobs.table.listing(kb, int(raw))
        return web.json_response({"kb": kb, "jobs": [j.json() for j in jobs]})

    async def session(self, request: web.Request) -> web.StreamResponse:
        """GET /api/sessions/{id}[?kb=]."""
        kb = self.kb_for(request, request.query.get("kb"))
        session = request.match_info["id"]
        services = self.services()
        thread = ThreadKey(PLATFORM, kb, PLATFORM, session)
        history = await services.sessions.history(thread, 1000)
        if not history:
            return problem(404, f"No session {session!r} in knowledge base {kb!r}.")
        exchanges = [
            {
                "exchange_id": e.id,
                "question": e.question,
                "answer": e.answer,
                "kind": e.kind,
                "mode": e.mode,
                "standalone_query": e.standalone_query,
                "created_at": e.created_at,
            }
            for e in history
        ]
        return web.json_response({"session_id": session, "kb": kb, "exchanges": exchanges})

    async def feedback(self, request: web.Request) -> web.StreamResponse:
        """POST /api/feedback."""
        own = self.scopes.api_kb(request)  # a stranger learns nothing, not even about bodies
        body = await self.body(request, FeedbackBody)
        kb = allowed(own, body.kb)
        services = self.services()
        thread = ThreadKey(PLATFORM, kb, PLATFORM, body.session_id)
        history = await services.sessions.history(thread, 1000)
        if body.exchange_id not in {e.id for e in history}:
            return problem(404, f"No answer {body.exchange_id} in session {body.session_id!r}.")
        core = self.server.core
        assert core is not None
        await core.record_feedback(body.exchange_id, body.user, body.value)
        return web.json_response({"exchange_id": body.exchange_id, "value": body.value})


def add_routes(app: web.Application, server: Served, scopes: Scopes) -> Api:
    """Mount the API on ``app``; the ``Api`` (drained when the server stops)."""
    api = Api(server, scopes)
    app.router.add_post("/api/ask", guarded(api.ask))
    app.router.add_post("/api/search", guarded(api.search))
    app.router.add_get("/api/sources", guarded(api.sources))
    app.router.add_get("/api/jobs", guarded(api.jobs))
    app.router.add_get("/api/sessions/{id}", guarded(api.session))
    app.router.add_post("/api/feedback", guarded(api.feedback))
    return api
