"""The speakers' rename form on a recording's page, for whoever holds an admin link
(``LinkSigner.admin_page``):

    POST /v/{token}/speakers   speaker=Speaker 2&name=Amara Osei&csrf=...

Any caller may be hostile. The token must be valid and carry the admin scope (a plain
page link gets 403, as a tampered or expired one does); the source is the one it names in
the knowledge base it names, nothing the form says. The post must bring back the form's
key (``LinkSigner.form_key``: signed for this token, unreadable by another site), come
from this server when the browser says where it came from (``Origin``,
``Sec-Fetch-Site``), be a small urlencoded body (at most ``MAX_BODY`` bytes), and name a
speaker of that source. A bad name is the page again with one sentence (400); a rename
done is a 303 back to the page. The write is ``bot.speakers`` → ``Writer.relabel``.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from urllib.parse import parse_qs, urlsplit

from aiohttp import web

from adapters.http.problems import DOWN, refused
from bot.models import Actor
from bot.wiring import CoreServices, speakers_of
from retrieval.errors import InvalidInput, QuorumError
from retrieval.links.share import Grant
from retrieval.models import Source

Render = Callable[[web.Request, int, str], Awaitable[web.Response]]
"""The page again, with a status and what its form's last post was told."""

log = logging.getLogger("quorum.pages")

MAX_BODY = 2048  # a speaker, a name of 80 characters and a key, urlencoded, fit many times
FORM_TYPE = "application/x-www-form-urlencoded"
NOT_ADMIN = (403, "This link cannot rename speakers", "Ask for an admin link to name them.")
BAD_FORM = (403, "This form did not come from Quorum", "Open the page again and retry.")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def _same_site(request: web.Request, public_url: str) -> bool:
    """The browser says the post came from this server (or says nothing: not a browser)."""
    site = request.headers.get("Sec-Fetch-Site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("Origin")
    if origin is None:
        return True
    if origin == "null":  # the pages' no-referrer policy has browsers hide it: their say
        return site == "same-origin"
    own = {_origin(public_url), _origin(str(request.url))}
    return origin.lower() in own


async def _fields(request: web.Request) -> dict[str, str] | None:
    """The form's fields, each given once; None when the body is not a small form."""
    if request.content_type != FORM_TYPE:
        return None
    if request.content_length is not None and request.content_length > MAX_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=request.content_length)
    body = b""
    while len(body) <= MAX_BODY:  # read() returns what has arrived: a body may come in parts
        part = await request.content.read(MAX_BODY + 1 - len(body))
        if not part:
            break
        body += part
    if len(body) > MAX_BODY:
        raise web.HTTPRequestEntityTooLarge(max_size=MAX_BODY, actual_size=len(body))
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=8)
    except (UnicodeDecodeError, ValueError):
        return None
    if any(len(v) != 1 for v in parsed.values()):
        return None
    return {k: v[0] for k, v in parsed.items()}


async def rename(
    request: web.Request, services: CoreServices, grant: Grant, source: Source, render: Render
) -> web.StreamResponse:
    """A speaker renamed from an admin link's page (its link already checked and opened:
    ``grant`` and ``source``); ``render``: the page again, saying what went wrong."""
    signer = services.retrieval.search.signer
    if not grant.admin or signer is None:
        raise refused(*NOT_ADMIN)
    token = request.match_info["token"]
    fields = await _fields(request)
    if (
        fields is None
        or not _same_site(request, signer.public_url)
        or not hmac.compare_digest(fields.get("csrf", ""), signer.form_key(token))
    ):
        raise refused(*BAD_FORM)
    speakers = speakers_of(services.retrieval, services.writer)
    by = Actor("page", "admin link")
    try:
        await speakers.rename(
            grant.kb, source.id, fields.get("speaker", ""), fields.get("name", ""), by
        )
    except InvalidInput as exc:
        return await render(request, 400, str(exc))
    except QuorumError:
        log.warning("renaming a speaker of %s failed", source.id, exc_info=True)
        raise refused(*DOWN) from None
    raise web.HTTPSeeOther(location=f"/v/{token}", headers={"Cache-Control": "no-store"})
