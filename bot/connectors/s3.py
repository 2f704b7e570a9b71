"""``QUORUM_S3_URL``: an S3-compatible bucket (AWS S3, MinIO, Ceph, R2) polled through
boto3, the one module that imports it. boto3 is synchronous: every call runs in a thread.

A poll lists (``ListObjectsV2``) at most ``PAGES`` pages and goes on from there at the
next, so a large bucket is walked over several polls; an object's ETag and size are its
stamp (no download in a poll). A whole pass ending is what lets deletes be judged. Where
a pass stands is never saved as a key (a key is a user's words, and one forgotten must
not be kept): the saved cursor is only when the pass started, and the listing's
continuation token is kept in memory. A new process (a restart, another replica taking
the lease over) lists the pass again from the start, under the same start: every object
already known costs a listed key and nothing more.

The object is downloaded in its job (``fetcher``): streamed to a temporary file in the
data folder, bounded by ``QUORUM_S3_MAX_MB``, removed after. Its source shows where it
came from (``s3://bucket/key``), never that temporary path.

Each object is its own source: its id is its key under the prefix, slugged
(``team-a/standup.m4a`` -> ``team-a-standup``; ``2026/05/call.m4a`` -> ``2026-05-call``),
chosen by the poller once, kept in the object's row and named by its job (``poller``:
the key's hash is added when another object has that id already); the object's sidecar
or front matter can still name another. An object ingested before ids came from keys
keeps the one it has.

Bucket notifications are not used: each server sends them its own way (SQS or SNS on
AWS, webhooks on MinIO, none on R2's S3 API), none reaches a server behind a firewall,
and the poll finds every object anyway; a short ``QUORUM_S3_POLL_S`` is the cheap route.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import AsyncIterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from bot.connectors.poller import Listing, Seen, readable_id
from bot.connectors.scratch import scratch_folder, sweep
from bot.connectors.settings import Bucket, ConnectorSettings
from bot.jobs import Job, JobQueue
from bot.models import Actor
from bot.write import Fetcher, Unfetchable
from retrieval.errors import QuorumError
from retrieval.ingest import SUPPORTED_SUFFIXES, transcribed_beside
from retrieval.ingest.media import MEDIA_SUFFIXES
from retrieval.ingest.metadata import SIDECAR_SUFFIX

if TYPE_CHECKING:
    from types_boto3_s3 import S3Client

PAGES = 10  # listing pages per poll
PAGE_KEYS = 1000  # keys per listing page (S3's most)
TRANSCRIPTS = (".vtt", ".srt", ".json", ".txt")
REFUSED = {
    "InvalidAccessKeyId",
    "SignatureDoesNotMatch",
    "AccessDenied",
    "ExpiredToken",
    "InvalidToken",
    "AuthorizationHeaderMalformed",
    "403",
}


class BucketError(QuorumError):
    """The bucket could not be listed or read (one sentence naming what to set)."""


def client(own: ConnectorSettings) -> S3Client:
    """An S3 client from the settings (their keys, else boto3's usual chain)."""

    def secret(value: Any) -> str | None:
        return value.get_secret_value() if value is not None else None

    session = boto3.session.Session(
        aws_access_key_id=secret(own.aws_access_key_id),
        aws_secret_access_key=secret(own.aws_secret_access_key),
        aws_session_token=secret(own.aws_session_token),
        region_name=own.s3_region,
    )
    config = Config(connect_timeout=5, read_timeout=30, retries={"max_attempts": 2})
    return session.client("s3", endpoint_url=own.s3_endpoint_url, config=config)


def explain(exc: Exception, bucket: Bucket, endpoint: str | None) -> str:
    """A boto3 error as one sentence that says what to fix."""
    where = bucket.url
    if isinstance(exc, NoCredentialsError):
        return f"{where}: no credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY."
    if isinstance(exc, ClientError):
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in REFUSED:
            return (
                f"{where}: the server refused the credentials ({code}); check "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and the key's access to the bucket)."
            )
        if code in ("NoSuchBucket", "404"):
            return f"{where}: there is no bucket {bucket.bucket!r}; check QUORUM_S3_URL."
        return f"{where}: the server said {code or 'no'}; check QUORUM_S3_URL."
    server = endpoint or "AWS S3"
    return f"{where}: could not reach {server} ({exc}); check QUORUM_S3_ENDPOINT_URL."


def _wanted(key: str, prefix: str) -> bool:
    """An object the connector ingests: a supported type, not hidden, not metadata, not
    a folder marker, a name that stays a name on disk."""
    name = PurePosixPath(key).name
    return (
        key.startswith(prefix)
        and not key.endswith("/")
        and name not in ("", ".", "..")
        and not name.startswith(".")
        and "\x00" not in key
        and not name.endswith(SIDECAR_SUFFIX)
        and PurePosixPath(name).suffix.lower() in SUPPORTED_SUFFIXES
    )


def _companions(key: str) -> list[str]:
    """The keys that belong to ``key``'s source: its sidecar, a recording beside it."""
    path = PurePosixPath(key)
    found = [str(path.with_name(path.stem + SIDECAR_SUFFIX))]
    if path.suffix.lower() in TRANSCRIPTS:
        found += [str(path.with_suffix(s)) for s in sorted(MEDIA_SUFFIXES)]
    return found


class S3Feed:
    """One bucket (and prefix) as a polling connector's ``Feed``."""

    kind = "s3"

    def __init__(self, bucket: Bucket, own: ConnectorSettings) -> None:
        self.bucket, self.kb, self.name = bucket, bucket.kb, bucket.name
        self.poll_s, self.follow_deletes = own.s3_poll_s, own.s3_follow_deletes
        self.endpoint = own.s3_endpoint_url
        self.client = client(own)
        self._resume: tuple[str, str] | None = None  # (a pass's start, where it goes on)

    async def list(self, cursor: str | None) -> Listing:
        """The next pages of the bucket's listing, from ``cursor`` on."""
        return await asyncio.to_thread(self._list, cursor or "")

    def _list(self, cursor: str) -> Listing:
        # The cursor is the pass's start (a key after a tab: a cursor saved before keys
        # were left out of it, not used).
        started = cursor.partition("\t")[0]
        pass_start = float(started) if started else time.time()
        objects: dict[str, tuple[int, str]] = {}
        ask: dict[str, Any] = {
            "Bucket": self.bucket.bucket,
            "Prefix": self.bucket.prefix,
            "MaxKeys": PAGE_KEYS,
        }
        resume, self._resume = self._resume, None
        if resume is not None and started and resume[0] == started:
            ask["ContinuationToken"] = resume[1]  # else the pass is listed from its start
        complete = False
        try:
            for _ in range(PAGES):
                page = self.client.list_objects_v2(**ask)
                for obj in page.get("Contents", []):
                    objects[obj["Key"]] = (int(obj["Size"]), str(obj["ETag"]).strip('"'))
                if not page.get("IsTruncated"):
                    complete = True
                    break
                ask["ContinuationToken"] = page["NextContinuationToken"]
        except (BotoCoreError, ClientError) as exc:
            raise BucketError(explain(exc, self.bucket, self.endpoint)) from exc
        keys = {Path(k) for k in objects}
        seen: list[Seen] = []
        kept: set[str] = set()
        for key, (size, etag) in objects.items():
            if not _wanted(key, self.bucket.prefix):
                continue
            if transcribed_beside(Path(key), keys):
                kept.add(key)  # the transcript's media, fetched with it
                continue
            extra = [(c, objects[c]) for c in _companions(key) if c in objects]
            stamp = ";".join([etag, *(f"{c}:{e}" for c, (_, e) in extra)])
            seen.append(Seen(key, size + sum(s for _, (s, _) in extra), stamp))
        cursor_next = ""
        if not complete:
            cursor_next = str(pass_start)
            self._resume = (cursor_next, str(ask["ContinuationToken"]))
        return Listing(seen, complete, pass_start, cursor_next, frozenset(kept))

    async def probe(self) -> str | None:
        """Why the bucket cannot be listed now (None: it can): one key asked for."""
        ask = {"Bucket": self.bucket.bucket, "Prefix": self.bucket.prefix, "MaxKeys": 1}
        try:
            await asyncio.to_thread(lambda: self.client.list_objects_v2(**ask))  # type: ignore[arg-type]
        except (BotoCoreError, ClientError) as exc:
            return explain(exc, self.bucket, self.endpoint)
        return None

    def source_id(self, key: str) -> str:
        """The readable id a new object's source gets (``readable_id``)."""
        return readable_id(key.removeprefix(self.bucket.prefix), key)

    def origin(self, key: str) -> str:
        """Where an object's source came from: its ``s3://bucket/key``."""
        return f"s3://{self.bucket.bucket}/{key}"

    async def digest(self, seen: Seen) -> str:
        """ETags and sizes stand for the content (nothing is downloaded in a poll)."""
        return f"{seen.size}:{seen.stamp}"

    async def queue(
        self, jobs: JobQueue, seen: Seen, digest: str, by: Actor, source_id: str | None
    ) -> Job:
        """The object's job: its worker downloads it (``fetcher``)."""
        return await jobs.add_one(self.kb, self.origin(seen.key), digest, by, source_id=source_id)


def fetcher(own: ConnectorSettings, scratch: Path) -> Fetcher:
    """Downloads ``s3://bucket/key`` (of a configured bucket and prefix only) with its
    sidecar and the recording beside a transcript into a temporary folder under
    ``scratch``, removed on exit."""
    s3 = client(own)
    sweep(scratch)
    limit = own.s3_max_mb * 1024 * 1024
    buckets = own.s3_url

    def download(bucket: Bucket, key: str, into: Path, needed: bool) -> bool:
        path = into / PurePosixPath(key).name
        try:
            head = s3.head_object(Bucket=bucket.bucket, Key=key)
            if int(head["ContentLength"]) > limit:
                raise Unfetchable(
                    f"{key} is larger than QUORUM_S3_MAX_MB ({own.s3_max_mb} MB); raise it "
                    "to ingest it."
                )
            body = s3.get_object(Bucket=bucket.bucket, Key=key)["Body"]
            written = 0
            with path.open("wb") as f:
                for chunk in body.iter_chunks(1 << 20):
                    written += len(chunk)
                    if written > limit:  # it grew since the head
                        raise Unfetchable(f"{key} is larger than QUORUM_S3_MAX_MB.")
                    f.write(chunk)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("NoSuchKey", "404"):
                if needed:
                    raise Unfetchable(
                        f"{key} was deleted from the bucket before it was downloaded."
                    ) from exc
                return False
            raise BucketError(explain(exc, bucket, own.s3_endpoint_url)) from exc
        return True

    def present(bucket: Bucket, key: str) -> list[str]:
        """``key``'s companions the bucket holds (its sidecar, one recording beside it)."""
        stem = str(PurePosixPath(key).with_suffix(""))
        try:
            page = s3.list_objects_v2(Bucket=bucket.bucket, Prefix=stem, MaxKeys=100)
        except (BotoCoreError, ClientError) as exc:
            raise BucketError(explain(exc, bucket, own.s3_endpoint_url)) from exc
        there = {obj["Key"] for obj in page.get("Contents", [])}
        found = [c for c in _companions(key) if c in there]
        media = [c for c in found if PurePosixPath(c).suffix.lower() in MEDIA_SUFFIXES]
        return [c for c in found if c not in media] + media[:1]

    @contextlib.asynccontextmanager
    async def fetch(url: str) -> AsyncIterator[Path]:
        name, _, key = url.removeprefix("s3://").partition("/")
        bucket = next((b for b in buckets if b.bucket == name and key.startswith(b.prefix)), None)
        if bucket is None or not _wanted(key, bucket.prefix):
            raise Unfetchable(f"{url} is not in a bucket QUORUM_S3_URL names.")
        into = await asyncio.to_thread(scratch_folder, scratch)
        try:
            await asyncio.to_thread(download, bucket, key, into, True)
            for other in await asyncio.to_thread(present, bucket, key):
                await asyncio.to_thread(download, bucket, other, into, False)
            yield into / PurePosixPath(key).name
        finally:
            await asyncio.to_thread(shutil.rmtree, into, True)

    return fetch
