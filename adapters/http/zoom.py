"""``POST /hooks/zoom``: Zoom's webhooks in, translated (``bot.connectors.zoom`` decides):
the signature and replay window checked on the raw body before anything else (401, and
nothing queued, when they fail), the ``endpoint.url_validation`` challenge answered, a
``recording.completed`` kept and queued as a ``zoom://`` job (its download and
transcription run in a worker; Zoom hears 200 at once), ``recording.deleted`` and
``recording.trashed`` queued as a removal when ``QUORUM_ZOOM_FOLLOW_DELETES`` is on (its
kept event dropped first, so a download not yet done gives up).
Mounted only when ``QUORUM_ZOOM_SECRET_TOKEN`` is set.

Zoom's status row (``bot.connectors``, named ``zoom``) is what `quorum doctor`, `quorum
jobs` and ``/metrics`` show: the last event (its ``last_run``), events ``seen``, jobs
``queued``, removals queued (``forgotten``), and the last error (a refused request, an
event that could not be queued; the worker adds a failed download)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from adapters.http.problems import BUSY
from bot.connectors import ConnectorStatuses, statuses_of, zoom
from bot.connectors.zoom_fetch import ZoomRecordings, url_of
from bot.errors import DatabaseUnavailable
from bot.jobs import Job, JobQueue
from bot.models import Actor
from retrieval.errors import QuorumError
from retrieval.models import check_kb

if TYPE_CHECKING:
    from adapters.http.served import Served

log = logging.getLogger("quorum.zoom")

PATH = "/hooks/zoom"
MAX_BODY = 128 * 1024  # a recording.completed with every file listed is a few KB
REFUSALS_EVERY_S = 10.0  # a flood of forged requests writes Zoom's status this often at most


def add_route(app: web.Application, server: Served) -> ZoomHook | None:
    """Mount ``POST /hooks/zoom`` when Zoom is set up; its hook."""
    if server.settings.zoom_secret_token is None:
        return None
    hook = ZoomHook(server)
    app.router.add_post(PATH, hook.receive)
    return hook


def _answer(status: int, message: str, **extra: Any) -> web.Response:
    return web.json_response(
        {"status" if status < 400 else "error": message, **extra}, status=status
    )


class ZoomHook:
    """Zoom's webhook requests, one at a time each, answered within Zoom's 3 seconds."""

    def __init__(self, server: Served) -> None:
        self.server = server
        token = server.settings.zoom_secret_token
        assert token is not None
        self.secret = token.get_secret_value()
        self.registered = False
        self.refused_at = 0.0
        self.running: set[asyncio.Task[None]] = set()  # jobs run here: no worker alive

    async def statuses(self) -> ConnectorStatuses | None:
        """Zoom's status rows, its own made once (None while the core starts)."""
        services = self.server.services
        if services is None:
            return None
        statuses = statuses_of(services.sessions)
        if not self.registered:
            settings = self.server.settings
            await statuses.register(zoom.NAME, "zoom", settings.zoom_kb or settings.default_kb)
            self.registered = True
        return statuses

    async def receive(self, request: web.Request) -> web.Response:
        """One webhook request; 503 while the session database is busy (its statuses and
        the event live there), and Zoom sends the event again."""
        try:
            return await self._receive(request)
        except DatabaseUnavailable as exc:
            log.warning("a Zoom webhook was not handled: %s", exc)
            return _answer(503, BUSY)

    async def _receive(self, request: web.Request) -> web.Response:
        if (request.content_length or 0) > MAX_BODY:
            return _answer(413, f"A Zoom event is at most {MAX_BODY // 1024} KiB.")
        body = bytearray()
        async for chunk in request.content.iter_any():
            body += chunk
            if len(body) > MAX_BODY:
                return _answer(413, f"A Zoom event is at most {MAX_BODY // 1024} KiB.")
        why = zoom.refusal(
            self.secret,
            request.headers.get("x-zm-request-timestamp"),
            request.headers.get("x-zm-signature"),
            bytes(body),
            time.time(),
        )
        statuses = await self.statuses()
        if why is not None:
            log.warning("refused a Zoom webhook from %s: %s", request.remote, why)
            if statuses is not None and time.monotonic() - self.refused_at > REFUSALS_EVERY_S:
                self.refused_at = time.monotonic()
                await statuses.error(zoom.NAME, f"A webhook request was refused: {why}")
            return _answer(401, why)
        try:
            event = json.loads(body)
            if not isinstance(event, dict):
                raise ValueError("not an object")
            answer = await self._event(event, statuses)
        except (ValueError, zoom.BadEvent) as exc:
            message = str(exc) if isinstance(exc, zoom.BadEvent) else "The body is not JSON."
            if statuses is not None:
                await statuses.error(zoom.NAME, f"A Zoom event could not be read: {message}")
            return _answer(400, message)
        if statuses is not None and answer.status < 400:
            await statuses.ran(zoom.NAME)  # the last event, handled
        return answer

    async def _event(
        self, event: dict[str, Any], statuses: ConnectorStatuses | None
    ) -> web.Response:
        name = event.get("event")
        if name == zoom.VALIDATION:
            return web.json_response(zoom.challenge(self.secret, event))
        services = self.server.services
        if services is None or statuses is None:
            return _answer(503, "Quorum is starting; Zoom will send it again.")
        settings = self.server.settings
        try:
            if name == zoom.COMPLETED:
                rec = zoom.recording(event, settings.zoom_download_hosts)
                kb = check_kb(zoom.kb_of(settings, rec.host))
                await statuses.count(zoom.NAME, "seen")
                # The event waits in the database for the job that downloads its files.
                await ZoomRecordings(services.sessions).keep(kb, rec)
                asked = time.time()
                by = Actor("zoom", rec.host)
                job = await services.jobs.add_one(kb, url_of(rec), rec.digest, by)
                new = job.created_at >= asked  # else Zoom's retry of one being handled
                if new:
                    await statuses.count(zoom.NAME, "queued")
                    self._settle(services.jobs, job)
                return _answer(200, "queued" if new else "already queued", job=job.id)
            if name in zoom.DELETED:
                if not settings.zoom_follow_deletes:
                    return _answer(200, "ignored (QUORUM_ZOOM_FOLLOW_DELETES is off)")
                obj = zoom.meeting(event)
                host = str(obj.get("host_email") or "")
                kb = check_kb(zoom.kb_of(settings, host))
                sid = zoom.source_id(obj["uuid"])
                # Its download job, pending or retried, finds no event and gives up (the
                # removal alone finds no source yet and leaves the event to be indexed).
                await ZoomRecordings(services.sessions).drop(sid)
                job = await services.jobs.remove(kb, sid, Actor("zoom", host))
                await statuses.count(zoom.NAME, "forgotten")
                self._settle(services.jobs, job)
                return _answer(200, "queued", job=job.id)
        except zoom.BadEvent:
            raise
        except QuorumError as exc:  # a wrong setting (QUORUM_ZOOM_KBS), the database down
            log.warning("a Zoom %s event was not queued: %s", name, exc)
            await statuses.error(zoom.NAME, f"A Zoom {name} event was not queued: {exc}")
            return _answer(503, str(exc))
        return _answer(200, "ignored")

    def _settle(self, jobs: JobQueue, job: Job) -> None:
        """Where the bot runs its own jobs (no worker processes, on SQLite), run this one
        after answering Zoom; with workers it is theirs."""
        if not jobs.inline or jobs.writer is None:
            return

        async def run() -> None:
            try:
                await jobs.settle([job])
            except Exception:  # the job's row says why; the log keeps the traceback
                log.exception("running Zoom's job %s here failed", job.id)

        task = asyncio.create_task(run(), name=f"quorum-zoom-job-{job.id}")
        self.running.add(task)
        task.add_done_callback(self.running.discard)

    async def stop(self) -> None:
        """Stop the jobs running here (each handed back to the queue by its runner)."""
        for task in list(self.running):
            task.cancel()
        await asyncio.gather(*self.running, return_exceptions=True)
