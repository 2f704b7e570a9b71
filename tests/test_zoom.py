"""Zoom cloud recordings arrive by themselves: an emulator of Zoom signs and sends its
webhooks to the real ``POST /hooks/zoom`` of ``quorum serve``'s HTTP server, and serves
the recording's files behind the event's download token. A worker (the real one, in this
process) runs the ``zoom://`` jobs through the one write path; Weaviate, SQLite, the media
store, Whisper and Chromium are real."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
import pytest_asyncio
from playwright.async_api import Browser
from rich.console import Console

from adapters.chat.announce import announcer
from adapters.cli.jobs import connectors_table
from adapters.doctor import check_connectors
from adapters.http.problems import BUSY
from bot.config import load_settings
from bot.connectors import statuses_of
from bot.connectors import zoom as zoom_events
from bot.connectors.zoom_fetch import ZoomFetcher, ZoomRecordings
from bot.jobs import Job, Limits
from bot.jobs.worker import Worker
from bot.models import Actor
from bot.wiring import holdings_of
from bot.write import Unfetchable
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import ConfigError
from retrieval.models import SearchFilters, Source
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests import test_sessions
from tests.connectors_harness import until
from tests.emulators.slack import BOT_TOKEN, SIGNING_SECRET, SlackEmulator
from tests.emulators.zoom import ZoomEmulator
from tests.media_fixtures import speak, to_m4a
from tests.pages_harness import Served, chromium, opened, serving
from tests.test_database_busy import held
from tests.test_sessions import Opener

open_store = test_sessions.open_store  # a store on SQLite, then on PostgreSQL

SECRET = "zoom-secret-token-for-tests"
HOST = "priya@example.com"

LINES = [
    ("Priya Raman", "Good morning. Today we decide where the billing cluster moves."),
    ("Tomás Ortega", "The Frankfurt region has the lowest latency for our European customers."),
    ("Priya Raman", "Then we move the billing cluster to Frankfurt next month."),
    ("Tomás Ortega", "I will write the migration runbook before Friday."),
    ("Priya Raman", "Good. The second topic is the on-call rotation for December."),
    ("Tomás Ortega", "Marta takes the first week of December and I take the second."),
]


def zoom_vtt(lines: list[tuple[str, str]], starts: tuple[float, ...]) -> bytes:
    """Zoom's transcript: WebVTT, numbered cues, ``Name: text``."""
    cues = ["WEBVTT", ""]
    for n, ((who, said), start) in enumerate(zip(lines, starts, strict=True), 1):
        a, b = start, start + 3.5
        cues += [str(n), f"{_clock(a)} --> {_clock(b)}", f"{who}: {said}", ""]
    return "\n".join(cues).encode()


def _clock(s: float) -> str:
    return f"{int(s // 3600):02d}:{int(s % 3600 // 60):02d}:{s % 60:06.3f}"


@dataclass
class World:
    served: Served
    zoom: ZoomEmulator
    slack: SlackEmulator
    kb: str
    m4a: bytes
    vtt: bytes
    browser: Browser


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[World]:
    """``quorum serve``'s HTTP server and core with Zoom set up, a worker running its jobs
    (downloads stall after 1 s; one try each), summaries posted to a Slack channel."""
    folder = tmp_path_factory.mktemp("zoom")
    kb = f"z{uuid.uuid4().hex[:12]}"
    spoken = speak(folder / "sync.wav", [said for _, said in LINES], gap_s=1.0)
    m4a = to_m4a(spoken.path, folder / "sync.m4a").read_bytes()
    vtt = zoom_vtt(LINES, spoken.starts)
    async with ZoomEmulator(SECRET) as zoom, SlackEmulator() as slack:
        settings = load_settings(
            data_dir=folder / "data",
            zoom_secret_token=SECRET,
            zoom_kb=kb,
            zoom_kbs=f"someone@example.com:other{kb}",
            zoom_download_stall_s=1.0,
            zoom_download_hosts="127.0.0.1",
            chunk_seconds=8,
            chunk_overlap_seconds=2,
            job_attempts=1,
            post_summaries=f"slack:C0GENERAL={kb},slack:C0RANDOM=other{kb}",
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_url=slack.api_url,
        )
        zoom.stall_s = 3.0
        async with serving(settings, weaviate_endpoint, store, embedder) as served:
            zoom.target = f"{served.url}/hooks/zoom"
            services = served.services
            services.writer.add_announcer(announcer(settings, services.retrieval.search))
            worker = Worker(
                services.writer,
                services.jobs.table,
                Limits(timeout_s=20, attempts=1),
            )
            running = asyncio.create_task(worker.run())
            try:
                async with chromium() as browser:
                    yield World(served, zoom, slack, kb, m4a, vtt, browser)
            finally:
                running.cancel()
                await asyncio.gather(running, return_exceptions=True)


