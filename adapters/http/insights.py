"""Insights over HTTP, for admins only (``QUORUM_ADMIN_TOKENS``, ``token:kb`` pairs):

    GET  /api/insights?kb=&days=|since=&until=&gaps=   JSON (``adapters.shapes.report_json``)
    GET  /insights                                     a form that takes the admin token
    POST /insights                                     the token traded for a signed link
    GET  /insights/{link}?days=                        the page, for the link's knowledge base

An admin token opens its own knowledge base's insights and nothing else: a plain API
token gets 403, another knowledge base's admin token 403, no token 401. The page is
reached through a signed link (``retrieval.links.share``), scoped to one knowledge base and to
insights (a recording's link does not open it, nor it a recording), which expires and
dies with the secret; the token itself never rides in a URL.
"""

from __future__ import annotations

import logging
from datetime import date

from aiohttp import web

from adapters.http import insights_view as view
from adapters.http.auth import Scopes, allowed, owner, sent
from adapters.http.problems import STARTING, Reject, guarded, problem, refused
from adapters.http.served import Served
from adapters.http.shell import html, message
from adapters.shapes import report_json
from bot.insights import Insights, day_range
from bot.wiring import CoreServices
from retrieval.errors import InvalidInput
from retrieval.links.links import media_link, page_link
from retrieval.links.share import BadLink

log = logging.getLogger("quorum.insights")

INSIGHTS = "~insights"
"""The object an insights link grants (no source id starts with "~")."""
LINK_TTL_S = 7 * 86400.0
MAX_DAYS = 3660


def _html(status: int, body: str) -> web.Response:
    return html(status, body, policy=view.CSP, cache="no-store")


def _day(value: str | None, field: str) -> date | None:
    """A ``YYYY-MM-DD`` query value as a day."""
    if not value:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise InvalidInput(f"{field} must be a date like 2026-01-31.") from None


def time_range(query: dict[str, str]) -> tuple[float, float | None, int | None]:
    """(since, until, days) from ``days`` (default 30) or ``since``/``until`` (UTC days)."""
    raw = query.get("days", "30")
    try:
        days = int(raw)
    except ValueError:
        raise InvalidInput("days must be a whole number of days.") from None
    if not 1 <= days <= MAX_DAYS:
        raise InvalidInput(f"days must be between 1 and {MAX_DAYS}.")
    since = _day(query.get("since"), "since")
    until = _day(query.get("until"), "until")
    start, end = day_range(days, since, until)
    return start, end, None if since is not None or until is not None else days


class InsightsRoutes:
    """The insights routes over a running core."""

    def __init__(self, server: Served, scopes: Scopes) -> None:
        self.server = server
        self.scopes = scopes
        self.users = server.settings.insights_users
        self._insights: Insights | None = None

    def add_routes(self, app: web.Application) -> None:
        """Register the routes."""
        app.router.add_get("/api/insights", guarded(self.api))
        app.router.add_get("/insights", self.form)
        app.router.add_post("/insights", self.login)
        app.router.add_get("/insights/{link}", self.page)

    def insights(self, services: CoreServices) -> Insights:
        """One ``Insights`` (and its cache of reports) for the running core."""
        if self._insights is None or self._insights.sessions is not services.sessions:
            r = services.retrieval
            self._insights = Insights(
                sessions=services.sessions, embedder=r.embedder, archives=r.search.archive
            )
        return self._insights

    def _services(self) -> CoreServices:
        services = self.server.services
        if services is None:
            raise Reject(problem(503, "Quorum is starting; try again in a few seconds."))
        return services

    async def api(self, request: web.Request) -> web.StreamResponse:
        """GET /api/insights: one knowledge base's insights, for its admin token."""
        kb = allowed(self.scopes.admin_kb(request), request.query.get("kb"), "read")
        since, until, _ = time_range(dict(request.query))
        gaps = request.query.get("gaps", "true").lower() not in ("0", "false", "no", "off")
        report = await self.insights(self._services()).report(kb, since, until, gaps=gaps)
        return web.json_response(report_json(report, self.users))

    async def form(self, request: web.Request) -> web.Response:
        """GET /insights: the admin token form."""
        return _html(200, view.login())

    async def login(self, request: web.Request) -> web.Response:
        """POST /insights: a valid admin token is sent on to its signed page."""
        form = await request.post()
        token = form.get("token")
        given = sent(token) if isinstance(token, str) else b""
        kb = owner(self.scopes.admin, given) if given else None
        if kb is None:
            return _html(403, view.login("That is not an admin token."))
        services = self.server.services
        signer = services.retrieval.signer if services else None
        if signer is None:
            raise refused(*STARTING)
        raise web.HTTPSeeOther(f"/insights/{signer.token(kb, INSIGHTS, ttl_s=LINK_TTL_S)}")

    async def page(self, request: web.Request) -> web.Response:
        """GET /insights/{link}: the insights page of the link's knowledge base."""
        services = self.server.services
        if services is None:
            raise refused(*STARTING)
        signer = services.retrieval.signer
        try:
            if signer is None:
                raise BadLink()
            grant = signer.check(request.match_info["link"])
            if grant.source_id != INSIGHTS:
                raise BadLink()
        except BadLink as exc:
            title = "This link has expired" if exc.expired else "This link does not work"
            text = "Ask for insights again." if exc.expired else "The link is incomplete."
            return _html(403, message(title, text))
        try:
            since, until, days = time_range(dict(request.query))
        except InvalidInput as exc:
            return _html(422, message("That range does not work", str(exc)))
        report = await self.insights(services).report(grant.kb, since, until)

        def href(source_id: str, start_s: float | None, page: int | None) -> str | None:
            if not source_id:
                return None
            url = signer.page(grant.kb, source_id)
            if start_s is not None:
                return media_link(url, start_s)
            return page_link(url, page) if page is not None else url

        return _html(
            200,
            view.report_page(
                report, days=days, range_href=view.range_query, href=href, users=self.users
            ),
        )
