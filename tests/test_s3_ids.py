"""Which source each object of a bucket becomes, against the real S3-compatible server of
``test_s3_bucket`` (moto's, IAM checks on) and the session's Weaviate: two objects of the
same file name under two prefixes (``team-a/standup.txt``, ``team-b/standup.txt``, the
way Zoom and many recorders lay a bucket out) are two sources, each showing its
``s3://`` URL; an object ingested before ids came from keys keeps its id; one ingested
before sources showed their URL shows it after one poll, not ingested again."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

import bot.connectors.s3 as s3_connector
from bot.wiring import CoreServices
from bot.write import Writer
from tests import connectors_harness
from tests.connectors_harness import Parts, jobs_of, polls, serving, settled
from tests.test_s3_bucket import S3Server, bucket, s3_server, settings_for

parts = connectors_harness.parts
__all__ = ["bucket", "parts", "s3_server"]  # the fixtures, used by name

A, B = "in/team-a/standup.txt", "in/team-b/standup.txt"
SAID = {
    A: "[00:00:01] Ana: Team A agreed the quokka migration ships on Friday.\n",
    B: "[00:00:01] Ben: Team B moved the zeppelin launch to the spring.\n",
}


def as_before_urls(old: pytest.MonkeyPatch) -> None:
    """Sources written as before they showed their URL: the download's path (gone since),
    nothing correcting it afterwards."""
    real_add = Writer.add

    async def add_from_temporary_path(self: Writer, *args: Any, **kw: Any) -> Any:
        kw.pop("origins", None)
        return await real_add(self, *args, **kw)

    async def nothing_shown(self: Writer, *args: Any) -> list[str]:
        return []

    old.setattr(Writer, "add", add_from_temporary_path)
    old.setattr(Writer, "show_origins", nothing_shown)


async def _origins(services: CoreServices, kb: str) -> dict[str, str]:
    """Each source's id and the path `quorum sources` shows for it."""
    return {h.info.source.id: h.info.source.path for h in await services.holdings.held(kb)}


async def _cited(services: CoreServices, kb: str, query: str) -> str:
    """The source the best hit cites."""
    [best, *_] = await services.retrieval.search.search(kb, query, k=3)
    return best.source.id


async def test_same_named_objects_under_two_prefixes_are_two_sources(
    parts: Parts, kb: str, s3_server: S3Server, bucket: str, tmp_path: Path
) -> None:
    s3 = s3_server.client()
    # Two more keys whose slugs are the same id (a-b-c): the second gets its key's hash.
    slugged = {
        "in/a-b/c.txt": "[00:00:01] Cy: The walrus budget was approved in March.\n",
        "in/a/b-c.txt": "[00:00:01] Di: The pelican audit found three open findings.\n",
    }
    for key, text in {**SAID, **slugged}.items():
        s3.put_object(Bucket=bucket, Key=key, Body=text.encode())
    settings = settings_for(s3_server, bucket, kb, tmp_path, s3_follow_deletes=True)
    name = f"s3:{bucket}/in"
    url_a, url_b = f"s3://{bucket}/{A}", f"s3://{bucket}/{B}"
    hashed = "a-b-c-" + hashlib.sha256(b"in/a/b-c.txt").hexdigest()[:10]
    everything = {
        "team-a-standup": url_a,
        "team-b-standup": url_b,
        "a-b-c": f"s3://{bucket}/in/a-b/c.txt",  # listed first ('-' sorts before '/')
        hashed: f"s3://{bucket}/in/a/b-c.txt",
    }
    async with serving(settings, parts) as services:
        jobs = await settled(services, kb, 4)
        assert [(j.state, j.result) for j in jobs] == [("done", "added")] * 4
        assert await _origins(services, kb) == everything
        assert await _cited(services, kb, "quokka migration Friday") == "team-a-standup"
        assert await _cited(services, kb, "zeppelin launch spring") == "team-b-standup"
        assert await _cited(services, kb, "pelican audit findings") == hashed
        await polls(services, name, 3)
        assert len(await jobs_of(services, kb)) == 4  # polled again: nothing new

    async with serving(settings, parts) as services:  # a restart: nothing new either
        await polls(services, name, 3)
        assert len(await jobs_of(services, kb)) == 4
        assert await _origins(services, kb) == everything

        s3.delete_object(Bucket=bucket, Key=A)  # removed by its own id: B stays
        jobs = await settled(services, kb, 5)
        assert (jobs[-1].kind, jobs[-1].file, jobs[-1].result) == (
            "remove",
            "team-a-standup",
            "removed",
        )
        assert "team-a-standup" not in await _origins(services, kb)
        assert len(await _origins(services, kb)) == 3
        assert await _cited(services, kb, "zeppelin launch spring") == "team-b-standup"


