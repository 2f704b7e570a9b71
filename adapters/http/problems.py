"""How the HTTP port says no: a JSON problem for programs (``problem``, raised from deep
inside a handler as ``Reject``, and ``guarded``, which turns Quorum's errors into one
sentence and a status, never a traceback), and a refusal page for people (``refused``:
403 for a bad or expired link, 404 for a removed source, 503 while starting)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from adapters.http.shell import HEADERS, message
from bot.errors import DatabaseUnavailable, InvalidInput, QuorumError, SearchUnavailable

log = logging.getLogger("quorum.api")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

STARTING_TEXT = "Quorum is starting; try again shortly."
STOPPING = "Quorum is restarting; please ask again shortly."
BUSY = "Quorum's session database is busy right now; try again shortly."
RETRY_AFTER_S = 5  # about SQLite's busy timeout: a lock held longer is rare


def problem(status: int, message: str, **extra: Any) -> web.Response:
    """A JSON error: ``{"error": message, ...}`` (401 says which scheme to use, 503 when
    to come back)."""
    headers = {401: {"WWW-Authenticate": "Bearer"}, 503: {"Retry-After": str(RETRY_AFTER_S)}}
    body = {"error": message, **extra}
    return web.json_response(body, status=status, headers=headers.get(status))


class Reject(Exception):
    """An HTTP error answer, raised from deep inside a handler."""

    def __init__(self, response: web.Response) -> None:
        self.response = response


def guarded(handler: Handler) -> Handler:
    """``handler``, with a ``Reject`` answered as it says and Quorum's errors as one
    sentence (503 when the archive or the session database is out of reach for now, 422
    for bad input, else 500). The database's file or server is logged, not told."""

    async def run(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except Reject as exc:
            return exc.response
        except SearchUnavailable:
            log.error("API request failed: search unavailable", exc_info=True)
            return problem(503, "The archive is unreachable right now; try again shortly.")
        except DatabaseUnavailable as exc:
            log.warning("API request refused: %s", exc)
            return problem(503, BUSY)
        except InvalidInput as exc:
            return problem(422, str(exc))
        except QuorumError:
            log.error("API request failed", exc_info=True)
            return problem(500, "Something went wrong on Quorum's side.")

    return run


FORBIDDEN = (403, "This link does not work", "The link is incomplete or was changed.")
EXPIRED = (
    403,
    "This link has expired",
    "Links to Quorum's pages work for a limited time. Ask Quorum again for a fresh link.",
)
REMOVED = (404, "Not found", "This source is no longer in Quorum's archive.")
STARTING = (503, "Quorum is starting", "Try again in a few seconds.")
DOWN = (503, "The archive is not reachable", "Try again in a minute.")


def refused(status: int, title: str, text: str) -> web.HTTPException:
    """A page that says no (``FORBIDDEN``, ``EXPIRED``, ``REMOVED``, ``STARTING``,
    ``DOWN``), to raise from a page handler."""
    cls: Callable[..., web.HTTPException] = {
        403: web.HTTPForbidden,
        404: web.HTTPNotFound,
        503: web.HTTPServiceUnavailable,
    }[status]
    return cls(
        text=message(title, text),
        content_type="text/html",
        headers={**HEADERS, "Cache-Control": "no-store"},
    )