async def finished(world: World, job_id: int) -> Job:
    async def done() -> Job | None:
        job = await world.served.services.jobs.table.get(job_id)
        return job if job is not None and job.state in ("done", "failed") else None

    return await until(done, 180)


async def all_jobs(world: World) -> list[Job]:
    return await world.served.services.jobs.table.listing(limit=1000)


async def test_url_validation_is_answered_only_to_a_signed_request(world: World) -> None:
    assert await world.zoom.validate()
    # Unsigned, the challenge would sign anything an attacker chose: it is refused.
    status, answer = await world.zoom.send(
        {"event": "endpoint.url_validation", "payload": {"plainToken": "x"}}, secret="guess"
    )
    assert status == 401 and "signature" in answer["error"]


async def test_a_wrong_signature_or_a_stale_request_is_refused_and_nothing_is_queued(
    world: World,
) -> None:
    before = len(await all_jobs(world))
    event = world.zoom.recording("Forged sync", HOST, vtt=world.vtt)
    status, answer = await world.zoom.send(event, secret="not-the-secret")
    assert status == 401 and answer["error"].startswith("The signature does not match")
    status, answer = await world.zoom.send(event, at=time.time() - 301)
    assert status == 401 and "more than 5 minutes old" in answer["error"]
    status, answer = await world.zoom.send(event, signature="")
    assert status == 401 and "not signed" in answer["error"]
    async with aiohttp.ClientSession() as http:  # a body past the bound, before any check
        async with http.post(world.zoom.target, data=b"{" + b" " * 200_000 + b"}") as resp:
            assert resp.status == 413
    # Whoever runs Quorum sees why in doctor (a wrong QUORUM_ZOOM_SECRET_TOKEN, say).
    zoom_row = await statuses_of(world.served.services.sessions).get("zoom")
    assert zoom_row is not None and zoom_row.last_error == (
        "A webhook request was refused: The signature does not match QUORUM_ZOOM_SECRET_TOKEN."
    )
    # Signed (say, with a leaked secret) but naming a host that is not Zoom's: refused.
    elsewhere = world.zoom.recording("Elsewhere", HOST, vtt=world.vtt)
    files = elsewhere["payload"]["object"]["recording_files"]
    files[0]["download_url"] = "http://169.254.169.254/latest/meta-data/"
    status, answer = await world.zoom.send(elsewhere)
    assert status == 400 and "QUORUM_ZOOM_DOWNLOAD_HOSTS" in answer["error"]
    assert len(await all_jobs(world)) == before
    assert not world.zoom.downloads
    zoom_row = await statuses_of(world.served.services.sessions).get("zoom")
    assert zoom_row is not None and zoom_row.counts.seen == 0
    assert zoom_row.last_error == (
        "A Zoom event could not be read: TRANSCRIPT's download URL is not on "
        "QUORUM_ZOOM_DOWNLOAD_HOSTS; refused."
    )


