"""The polling connectors' settings: ``QUORUM_WATCH`` (folders) and ``QUORUM_S3_URL``
(buckets), loaded by ``Settings.platform(ConnectorSettings)`` from the same environment
and ``.env`` as every other setting; a bad value is one sentence naming the variable."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import AliasChoices, BeforeValidator, Field, SecretStr
from pydantic_settings import NoDecode, SettingsConfigDict

from bot.config import PlatformSettings
from retrieval.errors import InvalidInput
from retrieval.models import check_kb

BUCKET = re.compile(r"[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9]")


@dataclass(frozen=True)
class Watched:
    """A folder whose files feed a knowledge base."""

    folder: Path
    kb: str

    @property
    def name(self) -> str:
        """The connector's name in its status row."""
        return f"folder:{self.folder}"


@dataclass(frozen=True)
class Bucket:
    """A bucket (and a prefix in it) whose objects feed a knowledge base."""

    bucket: str
    prefix: str
    kb: str

    @property
    def name(self) -> str:
        """The connector's name in its status row."""
        return f"s3:{self.bucket}/{self.prefix}".rstrip("/")

    @property
    def url(self) -> str:
        """``s3://bucket/prefix``."""
        return f"s3://{self.bucket}/{self.prefix}"


def _pairs(value: str, form: str) -> list[tuple[str, str]]:
    """``A=kb,B=kb`` as (A, kb) pairs; each kb checked."""
    pairs: list[tuple[str, str]] = []
    for raw in value.split(","):
        if not raw.strip():
            continue
        where, eq, kb = raw.strip().rpartition("=")
        if not eq or not where.strip():
            raise ValueError(f"{raw.strip()!r} is not {form} (comma-separated for several)")
        try:
            pairs.append((where.strip(), check_kb(kb.strip())))
        except InvalidInput as exc:
            raise ValueError(str(exc)) from None
    return pairs


def _watched(value: object) -> object:
    if not isinstance(value, str):
        return value  # already made (an override, a default)
    found: list[Watched] = []
    for where, kb in _pairs(value, "FOLDER=kb, like /srv/recordings=team"):
        folder = Path(where).expanduser()
        if not folder.is_absolute():
            raise ValueError(f"{where!r} is not an absolute folder path, like /srv/recordings")
        found.append(Watched(folder, kb))
    return found


def _buckets(value: object) -> object:
    if not isinstance(value, str):
        return value
    found: list[Bucket] = []
    for where, kb in _pairs(value, "s3://bucket/prefix=kb, like s3://recordings/calls=team"):
        if not where.startswith("s3://"):
            raise ValueError(f"{where!r} does not start with s3://")
        bucket, _, prefix = where.removeprefix("s3://").partition("/")
        if not BUCKET.fullmatch(bucket):
            raise ValueError(f"{bucket!r} is not a bucket name (3-63 of a-z, 0-9, '.', '-')")
        found.append(Bucket(bucket, prefix, kb))
    return found


class ConnectorSettings(PlatformSettings):
    """Where recordings arrive by themselves, and how often to look."""

    model_config = SettingsConfigDict(
        env_prefix="QUORUM_", env_file=".env", extra="ignore", populate_by_name=True
    )

    watch: Annotated[list[Watched], NoDecode, BeforeValidator(_watched)] = Field(
        default_factory=list,
        description="Folders to watch: FOLDER=kb, comma-separated for several "
        "(/srv/recordings=team). New and changed files are ingested once they stop growing.",
    )
    watch_poll_s: float = Field(10.0, gt=0, description="How often watched folders are listed.")
    watch_follow_deletes: bool = Field(
        False, description="A file removed from a watched folder is forgotten (its source too)."
    )
    s3_url: Annotated[list[Bucket], NoDecode, BeforeValidator(_buckets)] = Field(
        default_factory=list,
        description="Buckets to poll: s3://bucket/prefix=kb, comma-separated for several.",
    )
    s3_poll_s: float = Field(30.0, gt=0, description="How often buckets are listed.")
    s3_follow_deletes: bool = Field(
        False, description="An object deleted from a bucket is forgotten (its source too)."
    )
    s3_max_mb: int = Field(
        4096, ge=1, description="Largest object downloaded from a bucket, in megabytes."
    )
    s3_endpoint_url: str | None = Field(
        None,
        validation_alias=AliasChoices(
            "QUORUM_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL", "s3_endpoint_url"
        ),
        description="An S3-compatible server's URL (MinIO, Ceph, R2); unset: AWS.",
    )
    s3_region: str | None = Field(
        None,
        validation_alias=AliasChoices(
            "QUORUM_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION", "s3_region"
        ),
        description="The bucket's region (AWS_REGION also works).",
    )
    aws_access_key_id: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("AWS_ACCESS_KEY_ID", "aws_access_key_id"),
        description="The bucket's access key; unset: boto3's usual chain (profile, role).",
    )
    aws_secret_access_key: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
        description="The access key's secret.",
    )
    aws_session_token: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("AWS_SESSION_TOKEN", "aws_session_token"),
        description="A temporary session token, when the key is temporary.",
    )

    @property
    def any(self) -> bool:
        """Some connector is configured."""
        return bool(self.watch or self.s3_url)
