"""Weaviate's client and transport errors as Quorum's ``SearchUnavailable``, naming the
server and what happened (used by every part of the store)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from weaviate.exceptions import UnexpectedStatusCodeError, WeaviateBaseError, WeaviateQueryError

from retrieval.errors import InvalidInput, SearchUnavailable


def _status(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, UnexpectedStatusCodeError) else None


def already_exists(exc: BaseException) -> bool:
    """A 422 "already exists": another process created it first, which is what we wanted."""
    return _status(exc) == 422 and "already exists" in str(exc).lower()


def _brief(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 200 else text[:197] + "..."


@contextlib.contextmanager
def translate_errors(url: str) -> Iterator[None]:
    """Turn client and transport errors into SearchUnavailable naming the server, by what
    happened: unreachable, refused credentials, a rejected request, or a failed query."""
    try:
        yield
    except (InvalidInput, SearchUnavailable):
        raise
    except UnexpectedStatusCodeError as exc:
        status = exc.status_code
        if status in (401, 403):
            raise SearchUnavailable(
                f"Weaviate at {url} refused Quorum's credentials (HTTP {status}); "
                "check QUORUM_WEAVIATE_API_KEY."
            ) from exc
        if status < 500:
            raise SearchUnavailable(
                f"Weaviate at {url} rejected a request (HTTP {status}): {_brief(exc)}"
            ) from exc
        raise SearchUnavailable(f"Weaviate at {url} failed (HTTP {status}); see its log.") from exc
    except WeaviateQueryError as exc:
        raise SearchUnavailable(f"Weaviate at {url} failed a query: {_brief(exc)}") from exc
    except (WeaviateBaseError, OSError, TimeoutError) as exc:
        raise SearchUnavailable(
            f"Weaviate at {url} is not reachable or failed ({type(exc).__name__}); "
            "check that it is running."
        ) from exc