async def test_a_recording_becomes_searchable_with_zoom_speakers_plays_and_is_announced(
    world: World,
) -> None:
    services = world.served.services
    event = world.zoom.recording("Billing region sync", HOST, m4a=world.m4a, vtt=world.vtt)
    sent = time.monotonic()
    status, answer = await world.zoom.send(event)
    assert time.monotonic() - sent < 3.0  # Zoom wants its answer within 3 s: nothing waits
    assert status == 200 and answer["status"] == "queued"
    again_status, again = await world.zoom.send(event)  # Zoom delivers it twice
    assert again_status == 200 and again["job"] == answer["job"]
    job = await finished(world, answer["job"])
    assert job.state == "done", job.error
    # Downloaded with the event's token, each file once.
    assert {d.how for d in world.zoom.downloads if d.status == 200} == {"bearer"}

    hits = await services.retrieval.search.search(world.kb, "where does the billing cluster move")
    assert hits and hits[0].source.title == "Billing region sync"
    source = hits[0].source
    assert source.recorded_at is not None and source.recorded_at.isoformat() == "2026-11-20"
    listed = await services.retrieval.store.list_sources(world.kb)
    stored = next(i.source for i in listed if i.source.id == source.id)
    assert set(stored.speakers) == {"Priya Raman", "Tomás Ortega"}
    assert stored.description == f"Zoom meeting hosted by {HOST}"
    assert stored.path == job.file == f"zoom://{stored.id}/billing-region-sync.vtt"  # not a temp
    said_by = await services.retrieval.search.search(
        world.kb, "migration runbook", SearchFilters(speaker="Tomás Ortega")
    )
    assert said_by and "runbook" in said_by[0].segment.text
    # Its page plays the recording Zoom held, from Quorum's own media store.
    assert source.view is not None
    page = await opened(world.browser, source.view)
    assert await page.evaluate("() => document.getElementById('media').duration") > 10
    async with aiohttp.ClientSession() as http:
        async with http.get(source.view.split("#")[0] + "/media") as resp:
            assert resp.status in (200, 206) and await resp.read() == world.m4a
    await page.close()
    # Nothing of the download is left outside the store.
    staging = services.settings.data_dir / "connectors" / "zoom"
    assert not [p for p in staging.rglob("*") if p.is_file()]
    # The team's channel hears of it, as of an upload.
    posted = [
        m for m in world.slack.top_level("C0GENERAL") if "Billing region sync" in str(m.blocks)
    ]
    assert len(posted) == 1
    assert not [m for m in world.slack.top_level("C0RANDOM") if "Billing" in str(m.blocks)]

    # The same event again, after it was added: still one source, unchanged.
    status, answer = await world.zoom.send(event)
    assert status == 200 and answer["status"] == "queued"
    job = await finished(world, answer["job"])
    assert job.state == "done" and job.result == "unchanged"
    sources = await services.retrieval.store.list_sources(world.kb)
    assert [i.source.title for i in sources].count("Billing region sync") == 1

    # Deleted in Zoom: kept while QUORUM_ZOOM_FOLLOW_DELETES is off, forgotten once on.
    status, answer = await world.zoom.send(world.zoom.deleted(event))
    assert status == 200 and answer["status"].startswith("ignored")
    assert len(await services.retrieval.store.list_sources(world.kb)) == len(sources)
    services.settings.zoom_follow_deletes = True
    try:
        status, answer = await world.zoom.send(world.zoom.deleted(event, "recording.trashed"))
        assert status == 200 and answer["status"] == "queued"
        job = await finished(world, answer["job"])
        assert job.state == "done" and job.result == "removed"
    finally:
        services.settings.zoom_follow_deletes = False
    left = await services.retrieval.store.list_sources(world.kb)
    assert "Billing region sync" not in [i.source.title for i in left]

    # Zoom's status: its last event, counts, no error; in doctor, `quorum jobs`, /metrics.
    zoom_row = await statuses_of(services.sessions).get("zoom")
    assert zoom_row is not None and zoom_row.last_error is None
    assert zoom_row.last_run is not None and time.time() - zoom_row.last_run < 60
    assert zoom_row.counts.seen >= 2 and zoom_row.counts.queued >= 2
    assert zoom_row.counts.forgotten == 1
    [row] = [c for c in await check_connectors(services.settings) if "zoom" in c.name]
    assert row.name == "connector zoom" and row.status == "ok", row
    assert f"zoom -> {world.kb}: last run" in row.detail and "forgotten 1" in row.detail
    shown = Console(width=200, record=True)
    shown.print(connectors_table([zoom_row]))
    assert re.search(rf"zoom +│ {world.kb} +│ \d+ s ago .*│ 1 +│", shown.export_text())
    metrics = world.served.server.metrics
    assert metrics is not None
    await metrics.jobs().read(services.jobs.table)
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{world.served.url}/metrics") as resp:
            text = await resp.text()
    labels = f'connector="zoom",event="forgotten",kb="{world.kb}",kind="zoom"'
    assert f"quorum_connector_items_total{{{labels}}} 1.0" in text