async def test_an_object_ingested_under_its_file_name_keeps_its_id(
    parts: Parts,
    kb: str,
    s3_server: S3Server,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before ids came from keys, an object's id was its file name's: both standups were
    ``standup``, the second written over the first. After the upgrade the object that
    holds ``standup`` keeps it (not ingested again), the one it overwrote comes back under
    its own id, and an update of the first is still ``standup``."""
    s3 = s3_server.client()
    settings = settings_for(s3_server, bucket, kb, tmp_path)
    name = f"s3:{bucket}/in"
    for key in (A, B):  # the old rule: the file name's slug, nothing chosen by the poller
        s3.put_object(Bucket=bucket, Key=key, Body=SAID[key].encode())
        with monkeypatch.context() as old:
            old.setattr(s3_connector.S3Feed, "source_id", lambda self, key: None)
            as_before_urls(old)
            async with serving(settings, parts) as services:
                await settled(services, kb, 1 if key == A else 2)
                await polls(services, name, 2)  # the job's end noted in the object's row
    async with serving(settings, parts) as services:
        jobs = await jobs_of(services, kb)
        assert [j.source_id for j in jobs] == ["standup", "standup"]  # B over A: A lost
        rows = await services.jobs.table.driver.fetch(
            "SELECT item, source_id FROM connector_items WHERE connector = ?", name
        )
        assert {r["item"]: r["source_id"] for r in rows} == {A: "standup", B: "standup"}

    async with serving(settings, parts) as services:  # upgraded
        jobs = await settled(services, kb, 3)
        assert (jobs[-1].file, jobs[-1].source_id) == (f"s3://{bucket}/{A}", "team-a-standup")
        await polls(services, name, 3)
        assert len(await jobs_of(services, kb)) == 3  # B, unchanged, is not ingested again
        assert set(await _origins(services, kb)) == {"standup", "team-a-standup"}
        assert await _cited(services, kb, "quokka migration Friday") == "team-a-standup"

        edited = SAID[B] + "[00:00:09] Ben: The zeppelin needs a hangar first.\n"
        s3.put_object(Bucket=bucket, Key=B, Body=edited.encode())
        jobs = await settled(services, kb, 4)
        assert (jobs[-1].result, jobs[-1].source_id) == ("updated", "standup")
        assert await _origins(services, kb) == {
            "standup": f"s3://{bucket}/{B}",
            "team-a-standup": f"s3://{bucket}/{A}",
        }


async def test_a_source_written_with_its_download_path_shows_its_url_without_a_new_ingest(
    parts: Parts,
    kb: str,
    s3_server: S3Server,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s3 = s3_server.client()
    for key in (A, B):
        s3.put_object(Bucket=bucket, Key=key, Body=SAID[key].encode())
    settings = settings_for(s3_server, bucket, kb, tmp_path)
    name = f"s3:{bucket}/in"
    with monkeypatch.context() as old:
        as_before_urls(old)
        async with serving(settings, parts) as services:
            await settled(services, kb, 2)
            await polls(services, name, 2)  # the jobs' ends noted in the objects' rows
            before = {h.info.source.id: h.info for h in await services.holdings.held(kb)}
    scratch = str(settings.data_dir / "connectors" / "s3")
    assert {i.source.path.startswith(scratch) for i in before.values()} == {True}

    async with serving(settings, parts) as services:  # upgraded
        await polls(services, name, 2)
        assert await _origins(services, kb) == {
            "team-a-standup": f"s3://{bucket}/{A}",
            "team-b-standup": f"s3://{bucket}/{B}",
        }
        assert len(await jobs_of(services, kb)) == 2  # nothing ingested again
        after = {h.info.source.id: h.info for h in await services.holdings.held(kb)}
        assert {k: i.indexed_at for k, i in after.items()} == {
            k: i.indexed_at for k, i in before.items()
        }  # the same generation: nothing written again, only the path shown
        assert await _cited(services, kb, "zeppelin launch spring") == "team-b-standup"
