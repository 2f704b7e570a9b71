"""Forgetting a source wins against work already in flight for it: an upload of the same
source queued, or mid-transcription in a real ``quorum worker``, ends cancelled ("its
source was forgotten") and writes nothing back; a poll that read a job's end before the
forget does not write the item's plain row back, nor does a poll queuing a new version
as the forget lands; an upload after the forget is added.
SQLite and PostgreSQL, Weaviate: all real, the core as `quorum serve` runs it."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from bot.config import load_settings
from bot.connectors.folder import FolderFeed
from bot.connectors.items import Item, ItemTable, forget_key
from bot.connectors.poller import Poller
from bot.connectors.settings import Watched
from bot.connectors.status import ConnectorStatuses
from bot.jobs import JobQueue, JobTable
from bot.jobs.runner import Runner
from bot.models import Actor
from bot.sessions import SessionStore
from bot.sessions.sql import SqlSessions
from bot.wiring import CoreServices
from retrieval.store.weaviate import WeaviateStore
from tests import connectors_harness, test_jobs
from tests.connectors_harness import Parts, serving
from tests.test_forget_connectors import ADMIN, forget, holders, outside_the_audit
from tests.test_jobs import alisted, aquorum, listed, recording, until, worker

parts = connectors_harness.parts
env = test_jobs.env  # a worker's environment: the session Weaviate, this test's data dir

STEM = "layoffs-plan-2027"  # a file's name is a user's words
UPLOADER = Actor("slack", "U1")
STOPPED = "cancelled: its source was forgotten"
NOTES = "The zanzibar shipment arrives at the north dock; Marco owns the layoffs plan."
EDITED = NOTES + " The marzipan budget is cut by a third."


async def searchable(services: CoreServices, kb: str, words: str) -> bool:
    """A search for ``words`` finds the source, as `quorum search` would."""
    hits = await services.retrieval.search.search(kb, words, k=5)
    return any(h.source.id == STEM for h in hits)


async def queued_upload_ends_cancelled(parts: Parts, kb: str, tmp_path: Path, **more: Any) -> None:
    settings = load_settings(data_dir=tmp_path / "data", serve_workers=0, **more)
    async with serving(settings, parts) as services:
        inbox = settings.data_dir / "uploads" / kb / "by-slack-U1"
        inbox.mkdir(parents=True)
        notes = inbox / f"{STEM}.md"
        notes.write_text(NOTES)
        [first], _ = await services.jobs.add(kb, [notes], UPLOADER)
        [added] = await services.jobs.settle([first])
        assert (added.result, added.source_id) == ("added", STEM)

        notes.write_text(EDITED)  # uploaded again, edited; no worker has taken it yet
        [update], _ = await services.jobs.add(kb, [notes], UPLOADER)
        assert update.state == "queued"
        await forget(services, kb, STEM)
        [ended] = await services.jobs.settle([update])  # nothing left to run
        assert (ended.state, ended.error, ended.file) == ("cancelled", STOPPED, "(forgotten)")
        assert await parts.store.list_sources(kb) == []
        assert not await searchable(services, kb, "marzipan budget")
        assert not await searchable(services, kb, "zanzibar shipment north dock")
        assert outside_the_audit(await holders(services, STEM)) == []

        notes.write_text(EDITED)  # a fresh upload after the forget, on purpose: added
        [again], _ = await services.jobs.add(kb, [notes], UPLOADER)
        [readded] = await services.jobs.settle([again])
        assert (readded.state, readded.result, readded.source_id) == ("done", "added", STEM)
        assert await searchable(services, kb, "marzipan budget")


async def test_a_queued_upload_of_a_forgotten_source_is_cancelled(
    parts: Parts, kb: str, tmp_path: Path, session_database: dict[str, str]
) -> None:
    await queued_upload_ends_cancelled(parts, kb, tmp_path, **session_database)


async def test_a_queued_job_naming_another_source_is_left_to_run(
    parts: Parts, kb: str, tmp_path: Path
) -> None:
    # A watched folder's `team-a/notes.md` becomes `team-a-notes`: forgetting `notes` (a
    # file of the same name uploaded in chat) must not cancel it.
    settings = load_settings(data_dir=tmp_path / "data", serve_workers=0)
    async with serving(settings, parts) as services:
        inbox = settings.data_dir / "uploads" / kb / "by-slack-U1"
        inbox.mkdir(parents=True)
        (inbox / "notes.md").write_text("The quillet rota starts on Monday.")
        [chat], _ = await services.jobs.add(kb, [inbox / "notes.md"], UPLOADER)
        assert (await services.jobs.settle([chat]))[0].source_id == "notes"
        team = tmp_path / "watched" / "team-a"
        team.mkdir(parents=True)
        (team / "notes.md").write_text("Team A moves the forklift audit to Friday.")
        other = await services.jobs.add_one(
            kb, str(team / "notes.md"), "d1", UPLOADER, source_id="team-a-notes"
        )
        await forget(services, kb, "notes")
        [kept] = await services.jobs.settle([other])
        assert (kept.state, kept.result, kept.source_id) == ("done", "added", "team-a-notes")
        assert [i.source.id for i in await parts.store.list_sources(kb)] == ["team-a-notes"]


async def test_a_transcription_running_when_its_source_is_forgotten_keeps_nothing(
    env: dict[str, str], store: WeaviateStore, tmp_path: Path, kb: str
) -> None:
    env = {**env, "QUORUM_DIARIZE": "off"}  # transcribed, no more: a busy box still keeps up
    data = Path(env["QUORUM_DATA_DIR"])
    notes = data / "uploads" / kb / "by-slack-U1" / f"{STEM}.md"
    notes.parent.mkdir(parents=True)
    notes.write_text(NOTES)
    code, _, err = await aquorum("ingest", str(notes), "--kb", kb)  # no worker: run here
    assert code == 0, err
    # The meeting itself, uploaded by someone else: the same source (its file's name).
    upload = recording(data / "uploads" / kb / "by-slack-U2", f"{STEM}.wav")
    async with SessionStore.open(load_settings(data_dir=data).sessions_path) as sessions:
        [job], _ = await JobQueue(JobTable(sessions.driver)).add(kb, [upload], UPLOADER)

    async with worker(env, tmp_path / "worker.log"):
        await until(lambda: listed(kb)[0]["progress"] > 0, 180, 0.1)  # mid-transcription
        code, out, err = await aquorum("remove", STEM, "--kb", kb)
        assert code == 0 and f"Removed {STEM}" in out, err
        await until(lambda: not upload.exists(), 60)  # the worker stopped, its upload gone

    ended = {j["id"]: j for j in await alisted(kb)}[job.id]
    assert (ended["state"], ended["error"], ended["file"]) == ("cancelled", STOPPED, "(forgotten)")
    assert await store.list_sources(kb) == []
    code, out, err = await aquorum("search", "zanzibar shipment north dock", "--kb", kb, "--json")
    assert code == 0 and json.loads(out) == [], err
    transcripts = data / "transcripts"
    assert not transcripts.exists() or list(transcripts.iterdir()) == []
    async with SessionStore.open(load_settings(data_dir=data).sessions_path) as sessions:
        services = cast(CoreServices, SimpleNamespace(sessions=sessions))
        assert outside_the_audit(await holders(services, STEM)) == []


async def write_lands_after_the_forget(
    parts: Parts, kb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **more: Any
) -> None:
    settings = load_settings(data_dir=tmp_path / "data", serve_workers=0, **more)
    notes = tmp_path / "notes" / f"{STEM}.md"  # a user's own file, `quorum ingest`ed
    notes.parent.mkdir()
    notes.write_text(NOTES)
    async with serving(settings, parts) as services:
        [first], _ = await services.jobs.add(kb, [notes], UPLOADER)
        assert (await services.jobs.settle([first]))[0].result == "added"
        notes.write_text(EDITED)
        [update], _ = await services.jobs.add(kb, [notes], UPLOADER)
        claimed = await services.jobs.table.claim("write", "w1", 30.0, job_id=update.id)
        assert claimed is not None  # running: read, embedded, about to be written
        write = services.writer.add

        async def forgotten_first(*args: Any, **kwargs: Any) -> Any:
            # The removal comes between the job's start and its write, which lands after
            # the forget's purge (too late for a heartbeat to stop it).
            await services.holdings.forget(kb, STEM, ADMIN)
            return await write(*args, **kwargs)

        monkeypatch.setattr(services.writer, "add", forgotten_first)
        await Runner(services.writer, services.jobs.table, "w1").run([claimed])
        ended = await services.jobs.table.get(update.id)
        assert ended is not None
        assert (ended.state, ended.error, ended.file) == ("cancelled", STOPPED, "(forgotten)")
        assert await parts.store.list_sources(kb) == []
        assert not await searchable(services, kb, "marzipan budget")
        assert outside_the_audit(await holders(services, STEM)) == []


async def test_a_write_landing_after_the_forget_is_removed_again(
    parts: Parts,
    kb: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    session_database: dict[str, str],
) -> None:
    await write_lands_after_the_forget(parts, kb, tmp_path, monkeypatch, **session_database)


async def poll_read_before_the_forget(parts: Parts, kb: str, tmp_path: Path, **more: Any) -> None:
    folder = tmp_path / "recordings"
    folder.mkdir()
    call = folder / f"{STEM}.md"
    call.write_text(NOTES)
    settings = load_settings(data_dir=tmp_path / "data", serve_workers=0, **more)
    async with serving(settings, parts) as services:  # no connector: this test is the poll
        sessions = services.sessions
        assert isinstance(sessions, SqlSessions)
        db = sessions.driver
        await ConnectorStatuses(db).register("folder:x", "folder", kb)
        [job], _ = await services.jobs.add(kb, [call], Actor("folder", "folder:x"))
        items = ItemTable(db, forget_key(settings))
        read = Item("folder:x", call.name, 10, "1", "d", "queued", job.id)
        await items.put(read)  # what the poll read before its job ended
        [done] = await services.jobs.settle([job])
        assert (done.result, done.source_id) == ("added", STEM)

        await forget(services, kb, STEM)
        feed = SimpleNamespace(name="folder:x", kb=kb, kind="folder")
        poller = Poller(cast(Any, feed), ConnectorStatuses(db), items, services.jobs, "me")
        await poller._ended(read)  # the poll goes on with what it read: the job's end
        assert call.name not in await items.all("folder:x")  # the forgotten row won
        assert outside_the_audit(await holders(services, call.name)) == []


async def test_a_poll_in_flight_leaves_a_forgotten_item_forgotten(
    parts: Parts, kb: str, tmp_path: Path, session_database: dict[str, str]
) -> None:
    await poll_read_before_the_forget(parts, kb, tmp_path, **session_database)


async def forget_lands_while_a_version_is_queued(
    parts: Parts, kb: str, tmp_path: Path, **more: Any
) -> None:
    folder = tmp_path / "recordings"
    folder.mkdir()
    call = folder / f"{STEM}.md"
    call.write_text(NOTES)
    settings = load_settings(data_dir=tmp_path / "data", serve_workers=0, **more)
    async with serving(settings, parts) as services:  # no connector: this test is the poll
        sessions = services.sessions
        assert isinstance(sessions, SqlSessions)
        db, jobs = sessions.driver, services.jobs
        feed = FolderFeed(Watched(folder, kb), 60.0, False)
        statuses, items = ConnectorStatuses(db), ItemTable(db, forget_key(settings))
        await statuses.register(feed.name, feed.kind, kb)
        poller = Poller(feed, statuses, items, jobs, "me")
        await poller.poll()
        await poller.poll()  # stable: queued
        await jobs.settle(await jobs.table.listing(kb, 10))
        await poller.poll()  # its end read: the row names the source
        assert (await items.all(feed.name))[str(call)].source_id == STEM

        call.write_text(EDITED)
        await poller.poll()
        queue = feed.queue

        async def forgotten_as_queued(*args: Any, **kw: Any) -> Any:
            # The new version's job is queued; the forget lands before its row is written.
            job = await queue(*args, **kw)
            await forget(services, kb, STEM)
            return job

        feed.queue = forgotten_as_queued  # type: ignore[method-assign]
        await poller.poll()
        feed.queue = queue  # type: ignore[method-assign]
        await poller.poll()  # the cancelled job's end, were the plain row back
        assert str(call) not in await items.all(feed.name)  # the forgotten row won
        state = await statuses.get(feed.name)
        assert state is not None and state.last_error is None
        assert outside_the_audit(await holders(services, call.name)) == []
        assert outside_the_audit(await holders(services, STEM)) == []

        call.write_text(EDITED + " The kiln moves to hall B.")  # changed after: taken in
        await poller.poll()
        await poller.poll()
        again = max(await jobs.table.listing(kb, 10), key=lambda j: j.id)
        assert (again.kind, again.state, again.source_id) == ("add", "queued", STEM)


async def test_a_forget_landing_as_a_poll_queues_a_version_wins(
    parts: Parts, kb: str, tmp_path: Path, session_database: dict[str, str]
) -> None:
    await forget_lands_while_a_version_is_queued(parts, kb, tmp_path, **session_database)