async def test_only_audio_is_transcribed_and_the_host_is_its_participant(world: World) -> None:
    event = world.zoom.recording("Audio only standup", HOST, m4a=world.m4a)
    status, answer = await world.zoom.send(event)
    assert status == 200
    job = await finished(world, answer["job"])
    assert job.state == "done", job.error
    hits = await world.served.services.retrieval.search.search(
        world.kb, "Frankfurt latency European customers", SearchFilters(source="Audio only standup")
    )
    assert hits and hits[0].source.title == "Audio only standup"
    assert "Frankfurt" in " ".join(h.segment.text for h in hits)  # Whisper heard it
    listed = await world.served.services.retrieval.store.list_sources(world.kb)
    stored = next(i.source for i in listed if i.source.id == hits[0].source.id)
    assert stored.speakers == (HOST,)


@pytest.mark.parametrize(
    ("mode", "expired", "why"),
    [
        (
            "ok",
            True,
            "Zoom refused the transcript download (HTTP 404): its download token has expired",
        ),
        ("cut", False, "The transcript download from Zoom was cut off after"),
        ("slow", False, "The transcript download from Zoom stalled or ran out of time"),
    ],
)
async def test_a_failed_download_is_a_failed_job_with_one_sentence_and_nothing_added(
    world: World, mode: str, expired: bool, why: str
) -> None:
    topic = f"Broken download {mode}"
    event = world.zoom.recording(topic, HOST, m4a=world.m4a, vtt=world.vtt, mode=mode)
    if expired:
        world.zoom.expire(event)
    status, answer = await world.zoom.send(event)
    assert status == 200
    job = await finished(world, answer["job"])
    assert job.state == "failed" and job.error is not None
    assert why in job.error, job.error
    assert "Traceback" not in job.error and "\n" not in job.error
    zoom_row = await statuses_of(world.served.services.sessions).get("zoom")
    assert zoom_row is not None and zoom_row.last_error is not None
    assert zoom_row.last_error.startswith(f"{topic}: {why}")
    titles = [
        i.source.title for i in await world.served.services.retrieval.store.list_sources(world.kb)
    ]
    assert topic not in titles
    # A download no retry helps lets its kept event (and its token) go at once.
    kept = ZoomRecordings(world.served.services.sessions)
    sid = zoom_events.source_id(event["payload"]["object"]["uuid"])
    assert (await kept.get(sid) is None) == expired


async def test_a_recording_deleted_in_zoom_while_it_downloads_is_not_indexed(
    world: World,
) -> None:
    services = world.served.services
    topic = "Deleted mid download"
    event = world.zoom.recording(topic, HOST, vtt=world.vtt, mode="held")
    fid = event["payload"]["object"]["recording_files"][0]["id"]
    world.zoom.release.clear()
    services.settings.zoom_follow_deletes = True
    try:
        status, answer = await world.zoom.send(event)
        assert status == 200

        async def downloading() -> bool:
            return any(d.file == fid for d in world.zoom.downloads)

        await until(downloading, 30)
        status, _ = await world.zoom.send(world.zoom.deleted(event))
        assert status == 200
    finally:
        services.settings.zoom_follow_deletes = False
        world.zoom.release.set()
    job = await finished(world, answer["job"])
    assert job.state == "failed" and job.error is not None
    assert "the recording was deleted in Zoom" in job.error, job.error
    titles = [i.source.title for i in await services.retrieval.store.list_sources(world.kb)]
    assert topic not in titles
    sid = zoom_events.source_id(event["payload"]["object"]["uuid"])
    assert await ZoomRecordings(services.sessions).get(sid) is None


async def test_a_signature_with_a_byte_past_ascii_is_refused_without_a_traceback(
    world: World,
) -> None:
    where = urlsplit(world.zoom.target)
    assert where.hostname is not None and where.port is not None
    reader, writer = await asyncio.open_connection(where.hostname, where.port)
    writer.write(
        b"POST /hooks/zoom HTTP/1.1\r\nHost: quorum\r\nContent-Type: application/json\r\n"
        b"x-zm-request-timestamp: %d\r\nx-zm-signature: v0=\xff\r\n"
        b"Content-Length: 2\r\nConnection: close\r\n\r\n{}" % int(time.time())
    )
    answer = await reader.read()
    writer.close()
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert b"The signature does not match QUORUM_ZOOM_SECRET_TOKEN." in answer


