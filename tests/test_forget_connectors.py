"""Forgetting a source a connector made, as `quorum remove`, `/forget` and the API do it
(a removal job): afterwards no row of any table of the session database (SQLite,
PostgreSQL) names its file, key, path or topic, except the audit trail and the removal's
own record, which keep the source id asked for and its title; the next polls do not take
the same file or object in again, and a changed one is taken in again. A watched folder,
moto's S3 server, Zoom's emulator, Weaviate: all real, the core as `quorum serve` runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bot.config import load_settings
from bot.connectors import statuses_of
from bot.jobs import Job
from bot.models import Actor
from bot.sessions.sql import SqlSessions
from bot.wiring import CoreServices
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.ingest.metadata import slug
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests import connectors_harness, test_s3_bucket, test_sessions
from tests.connectors_harness import Parts, jobs_of, polls, serving, settled, status, until
from tests.emulators.zoom import ZoomEmulator
from tests.pages_harness import serving as serving_pages
from tests.test_jobs import listed, quorum
from tests.test_s3_bucket import S3Server
from tests.test_sessions import Opener
from tests.test_watch_folder import CUES, settings_for, vtt
from tests.test_zoom import HOST, LINES, SECRET, zoom_vtt

parts = connectors_harness.parts  # the session's store and model, as serve opens them
s3_server = test_s3_bucket.s3_server  # moto's server, in a process of its own
bucket = test_s3_bucket.bucket
open_store = test_sessions.open_store  # a store on SQLite, then on PostgreSQL

STEM = "layoffs-plan-2027"  # a file's name is a user's words
ADMIN = Actor("cli", "admin")


async def holders(services: CoreServices, needle: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Every (table, column, row) of the session database whose text holds ``needle``:
    each table the database has, so a new keeper of a source's name is caught too."""
    sessions = services.sessions
    assert isinstance(sessions, SqlSessions)
    db = sessions.driver
    if db.dialect == "sqlite":
        listed = await db.fetch("SELECT name FROM sqlite_master WHERE type = 'table'")
    else:
        listed = await db.fetch(
            "SELECT table_name AS name FROM information_schema.tables "
            "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        )
    found = []
    for table in sorted(r["name"] for r in listed):
        for row in await db.fetch(f'SELECT * FROM "{table}"'):
            for column, value in row.items():
                text = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
                if isinstance(text, str) and needle.lower() in text.lower():
                    found.append((table, column, row))
    return found


def outside_the_audit(found: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[str, str]]:
    """What holds a name besides the audit trail and a removal's own record."""
    return [
        (table, column)
        for table, column, row in found
        if table != "audit" and not (table == "jobs" and row["kind"] == "remove")
    ]


async def forget(services: CoreServices, kb: str, source_id: str) -> Job:
    """`quorum remove SOURCE`: a removal job, run to its end."""
    removal = await services.jobs.remove(kb, source_id, ADMIN)
    [done] = await services.jobs.settle([removal])
    assert (done.state, done.result) == ("done", "removed"), done.error
    return done


async def forgotten_file_stays_out_until_it_changes(
    parts: Parts, kb: str, tmp_path: Path, **more: object
) -> None:
    folder = tmp_path / "recordings"
    folder.mkdir()
    call = folder / f"{STEM}.vtt"
    call.write_text(vtt(CUES[:3]))
    name = f"folder:{folder}"
    async with serving(settings_for(folder, kb, tmp_path, **more), parts) as services:
        [added] = await settled(services, kb, 1)
        assert (added.result, added.source_id) == ("added", STEM)
        call.write_bytes(b"\xff\xfe\x00no transcript\x00")  # its update cannot be read
        failed = (await settled(services, kb, 2))[-1]
        assert failed.state == "failed"
        row = await until(lambda: _erring(services, name, call.name))
        assert call.name in (row.last_error or "")

        removal = await forget(services, kb, STEM)
        assert removal.file == STEM  # the removal's record keeps the id the admin typed
        await polls(services, name, 4)
        assert len(await jobs_of(services, kb)) == 3  # the same file stays out
        assert outside_the_audit(await holders(services, call.name)) == []
        assert outside_the_audit(await holders(services, STEM)) == []
        assert outside_the_audit(await holders(services, str(folder / STEM))) == []
        shown = [j.json() for j in await jobs_of(services, kb)][:2]  # quorum jobs --json
        assert [(j["file"], j["result"], j["source_id"]) for j in shown] == [
            ("(forgotten)", "added", None),
            ("(forgotten)", None, None),
        ]
        assert (await status(services, name)).last_error is None

        call.write_text(vtt(CUES[:3]))  # put back (a new version): taken in again
        again = (await settled(services, kb, 4))[-1]
        assert (again.kind, again.result, again.source_id) == ("add", "added", STEM)
        assert {i.source.id for i in await parts.store.list_sources(kb)} == {STEM}


async def _erring(services: CoreServices, name: str, word: str) -> Any:
    row = await status(services, name)
    return row if row.last_error and word in row.last_error else None


async def test_a_forgotten_file_leaves_no_row_naming_it_and_stays_out(
    parts: Parts, kb: str, tmp_path: Path, session_database: dict[str, str]
) -> None:
    await forgotten_file_stays_out_until_it_changes(parts, kb, tmp_path, **session_database)


async def test_a_forgotten_object_stays_out_of_the_bucket_s_polls_until_it_changes(
    parts: Parts, kb: str, s3_server: S3Server, bucket: str, tmp_path: Path
) -> None:
    s3 = s3_server.client()
    key = f"in/{STEM}.txt"
    body = test_s3_bucket.RETRO.read_bytes()
    s3.put_object(Bucket=bucket, Key=key, Body=body)
    settings = test_s3_bucket.settings_for(s3_server, bucket, kb, tmp_path, s3_follow_deletes=True)
    name = f"s3:{bucket}/in"
    async with serving(settings, parts) as services:
        [added] = await settled(services, kb, 1)
        assert (added.result, added.source_id) == ("added", STEM)
        await forget(services, kb, STEM)
        await polls(services, name, 4)
        assert len(await jobs_of(services, kb)) == 2  # the same object stays out
        assert outside_the_audit(await holders(services, key)) == []
        assert outside_the_audit(await holders(services, STEM)) == []

        edited = body + b"[00:09:00] Dana Kim: The zorbatron alarm is now paged.\n"
        s3.put_object(Bucket=bucket, Key=key, Body=edited)  # changed: taken in again
        again = (await settled(services, kb, 3))[-1]
        assert (again.kind, again.result, again.source_id) == ("add", "added", STEM)
        assert (await status(services, name)).counts.forgotten == 0


async def test_a_forgotten_zoom_recording_leaves_no_row_naming_its_topic(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path: Path,
    kb: str,
) -> None:
    topic = "Layoffs plan 2027"
    settings = load_settings(
        data_dir=tmp_path / "data",
        zoom_secret_token=SECRET,
        zoom_kb=kb,
        zoom_download_hosts="127.0.0.1",
        serve_workers=0,
        job_attempts=1,
    )
    async with ZoomEmulator(SECRET) as zoom:
        async with serving_pages(settings, weaviate_endpoint, store, embedder) as served:
            services = served.services
            zoom.target = f"{served.url}/hooks/zoom"
            text = zoom_vtt(LINES, tuple(4.0 * n for n in range(len(LINES))))
            event = zoom.recording(topic, HOST, vtt=text)
            code, answer = await zoom.send(event)
            assert code == 200
            added = await until(lambda: _ended(services, answer["job"]), 120)
            assert added.state == "done", added.error
            sid = added.source_id
            assert sid is not None
            # Delivered again with an expired token: a failed job, Zoom's error quoting it.
            again = zoom.recording(topic, HOST, vtt=text, meeting_uuid=_uuid(event))
            zoom.expire(again)
            code, answer = await zoom.send(again)
            assert code == 200
            failed = await until(lambda: _ended(services, answer["job"]), 120)
            assert failed.state == "failed"
            assert topic in ((await status(services, "zoom")).last_error or "")

            await forget(services, kb, sid)
            assert outside_the_audit(await holders(services, topic)) == []
            assert outside_the_audit(await holders(services, slug(topic))) == []
            assert (await status(services, "zoom")).last_error is None


async def _ended(services: CoreServices, job_id: int) -> Job | None:
    job = await services.jobs.table.get(job_id)
    return job if job is not None and job.state in ("done", "failed") else None


def _uuid(event: dict[str, Any]) -> str:
    uuid: str = event["payload"]["object"]["uuid"]
    return uuid


def test_quorum_jobs_shows_a_forgotten_file_as_forgotten_and_it_can_be_added_again(
    weaviate_env: Endpoint, tmp_path: Path, kb: str
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    memo = notes / f"{STEM}.txt"
    memo.write_text("[00:00:05] Ana Ruiz: The flumox cache evicts entries after an hour.\n")
    assert quorum("ingest", str(memo), "--kb", kb)[0] == 0
    [added] = listed(kb)
    assert (added["file"], added["source_id"]) == (memo.name, STEM)

    code, out, _ = quorum("remove", STEM, "--kb", kb)
    assert code == 0
    removal, forgotten = listed(kb)
    assert (removal["kind"], removal["file"], removal["source_id"]) == ("remove", STEM, STEM)
    assert (forgotten["id"], forgotten["file"], forgotten["result"]) == (
        added["id"],
        "(forgotten)",
        "added",
    )
    assert forgotten["source_id"] is None and forgotten["error"] is None
    code, out, _ = quorum("jobs", "--kb", kb)
    assert code == 0 and memo.name not in out and str(notes) not in out
    code, _, err = quorum("jobs", "retry", str(added["id"]))
    assert code == 1 and "was forgotten with its source: add the file again" in err

    assert quorum("ingest", str(memo), "--kb", kb)[0] == 0  # the same file, added afresh
    again = listed(kb)[0]
    assert (again["file"], again["result"], again["source_id"]) == (memo.name, "added", STEM)


async def test_an_error_or_a_cursor_quoting_a_forgotten_key_is_cleared_on_both_databases(
    open_store: Opener,
) -> None:
    key = f"in/{STEM}.txt"
    async with open_store() as sessions:
        statuses = statuses_of(sessions)
        for name in ("s3:calls/in", "s3:other/in"):
            await statuses.register(name, "s3", "team")
        await statuses.ran(
            "s3:calls/in", cursor=f"1.0\t{key}", error=f"{key} could not be ingested (bad)."
        )
        await statuses.ran("s3:other/in", cursor="1.0\tin/a.txt", error="in/b.txt is too big.")
        assert await statuses.forget([key, f"{STEM}.txt", "in"]) == 2  # "in": too short
        cleared, other = await statuses.get("s3:calls/in"), await statuses.get("s3:other/in")
        assert cleared is not None and (cleared.last_error, cleared.cursor) == (None, None)
        assert other is not None and other.last_error == "in/b.txt is too big."
        assert other.cursor == "1.0\tin/a.txt"
