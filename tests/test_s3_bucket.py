"""QUORUM_S3_URL against a real S3-compatible server: moto's (``moto[server]``, from PyPI),
started by the test as ``python -m moto.server`` on a free port with its IAM checks on, so
a wrong key or secret is refused as AWS refuses it (SigV4 signature, known access key).
Objects put in the bucket become sources through jobs that download them; the core is the
one `quorum serve` runs, on the session's Weaviate server; the poll interval is tiny."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

import bot.connectors.s3 as s3_connector
from adapters.doctor import check_connectors
from bot.config import Settings, load_settings
from bot.connectors.poller import Listing
from bot.connectors.settings import ConnectorSettings
from bot.wiring import CoreServices
from retrieval.errors import ConfigError
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

parts = connectors_harness.parts  # the session's store and model, as serve opens them

POLL_S = 0.15
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "recordings"
RETRO = EXAMPLES / "2024-02-27-cutover-retro.txt"
BOOT_ACTIONS = 3  # unchecked requests: the IAM user, its key, its policy; then all checked


@dataclass(frozen=True)
class S3Server:
    url: str
    key: str
    secret: str

    def client(self, secret: str | None = None) -> Any:
        return boto3.client(
            "s3",
            endpoint_url=self.url,
            region_name="us-east-1",
            aws_access_key_id=self.key,
            aws_secret_access_key=secret or self.secret,
        )


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    """moto's server, in a process of its own, with one IAM user allowed s3:*."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(BOOT_ACTIONS)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(f"{url}/moto-api/", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        iam = boto3.client(
            "iam",
            endpoint_url=url,
            region_name="us-east-1",
            aws_access_key_id="boot",
            aws_secret_access_key="boot",
        )
        iam.create_user(UserName="quorum")
        made = iam.create_access_key(UserName="quorum")["AccessKey"]
        policy = {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}
        iam.put_user_policy(
            UserName="quorum",
            PolicyName="s3",
            PolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [policy]}),
        )
        yield S3Server(url, made["AccessKeyId"], made["SecretAccessKey"])
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    name = f"calls-{uuid.uuid4().hex[:8]}"
    s3_server.client().create_bucket(Bucket=name)
    return name


def settings_for(
    server: S3Server, bucket: str, kb: str, tmp_path: Path, **more: object
) -> Settings:
    values: dict[str, object] = {
        "data_dir": tmp_path / "data",
        "serve_workers": 0,
        "s3_url": f"s3://{bucket}/in/={kb}",
        "s3_poll_s": POLL_S,
        "s3_endpoint_url": server.url,
        "s3_region": "us-east-1",
        "aws_access_key_id": server.key,
        "aws_secret_access_key": server.secret,
    }
    return load_settings(**{**values, **more})


def test_a_bad_bucket_setting_is_one_sentence(tmp_path: Path) -> None:
    for value, says in [
        ("calls/in=team", "does not start with s3://"),
        ("s3://Calls_Bucket/in=team", "is not a bucket name"),
        ("s3://calls/in", "is not s3://bucket/prefix=kb"),
    ]:
        with pytest.raises(ConfigError, match=says) as caught:
            load_settings(data_dir=tmp_path, s3_url=value).platform(ConnectorSettings)
        assert str(caught.value).startswith("QUORUM_S3_URL: ")


async def test_a_new_object_becomes_a_source_and_follows_its_changes(
    parts: Parts,
    kb: str,
    s3_server: S3Server,
    bucket: str,
    tmp_path: Path,
) -> None:
    s3 = s3_server.client()
    settings = settings_for(s3_server, bucket, kb, tmp_path, s3_follow_deletes=True)
    name = f"s3:{bucket}/in"
    s3.put_object(Bucket=bucket, Key="in/cutover-retro.txt", Body=RETRO.read_bytes())
    meta = RETRO.with_suffix(".meta.json").read_bytes()
    s3.put_object(Bucket=bucket, Key="in/cutover-retro.meta.json", Body=meta)
    s3.put_object(Bucket=bucket, Key="elsewhere/other.txt", Body=b"[00:00:01] A: Not ours.\n")
    async with serving(settings, parts) as services:
        [job] = await settled(services, kb, 1)
        assert (job.state, job.result, job.file) == (
            "done",
            "added",
            f"s3://{bucket}/in/cutover-retro.txt",
        )
        [held] = await parts.store.list_sources(kb)
        assert held.source.title == "Cut-over retro: the refresh-token incident"  # its sidecar
        assert held.source.kind == "audio" and "Priya Raman" in held.source.speakers
        assert not list((settings.data_dir / "connectors" / "s3").iterdir())  # download gone

        edited = RETRO.read_text() + "[00:09:00] Dana Kim: The zorbatron alarm is now paged.\n"
        s3.put_object(Bucket=bucket, Key="in/cutover-retro.txt", Body=edited.encode())
        jobs = await settled(services, kb, 2)
        assert jobs[-1].result == "updated"
        await polls(services, name, 3)
        assert len(await jobs_of(services, kb)) == 2  # an unchanged ETag is never queued again

        s3.delete_object(Bucket=bucket, Key="in/cutover-retro.txt")
        jobs = await settled(services, kb, 3)
        assert (jobs[-1].kind, jobs[-1].result) == ("remove", "removed")
        assert await parts.store.list_sources(kb) == []
        row = await status(services, name)
        assert (row.counts.queued, row.counts.forgotten, row.last_error) == (2, 1, None)


