"""The JSON API described as OpenAPI 3.1 (``GET /api/openapi.json``); request schemas
come from the pydantic models ``adapters.http.api`` validates bodies with."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from adapters.http.api import AskBody, FeedbackBody, SearchBody


def _op(summary: str, body: type[BaseModel] | None = None, **extra: Any) -> dict[str, Any]:
    op: dict[str, Any] = {
        "summary": summary,
        "security": [{"bearer": []}],
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {}}},
            "401": {"description": "Missing or unknown token."},
            "403": {"description": "The token belongs to another knowledge base."},
            "422": {"description": "A bad body; `field` names the field."},
            "503": {"description": "Quorum is starting, or the archive is unreachable."},
        },
        **extra,
    }
    if body is not None:
        ref = {"$ref": f"#/components/schemas/{body.__name__}"}
        op["requestBody"] = {"required": True, "content": {"application/json": {"schema": ref}}}
    return op


def _range_params() -> list[dict[str, Any]]:
    def query(name: str, kind: str, text: str) -> dict[str, Any]:
        return {
            "name": name,
            "in": "query",
            "required": False,
            "schema": {"type": kind},
            "description": text,
        }

    return [
        query("days", "integer", "The last N days (default 30)."),
        query("since", "string", "From this day, YYYY-MM-DD (UTC)."),
        query("until", "string", "To this day, included."),
        query("gaps", "boolean", "Group what went unanswered (default true)."),
    ]


def openapi_document() -> dict[str, Any]:
    """The API as OpenAPI 3.1 (request schemas from the pydantic models)."""
    schemas: dict[str, Any] = {}
    for model in (AskBody, SearchBody, FeedbackBody):
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    id_param = {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
    kb_param = {"name": "kb", "in": "query", "required": False, "schema": {"type": "string"}}
    ask = _op("Ask a question; SSE (progress, partial, answer) when streaming.", AskBody)
    ask["responses"]["200"]["content"]["text/event-stream"] = {}
    return {
        "openapi": "3.1.0",
        "info": {"title": "Quorum", "version": "1"},
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "paths": {
            "/api/ask": {"post": ask},
            "/api/search": {"post": _op("Hybrid search in a knowledge base.", SearchBody)},
            "/api/sources": {"get": _op("The knowledge base's sources.", parameters=[kb_param])},
            "/api/jobs": {
                "get": _op(
                    "The knowledge base's latest ingest jobs, newest first.",
                    parameters=[kb_param, {**kb_param, "name": "limit"}],
                    description="Each job's state; while one runs, its `stage` (`transcribing`, "
                    "`diarizing`: telling speakers apart, `writing`: embedding and storing) "
                    "and `progress` (0 to 1, of that stage).",
                )
            },
            "/api/sessions/{id}": {
                "get": _op(
                    "A session's questions and answers.",
                    parameters=[id_param, kb_param],
                )
            },
            "/api/feedback": {"post": _op("Rate an answer +1 or -1.", FeedbackBody)},
            "/api/insights": {
                "get": _op(
                    "What was asked and where the archive falls short (an admin token, "
                    "QUORUM_ADMIN_TOKENS; other tokens get 403).",
                    parameters=[kb_param, *_range_params()],
                )
            },
        },
    }
