"""A throwaway PostgreSQL server for tests and benches: Debian's binaries (``initdb``,
``pg_ctl``), a cluster in a temp folder, a free loopback port, its unix socket in the
same folder, stopped (immediately) and deleted on exit. ``scripts/install.sh`` installs
the binaries.

PostgreSQL refuses to run as root, so under root (containers, CI) the server runs as the
``postgres`` user Debian's package creates, in a folder under /tmp it can reach."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

USER = "quorum"
PASSWORD = "quorum-test-password"


def find_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl`` (PATH first, then Debian's layout)."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("pg_ctl"):
        return Path(on_path).parent
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return versions[-1].parent if versions else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Postgres:
    """A running server: its port, and URLs for its databases."""

    port: int
    socket_dir: Path

    def url(self, database: str = "postgres") -> str:
        """A URL for ``database`` over TCP on loopback (what Quorum is given)."""
        return f"postgresql://{USER}:{PASSWORD}@127.0.0.1:{self.port}/{database}"

    async def create_database(self, name: str | None = None) -> str:
        """A fresh, empty database; returns its URL."""
        name = name or f"t{uuid.uuid4().hex[:12]}"
        conn = await asyncpg.connect(self.url())
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()
        return self.url(name)


@contextlib.contextmanager
def running_postgres() -> Iterator[Postgres]:
    """initdb + pg_ctl start in a temp folder; pg_ctl stop and delete it on exit."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL's initdb was not found: run `make install` first.")
    base = Path(tempfile.mkdtemp(prefix="quorum-pg-"))
    try:
        with _cluster(bin_dir, base) as server:
            yield server
    finally:
        shutil.rmtree(base, ignore_errors=True)


@contextlib.contextmanager
def _cluster(bin_dir: Path, base: Path) -> Iterator[Postgres]:
    data, sock = base / "data", base / "sock"
    sock.mkdir(parents=True, exist_ok=True)
    (base / "pw").write_text(PASSWORD)
    user: str | None = None
    if os.geteuid() == 0:
        user = "postgres"
        owner = pwd.getpwnam(user)
        for path in (base, sock, base / "pw"):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    env = {**os.environ, "LC_ALL": "C"}
    # A password over TCP, as a real deployment has, so a wrong one can be tested.
    subprocess.run(
        [str(bin_dir / "initdb"), "-D", str(data), "-U", USER, "-E", "UTF8"]
        + ["--auth-local=trust", "--auth-host=scram-sha-256", f"--pwfile={base / 'pw'}"],
        check=True,
        capture_output=True,
        env=env,
        user=user,
    )
    port = free_port()
    options = (
        f"-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={sock}"
        " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
    )
    subprocess.run(
        [str(bin_dir / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "log"), "-w"]
        + ["-t", "60", "start"],
        check=True,
        capture_output=True,
        env=env,
        user=user,
    )
    try:
        yield Postgres(port, sock)
    finally:
        subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            capture_output=True,
            env=env,
            user=user,
        )