async def test_a_recording_beside_its_transcript_comes_with_it(
    parts: Parts,
    kb: str,
    s3_server: S3Server,
    bucket: str,
    tmp_path: Path,
) -> None:
    s3 = s3_server.client()
    s3.put_object(Bucket=bucket, Key="in/retro.txt", Body=RETRO.read_bytes())
    s3.put_object(Bucket=bucket, Key="in/retro.wav", Body=wav(tmp_path / "r.wav").read_bytes())
    async with serving(settings_for(s3_server, bucket, kb, tmp_path), parts) as services:
        [job] = await settled(services, kb, 1)  # the transcript's job; no transcription
        assert (job.file, job.result) == (f"s3://{bucket}/in/retro.txt", "added")
        assert await kept_media(services, kb, "retro")  # downloaded with it, kept for its page


async def test_wrong_credentials_are_one_sentence_in_doctor_and_lose_nothing(
    parts: Parts,
    kb: str,
    s3_server: S3Server,
    bucket: str,
    tmp_path: Path,
) -> None:
    s3_server.client().put_object(
        Bucket=bucket, Key="in/cutover-retro.txt", Body=RETRO.read_bytes()
    )
    name = f"s3:{bucket}/in"
    wrong = settings_for(s3_server, bucket, kb, tmp_path, aws_secret_access_key="not-the-secret")
    async with serving(wrong, parts) as services:
        await polls(services, name, 2)
        assert await jobs_of(services, kb) == []
    [row] = [c for c in await check_connectors(wrong) if c.name == f"connector {name}"]
    assert row.status == "FAIL"
    assert row.detail.startswith(
        f"s3://{bucket}/in/: the server refused the credentials (SignatureDoesNotMatch); "
        "check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    )
    assert row.detail.count(". ") <= 1  # one sentence (and when it happened)

    right = settings_for(s3_server, bucket, kb, tmp_path)  # fixed: picked up, nothing lost
    async with serving(right, parts) as services:
        [job] = await settled(services, kb, 1)
        assert job.result == "added"
        await polls(services, name, 1)
    [row] = [c for c in await check_connectors(right) if c.name == f"connector {name}"]
    assert row.status == "ok" and "seen 1, queued 1, failed 0" in row.detail


async def test_a_large_bucket_is_walked_over_several_polls_from_its_cursor(
    parts: Parts,
    kb: str,
    s3_server: S3Server,
    bucket: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(s3_connector, "PAGE_KEYS", 2)
    monkeypatch.setattr(s3_connector, "PAGES", 1)  # two keys a poll: five objects, 3 polls
    s3 = s3_server.client()
    for n in range(5):
        body = f"[00:00:0{n}] Ana: Meeting {n} decided the plan for crate {n}.\n"
        s3.put_object(Bucket=bucket, Key=f"in/meeting-{n}.txt", Body=body.encode())
    big = b"[00:00:01] Ana: " + b"word " * 300_000 + b"\n"  # 1.5 MB
    s3.put_object(Bucket=bucket, Key="in/too-big.txt", Body=big)
    settings = settings_for(s3_server, bucket, kb, tmp_path, s3_max_mb=1)
    async with serving(settings, parts) as services:
        jobs = await settled(services, kb, 6)
        done = sorted(j.source_id or "" for j in jobs if j.state == "done")
        assert done == [f"meeting-{n}" for n in range(5)]
        [failed] = [j for j in jobs if j.state == "failed"]
        assert (
            failed.error
            == "in/too-big.txt is larger than QUORUM_S3_MAX_MB (1 MB); raise it to ingest it."
        )
        cursors = set()

        async def walked() -> bool:
            cursors.add((await status(services, f"s3:{bucket}/in")).cursor)
            return len(cursors) >= 3

        await until(walked)
        # Mid-pass the cursor is the pass's start, never a key (a forgotten one must not
        # be kept): where the listing goes on is in the poller's memory only.
        assert "" in cursors and any(cursors - {"", None})
        assert not [c for c in cursors if c and ("in/" in c or "meeting" in c or "\t" in c)]
        # Counted when the poller next lists it, a pass (three polls) later.
        name = f"s3:{bucket}/in"
        assert await until(lambda: _failed(services, name))


async def _failed(services: CoreServices, name: str) -> bool:
    return (await status(services, name)).counts.failed == 1


async def test_a_new_process_lists_a_pass_again_from_its_start(
    s3_server: S3Server, bucket: str, kb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(s3_connector, "PAGE_KEYS", 2)
    monkeypatch.setattr(s3_connector, "PAGES", 1)
    s3 = s3_server.client()
    for n in range(5):
        s3.put_object(Bucket=bucket, Key=f"in/call-{n}.txt", Body=b"[00:00:01] Ana: hi.\n")
    own = settings_for(s3_server, bucket, kb, tmp_path).platform(ConnectorSettings)
    [where] = own.s3_url

    def keys(listing: Listing) -> list[str]:
        return [s.key for s in listing.seen]

    feed = s3_connector.S3Feed(where, own)
    first = await feed.list(None)
    assert keys(first) == ["in/call-0.txt", "in/call-1.txt"] and not first.complete
    assert first.cursor == str(first.pass_start)  # saved: when the pass began, no key
    on = await feed.list(first.cursor)  # the same process goes on where it stopped
    assert keys(on) == ["in/call-2.txt", "in/call-3.txt"] and on.pass_start == first.pass_start

    restarted = s3_connector.S3Feed(where, own)  # a restart: the pass again, same start
    again = await restarted.list(on.cursor)
    assert keys(again) == keys(first) and again.pass_start == first.pass_start
    walked = keys(again)
    while not (page := await restarted.list(again.cursor)).complete:
        walked += keys(page)
        again = page
    walked += keys(page)
    assert walked == [f"in/call-{n}.txt" for n in range(5)] and page.cursor == ""
    old = await s3_connector.S3Feed(where, own).list(f"{first.pass_start}\tin/call-3.txt")
    assert keys(old) == keys(first)  # a cursor saved with a key before: its key not used