async def test_a_redirect_is_followed_only_to_zoom_s_hosts_and_the_token_stays_home(
    world: World,
) -> None:
    # To Zoom's storage on an allowed host: followed, with the token, and added.
    stored = world.zoom.recording("Redirected to storage", HOST, vtt=world.vtt)
    fid = stored["payload"]["object"]["recording_files"][0]["id"]
    world.zoom.files[f"s{fid}"] = world.zoom.files[fid]
    world.zoom.redirects[fid] = f"{world.zoom.url}/rec/download/s{fid}"
    status, answer = await world.zoom.send(stored)
    assert status == 200
    job = await finished(world, answer["job"])
    assert job.state == "done", job.error
    assert [d.how for d in world.zoom.downloads if d.file == f"s{fid}"] == ["bearer"]
    # Elsewhere (a host not on QUORUM_ZOOM_DOWNLOAD_HOSTS): refused before any request.
    away = world.zoom.recording("Redirected away", HOST, vtt=world.vtt)
    fid = away["payload"]["object"]["recording_files"][0]["id"]
    port = urlsplit(world.zoom.url).port
    world.zoom.redirects[fid] = f"http://localhost:{port}/rec/download/away{fid}"
    status, answer = await world.zoom.send(away)
    assert status == 200
    job = await finished(world, answer["job"])
    assert job.state == "failed" and job.error is not None
    assert job.error == (
        f"Zoom redirected the transcript download to localhost:{port}, which is not https "
        "on QUORUM_ZOOM_DOWNLOAD_HOSTS; refused."
    )
    assert not [d for d in world.zoom.downloads if d.file == f"away{fid}"]


async def test_a_job_sweeps_kept_events_older_than_two_days(world: World) -> None:
    """A kept event whose job never ran goes even when no new event arrives: the next
    Zoom job (here one whose event is gone) sweeps it."""
    services = world.served.services
    rec = zoom_events.recording(world.zoom.recording("Stale", HOST, vtt=b"t"), ["127.0.0.1"])
    kept = ZoomRecordings(services.sessions)
    await kept.keep(world.kb, rec)
    await kept.driver.execute(
        "UPDATE zoom_recordings SET received_at = ? WHERE source_id = ?",
        time.time() - 3 * 86_400,
        rec.source_id,
    )
    fetch = ZoomFetcher(services.settings, services.sessions)
    with pytest.raises(Unfetchable, match="no longer kept"):
        async with fetch("zoom://zoom-none/gone.vtt"):
            pass
    assert await kept.get(rec.source_id) is None


async def test_retention_s_holdings_forget_a_kept_zoom_event_too(world: World) -> None:
    """``quorum retention --apply`` builds its Holdings with ``holdings_of``: forgetting
    a Zoom source there drops its kept event (a redelivery awaiting its job)."""
    services = world.served.services
    event = world.zoom.recording("Retention sync", HOST, vtt=world.vtt)
    status, answer = await world.zoom.send(event)
    assert status == 200
    job = await finished(world, answer["job"])
    assert job.state == "done", job.error
    rec = zoom_events.recording(event, ["127.0.0.1"])
    kept = ZoomRecordings(services.sessions)
    await kept.keep(world.kb, rec)  # delivered again, its job not yet run
    holdings = holdings_of(services.settings, services.retrieval, services.sessions)
    forgotten = await holdings.forget(world.kb, rec.source_id, Actor("cli", "retention"))
    assert forgotten.passages > 0
    assert await kept.get(rec.source_id) is None


async def test_the_emulator_refuses_a_download_without_the_token(world: World) -> None:
    event = world.zoom.recording("Token check", HOST, vtt=world.vtt)
    url = event["payload"]["object"]["recording_files"][0]["download_url"]
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as resp:
            assert resp.status == 401
        async with http.get(url, params={"access_token": event["download_token"]}) as resp:
            assert resp.status == 200 and await resp.read() == world.vtt


async def test_a_host_listed_in_zoom_kbs_goes_to_its_own_knowledge_base(world: World) -> None:
    event = world.zoom.recording("Sales review", "Someone@example.com", vtt=world.vtt)
    status, answer = await world.zoom.send(event)
    assert status == 200
    job = await finished(world, answer["job"])
    assert job.state == "done" and job.kb == f"other{world.kb}"


