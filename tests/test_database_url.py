"""QUORUM_DATABASE_URL as an operator meets it: ``quorum doctor`` connects and reports the
migrations; a wrong URL is one sentence with its fix, from doctor and from ``quorum
serve``, never a traceback and never the password."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from adapters.doctor import check_database
from bot.config import load_settings
from bot.sessions import MIGRATIONS
from retrieval.store.weaviate.server import Endpoint
from tests.postgres_server import PASSWORD, free_port

QUORUM = Path(sys.executable).parent / "quorum"


async def test_doctor_reports_the_postgres_database_and_its_migrations(
    postgres_url: str, tmp_path: Path
) -> None:
    check = await check_database(load_settings(data_dir=tmp_path, database_url=postgres_url))
    assert check.status == "ok", check
    assert f"{len(MIGRATIONS)} of {len(MIGRATIONS)} migrations applied" in check.detail
    assert f"latest {MIGRATIONS[-1][0]}" in check.detail
    assert "127.0.0.1" in check.detail and PASSWORD not in check.detail


async def test_doctor_names_the_fix_for_a_database_it_cannot_reach(tmp_path: Path) -> None:
    url = f"postgresql://quorum:{PASSWORD}@127.0.0.1:{free_port()}/quorum"
    check = await check_database(load_settings(data_dir=tmp_path, database_url=url))
    assert check.status == "FAIL"
    assert "connection refused" in check.detail and PASSWORD not in check.detail
    assert "QUORUM_DATABASE_URL" in check.fix

    check = await check_database(load_settings(data_dir=tmp_path, database_url="mysql://x/y"))
    assert check.status == "FAIL" and "must be a postgresql://" in check.detail


async def test_serve_with_a_wrong_database_url_exits_with_one_sentence(
    weaviate_endpoint: Endpoint, tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "QUORUM_DATA_DIR": str(tmp_path / "data"),
        "QUORUM_HTTP_PORT": "0",
        "QUORUM_API_TOKENS": "tok:team",
        "QUORUM_WEAVIATE_MODE": "local",
        "QUORUM_WEAVIATE_URL": weaviate_endpoint.url,
        "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate_endpoint.grpc_port),
        "QUORUM_DATABASE_URL": f"postgresql://quorum:{PASSWORD}@127.0.0.1:{free_port()}/q",
    }
    proc = await asyncio.create_subprocess_exec(
        str(QUORUM),
        "serve",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        stdin=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 240)
    text = out.decode()
    assert proc.returncode not in (0, None), text
    assert "QUORUM_DATABASE_URL" in text and "connection refused" in text, text
    assert "Traceback" not in text and PASSWORD not in text, text
