"""QUORUM_WATCH as a team uses it: files copied into a watched folder become sources by
themselves, through jobs and the one write path, with the core `quorum serve` runs on the
session's Weaviate server and a SQLite file; the poll interval is tiny."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from adapters.chat.announce import Target, targets
from adapters.doctor import check_connectors
from bot.config import Settings, load_settings
from bot.connectors import Counts
from bot.connectors.settings import ConnectorSettings
from bot.wiring import CoreServices
from retrieval.errors import ConfigError
from retrieval.models import SearchFilters
from tests import connectors_harness
from tests.connectors_harness import (
    Parts,
    jobs_of,
    kept_media,
    polls,
    serving,
    settled,
    status,
    until,
    wav,
)
from tests.emulators.slack import BOT_TOKEN, SIGNING_SECRET, SlackEmulator

parts = connectors_harness.parts  # the session's store and model, as serve opens them

POLL_S = 0.15
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "recordings"
RETRO = EXAMPLES / "2024-02-27-cutover-retro.txt"
CUES = [
    f"00:00:{2 * n:02d}.000 --> 00:00:{2 * n + 2:02d}.000\n<v Ana>{line}\n"
    for n, line in enumerate(
        [
            "Welcome to the quarterly storage review.",
            "The flumox cache evicts entries after an hour.",
            "Our quibbler backups run at midnight every day.",
            "Ingrid will migrate the zorbatron cluster next week.",
            "We agreed the wobblefrost dashboard stays read-only.",
            "Finally the glimmerquartz budget was approved.",
        ]
    )
]


def vtt(cues: list[str]) -> str:
    return "WEBVTT\n\n" + "\n".join(cues)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "recordings"
    path.mkdir()
    return path


def settings_for(folder: Path, kb: str, tmp_path: Path, **more: object) -> Settings:
    return load_settings(
        data_dir=tmp_path / "data",
        serve_workers=0,
        watch=f"{folder}={kb}",
        watch_poll_s=POLL_S,
        **more,
    )


async def found(services: CoreServices, kb: str, query: str) -> list[str]:
    """The texts of the hits a search finds."""
    hits = await services.retrieval.search.search(kb, query, SearchFilters(), k=3)
    return [h.segment.text for h in hits]


def test_a_bad_watch_setting_is_one_sentence(tmp_path: Path) -> None:
    for value, says in [
        ("recordings=team", "is not an absolute folder path"),
        ("/srv/calls", "is not FOLDER=kb"),
        ("/srv/calls=no such kb", "Knowledge base names use letters"),
    ]:
        with pytest.raises(ConfigError, match=says) as caught:
            load_settings(data_dir=tmp_path, watch=value).platform(ConnectorSettings)
        assert str(caught.value).startswith("QUORUM_WATCH: ")


async def test_doctor_names_a_watched_folder_quorum_cannot_read(tmp_path: Path) -> None:
    missing = tmp_path / "not-mounted"
    settings = load_settings(data_dir=tmp_path / "data", watch=f"{missing}=team")
    [row] = await check_connectors(settings)
    assert (row.name, row.status) == (f"connector folder:{missing}", "FAIL")
    assert row.detail == (
        f"QUORUM_WATCH: {missing} is not a folder Quorum can read; create it, mount it, "
        "or fix the path."
    )
    missing.mkdir()
    [row] = await check_connectors(settings)
    assert row.status == "ok" and "not polled yet" in row.detail


async def test_a_file_copied_in_slowly_is_ingested_once_after_it_stops_growing(
    parts: Parts,
    kb: str,
    folder: Path,
    tmp_path: Path,
) -> None:
    settings = settings_for(folder, kb, tmp_path)
    name = f"folder:{folder}"
    async with serving(settings, parts, replicas=2) as services:
        call = folder / "storage-review.vtt"
        text = vtt(CUES).encode()
        with call.open("wb") as f:  # copied in chunks over several polls
            for start in range(0, len(text), len(text) // 8):
                f.write(text[start : start + len(text) // 8])
                f.flush()
                await asyncio.sleep(POLL_S * 0.7)
        [job] = await settled(services, kb, 1)
        await polls(services, name, 3)
        assert [j.id for j in await jobs_of(services, kb)] == [job.id]  # once, two replicas
        assert job.state == "done" and job.result == "added" and job.via == "folder"
        assert any("glimmerquartz" in t for t in await found(services, kb, "glimmerquartz"))
        row = await status(services, name)
        assert row.counts == Counts(seen=1, queued=1, failed=0, forgotten=0)
        assert row.last_error is None and row.next_run is not None
        assert row.holder in ("replica-0", "replica-1")


async def test_on_postgresql_two_replicas_ingest_each_file_once(
    parts: Parts,
    kb: str,
    folder: Path,
    tmp_path: Path,
    postgres_url: str,
) -> None:
    settings = settings_for(folder, kb, tmp_path, database_url=postgres_url)
    name = f"folder:{folder}"
    async with serving(settings, parts, replicas=2) as services:
        (folder / "a.vtt").write_text(vtt(CUES[:3]))
        (folder / "b.vtt").write_text(vtt(CUES[3:]))
        jobs = await settled(services, kb, 2)
        await polls(services, name, 3)
        assert len(await jobs_of(services, kb)) == 2
        assert sorted(j.source_id or "" for j in jobs) == ["a", "b"]
        assert (await status(services, name)).counts == Counts(2, 2, 0, 0)


async def test_an_edit_updates_the_source_and_a_restart_re_ingests_nothing(
    parts: Parts,
    kb: str,
    folder: Path,
    tmp_path: Path,
) -> None:
    settings = settings_for(folder, kb, tmp_path)
    name = f"folder:{folder}"
    call = folder / "storage-review.vtt"
    call.write_text(vtt(CUES[:3]))
    (folder / "storage-review.meta.json").write_text(json.dumps({"title": "Storage review"}))
    (folder / "notes.md").write_text("# Notes\n\nThe quibbler runbook lives in the wiki.\n")
    async with serving(settings, parts) as services:
        first = await settled(services, kb, 2)
        assert {j.result for j in first} == {"added"}
    call.touch()  # touched while stopped: same content
    async with serving(settings, parts) as services:
        await polls(services, name, 4)
        assert len(await jobs_of(services, kb)) == 2  # the restart re-ingested nothing
        sources = {i.source.id: i.source for i in await parts.store.list_sources(kb)}
        assert sources["storage-review"].title == "Storage review"  # the sidecar's

        call.write_text(vtt(CUES))  # an edit
        jobs = await settled(services, kb, 3)
        assert jobs[-1].result == "updated" and jobs[-1].source_id == "storage-review"
        assert any("zorbatron" in t for t in await found(services, kb, "zorbatron cluster"))
        (folder / "storage-review.meta.json").write_text(json.dumps({"title": "Storage, Q3"}))
        jobs = await settled(services, kb, 4)  # the sidecar alone changed: updated too
        sources = {i.source.id: i.source for i in await parts.store.list_sources(kb)}
        assert sources["storage-review"].title == "Storage, Q3"
        assert len(sources) == 2
        assert (await status(services, name)).counts.queued == 4


async def test_a_recording_beside_its_transcript_is_that_source_s_media(
    parts: Parts,
    kb: str,
    folder: Path,
    tmp_path: Path,
) -> None:
    (folder / "call.vtt").write_text(vtt(CUES[:3]))
    wav(folder / "call.wav")
    async with serving(settings_for(folder, kb, tmp_path), parts) as services:
        [job] = await settled(services, kb, 1)  # one source: the transcript, no transcription
        assert (Path(job.file).name, job.result) == ("call.vtt", "added")
        assert await kept_media(services, kb, "call")  # its page plays the recording


async def test_a_job_left_queued_by_a_stopped_serve_is_run_by_the_next_one(
    parts: Parts,
    kb: str,
    folder: Path,
    tmp_path: Path,
) -> None:
    settings = settings_for(folder, kb, tmp_path)
    name = f"folder:{folder}"
    (folder / "a.vtt").write_text(vtt(CUES[:3]))
    async with serving(settings, parts, inline=False) as services:  # no worker came
        await until(lambda: _queued(services, name))
        [job] = await jobs_of(services, kb)
        assert job.state == "queued"
    async with serving(settings, parts) as services:
        [done] = await settled(services, kb, 1)
        assert (done.id, done.result) == (job.id, "added")  # that job, not a second
        await polls(services, name, 2)
        assert (await status(services, name)).counts.queued == 1


async def _queued(services: CoreServices, name: str) -> bool:
    return (await status(services, name)).counts.queued == 1


async def test_a_removed_file_is_forgotten_only_when_asked(
    parts: Parts,
    kb: str,
    folder: Path,
    tmp_path: Path,
) -> None:
    name = f"folder:{folder}"
    (folder / "a.vtt").write_text(vtt(CUES[:2]))
    (folder / "b.vtt").write_text(vtt(CUES[2:4]))
    async with serving(settings_for(folder, kb, tmp_path), parts) as services:
        await settled(services, kb, 2)
        (folder / "a.vtt").unlink()
        await polls(services, name, 3)
        assert {i.source.id for i in await parts.store.list_sources(kb)} == {"a", "b"}
    follow = settings_for(folder, kb, tmp_path, watch_follow_deletes=True)
    async with serving(follow, parts) as services:
        await polls(services, name, 2)
        assert {i.source.id for i in await parts.store.list_sources(kb)} == {
            "a",
            "b",
        }  # a: long gone
        (folder / "b.vtt").unlink()
        jobs = await settled(services, kb, 3)
        assert (jobs[-1].kind, jobs[-1].result, jobs[-1].source_id) == ("remove", "removed", "b")
        assert {i.source.id for i in await parts.store.list_sources(kb)} == {"a"}
        assert (await status(services, name)).counts.forgotten == 1


async def test_a_file_quorum_cannot_read_is_counted_and_reported_not_retried(
    parts: Parts,
    kb: str,
    folder: Path,
    tmp_path: Path,
) -> None:
    settings = settings_for(folder, kb, tmp_path)
    name = f"folder:{folder}"
    (folder / "broken.vtt").write_bytes(b"\xff\xfe\x00garbage that is no transcript\x00")
    async with serving(settings, parts) as services:
        [job] = await settled(services, kb, 1)
        assert job.state == "failed"
        await polls(services, name, 4)
        assert len(await jobs_of(services, kb)) == 1  # not retried while unchanged
        row = await status(services, name)
        assert row.counts.failed == 1
        [check] = [c for c in await check_connectors(settings) if c.name == f"connector {name}"]
        assert check.status == "FAIL"
        assert check.detail.startswith(f"{folder / 'broken.vtt'} could not be ingested (")
        assert "tried again once it changes" in check.detail
        (folder / "broken.vtt").write_text(vtt(CUES[:2]))  # fixed: tried again
        jobs = await settled(services, kb, 2)
        assert jobs[-1].result == "added"
        await polls(services, name, 1)
        assert (await status(services, name)).last_error is None


def test_a_summary_target_may_name_its_knowledge_base() -> None:
    assert targets("slack:C1=team, slack:C2") == [
        Target("slack", "C1", "team"),
        Target("slack", "C2", None),
    ]
    with pytest.raises(ConfigError, match="optionally =KB for one knowledge base"):
        targets("slack:C1=")


async def test_a_new_recording_s_summary_is_posted_as_an_upload_s_is(
    parts: Parts,
    kb: str,
    folder: Path,
    tmp_path: Path,
) -> None:
    async with SlackEmulator() as slack:
        settings = settings_for(
            folder,
            kb,
            tmp_path,
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET,
            slack_api_url=slack.api_url,
            post_summaries=f"slack:C0GENERAL={kb},slack:C0RANDOM=another-kb",
        )
        async with serving(settings, parts) as services:
            for path in (RETRO, RETRO.with_suffix(".meta.json")):
                shutil.copy(path, folder / path.name)
            await settled(services, kb, 1)
            posted = await until(lambda: asyncio.sleep(0, slack.top_level("C0GENERAL")))
            assert "New recording: Cut-over retro" in str(posted[0].blocks)
            assert slack.top_level("C0RANDOM") == []  # another knowledge base's channel


async def test_same_named_files_in_two_subfolders_are_two_sources(
    parts: Parts, kb: str, folder: Path, tmp_path: Path
) -> None:
    for team, said in [
        ("a", "the quokka migration ships Friday"),
        ("b", "zeppelin goes in spring"),
    ]:
        (folder / team).mkdir()
        (folder / team / "notes.txt").write_text(f"[00:00:01] Ana: Team {team}: {said}.\n")
    (folder / "top.txt").write_text("[00:00:01] Ana: A file at the top keeps its name's id.\n")
    settings = settings_for(folder, kb, tmp_path, watch_follow_deletes=True)
    async with serving(settings, parts) as services:
        jobs = await settled(services, kb, 3)
        assert [(j.state, j.result) for j in jobs] == [("done", "added")] * 3
        ids = {i.source.id: i.source.path for i in await services.retrieval.store.list_sources(kb)}
        assert ids == {
            "a-notes": str(folder / "a" / "notes.txt"),
            "b-notes": str(folder / "b" / "notes.txt"),
            "top": str(folder / "top.txt"),
        }
        assert (await services.retrieval.search.search(kb, "zeppelin spring", k=1))[
            0
        ].source.id == "b-notes"
        await polls(services, f"folder:{folder}", 3)
        assert len(await jobs_of(services, kb)) == 3  # polled again: nothing new

        (folder / "a" / "notes.txt").unlink()
        jobs = await settled(services, kb, 4)
        assert (jobs[-1].kind, jobs[-1].file, jobs[-1].result) == ("remove", "a-notes", "removed")
        left = [i.source.id for i in await services.retrieval.store.list_sources(kb)]
        assert sorted(left) == ["b-notes", "top"]