async def test_without_worker_processes_serve_runs_zoom_jobs_itself(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path: Path,
    kb: str,
) -> None:
    """QUORUM_SERVE_WORKERS=0 on SQLite: the bot runs its jobs, a Zoom recording's too."""
    settings = load_settings(
        data_dir=tmp_path / "data",
        zoom_secret_token=SECRET,
        zoom_kb=kb,
        zoom_download_hosts="127.0.0.1",
        serve_workers=0,
    )
    async with ZoomEmulator(SECRET) as zoom:
        async with serving(settings, weaviate_endpoint, store, embedder) as served:
            zoom.target = f"{served.url}/hooks/zoom"
            vtt = zoom_vtt(LINES, tuple(4.0 * n for n in range(len(LINES))))
            status, answer = await zoom.send(zoom.recording("Inline sync", HOST, vtt=vtt))
            assert status == 200

            async def done() -> Job | None:
                job = await served.services.jobs.table.get(answer["job"])
                return job if job is not None and job.state in ("done", "failed") else None

            job = await until(done, 120)
            assert job.state == "done", job.error
    titles = [i.source.title for i in await store.list_sources(kb)]
    assert titles == ["Inline sync"]


def test_audio_is_preferred_to_video_and_a_bad_host_mapping_names_its_setting() -> None:
    emulator = ZoomEmulator(SECRET, url="https://zoom.us")
    both = zoom_events.recording(
        emulator.recording("Both", HOST, mp4=b"v", m4a=b"a", vtt=b"t"), ["zoom.us"]
    )
    assert both.media is not None and both.media.kind == "M4A"
    assert both.transcript is not None and both.transcript.kind == "TRANSCRIPT"
    video = zoom_events.recording(emulator.recording("Video", HOST, mp4=b"v"), ["zoom.us"])
    assert video.media is not None and video.media.kind == "MP4" and video.transcript is None
    # One recording is one source, however often it is delivered; another is another.
    again = zoom_events.recording(
        emulator.recording("Both", HOST, m4a=b"a", meeting_uuid=both.uuid), ["zoom.us"]
    )
    assert again.source_id == both.source_id != video.source_id
    assert "/" not in both.source_id and both.source_id.startswith("zoom-")
    # The download token never travels in clear: http only to a loopback address.
    plain = ZoomEmulator(SECRET, url="http://zoom.us").recording("Plain", HOST, vtt=b"t")
    with pytest.raises(zoom_events.BadEvent, match="not on QUORUM_ZOOM_DOWNLOAD_HOSTS"):
        zoom_events.recording(plain, ["zoom.us"])
    assert zoom_events.allowed("http://127.0.0.1:8080/rec", ["127.0.0.1"])
    assert not zoom_events.allowed("http://127.0.0.1.example.com/rec", ["127.0.0.1.example.com"])
    with pytest.raises(ConfigError, match="QUORUM_ZOOM_KBS: 'sales' is not host-email:kb"):
        zoom_events.host_kbs("alice@example.com:eng,sales")


async def test_a_kept_event_survives_a_restart_and_goes_once_forgotten_on_both_databases(
    open_store: Opener,
) -> None:
    """The event waits in the database (SQLite, then PostgreSQL) for its job; a later
    delivery replaces it (a fresher token); forgetting the source drops it."""
    emulator = ZoomEmulator(SECRET, url="https://zoom.us")
    first = zoom_events.recording(emulator.recording("Kept", HOST, vtt=b"t"), ["zoom.us"])
    async with open_store() as sessions:
        await ZoomRecordings(sessions).keep("team", first)
        fresher = replace(first, token="a-fresher-token")
        await ZoomRecordings(sessions).keep("team", fresher)
    async with open_store() as sessions:  # as after a restart, or on another machine
        kept = ZoomRecordings(sessions)
        assert await kept.get(first.source_id) == fresher
        await kept.forget("other-kb", Source(first.source_id, "Kept", "audio"))
        assert await kept.get(first.source_id) == fresher  # another knowledge base's: kept
        await kept.forget("team", Source(first.source_id, "Kept", "audio"))
        assert await kept.get(first.source_id) is None


async def test_an_event_on_a_locked_database_is_503_and_queued_when_zoom_sends_it_again(
    world: World,
) -> None:
    event = world.zoom.recording("Locked standup", HOST, vtt=world.vtt)
    with held(Path(world.served.services.sessions.where)):
        status, answer = await world.zoom.send(event)
    assert (status, answer) == (503, {"error": BUSY})
    status, answer = await world.zoom.send(event)  # Zoom sends it again: nothing lost
    assert status == 200 and answer["status"] == "queued", answer
    assert (await finished(world, answer["job"])).state == "done"
