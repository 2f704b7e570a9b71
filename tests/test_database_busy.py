"""A session database another process holds past SQLite's busy timeout (a backup, a long
removal): each door that writes the jobs table says so in one sentence, never a traceback,
and the same request succeeds once the lock is let go (nothing was lost or half done)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import asyncpg

from adapters.chat.uploads import Upload, Uploads
from adapters.http.server import OpsServer
from bot.config import load_settings
from bot.metrics import MeteredCore, Metrics
from bot.models import Actor
from bot.wiring import open_core
from retrieval.store.weaviate.server import Endpoint
from tests.test_jobs import aquorum
from tests.test_uploads import Said


@contextlib.contextmanager
def held(database: Path) -> Iterator[None]:
    """Another process's write lock on ``database``, held until the block ends."""
    other = sqlite3.connect(database, isolation_level=None, timeout=30)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


def refused_busy(said: tuple[int, str, str], database: Path) -> None:
    """Exit 1 and one sentence naming the busy file, however the terminal wrapped it."""
    code, out, err = said
    assert code == 1, out + err
    squeezed = "".join(err.split())
    assert f"Error:Thesessiondatabase{database}isbusy(anotherprocessholdsit)" in squeezed, err
    assert "Traceback" not in out + err
    assert err.count("Error:") == 1


async def test_commands_on_a_locked_database_say_so_and_work_once_it_is_free(
    weaviate_env: Endpoint, tmp_path: Path, kb: str
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "standup.txt").write_text("[00:00:05] Ana: The quillet rota starts on Monday.\n")
    code, out, err = await aquorum("ingest", str(notes), "--kb", kb)
    assert code == 0, out + err
    later = tmp_path / "later"
    later.mkdir()
    (later / "rota.txt").write_text("[00:00:07] Ben: The rota moves to Tuesday in June.\n")
    code, out, err = await aquorum("ingest", str(later), "--kb", kb, "--no-wait")
    assert code == 0, err
    queued = out.split("\t")[0]
    database = load_settings().sessions_path

    with held(database):  # each refusal waits out the 5 s busy timeout
        refused_busy(await aquorum("ingest", str(notes), "--kb", kb, "--no-wait"), database)
        refused_busy(await aquorum("jobs", "cancel", queued), database)
        refused_busy(await aquorum("remove", "standup", "--kb", kb), database)

    # Nothing was half done: the queued job and the source are as they were, and the same
    # commands now do what they were asked.
    code, out, err = await aquorum("ingest", str(notes), "--kb", kb, "--no-wait")
    assert code == 0 and out.strip(), err
    code, out, err = await aquorum("jobs", "cancel", queued)
    assert code == 0 and f"Cancelled job {queued}" in out, err
    code, out, err = await aquorum("remove", "standup", "--kb", kb)
    assert code == 0 and "Removed standup" in out, err


async def test_the_jobs_route_on_a_locked_database_is_503_and_works_once_it_is_free(
    weaviate_env: Endpoint, postgres_url: str, tmp_path: Path, kb: str
) -> None:
    # PostgreSQL's lock_timeout, set in the URL as an operator would, stands for SQLite's
    # busy timeout (SQLite lets a reader past a writer's lock; PostgreSQL's ACCESS
    # EXCLUSIVE, taken by a migration or a VACUUM FULL, stops readers too).
    settings = load_settings(
        data_dir=tmp_path / "data",
        database_url=f"{postgres_url}?lock_timeout=1000",
        api_tokens=f"tok:{kb}",
    )
    server = OpsServer(settings)
    port = await server.start(0, "127.0.0.1")
    jobs, auth = f"http://127.0.0.1:{port}/api/jobs", {"Authorization": "Bearer tok"}
    try:
        async with open_core(settings) as services, aiohttp.ClientSession() as http:
            metrics = Metrics(services.llm)
            server.attach(services, MeteredCore(services.engine, metrics), metrics)
            other = await asyncpg.connect(postgres_url)
            try:
                async with other.transaction():
                    await other.execute("LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE")
                    async with http.get(jobs, headers=auth) as r:
                        assert r.status == 503 and r.headers["Retry-After"].isdigit()
                        said = await r.json()
                assert said == {
                    "error": "Quorum's session database is busy right now; try again shortly."
                }
            finally:
                await other.close()
            async with http.get(jobs, headers=auth) as r:
                assert r.status == 200 and (await r.json()) == {"kb": kb, "jobs": []}
    finally:
        await server.stop()


async def test_a_chat_upload_and_forget_on_a_locked_database_say_so_in_the_thread(
    weaviate_env: Endpoint, tmp_path: Path, kb: str
) -> None:
    def upload(name: str, text: str) -> Upload:
        async def fetch(to: Path, limit: int) -> None:
            await asyncio.to_thread(to.write_text, text)

        return Upload(name, len(text), fetch)

    settings = load_settings()
    standup = upload("standup.txt", "[00:00:05] Ana: The quillet rota starts on Monday.\n")
    rota = upload("rota.txt", "[00:00:07] Ben: The rota moves to Tuesday in June.\n")
    by = Actor("slack", "U1")
    async with open_core(settings) as services:
        library = services.engine.library
        assert library is not None
        uploads = Uploads(library, 20)
        assert await uploads.add(kb, standup, Said(), by) is not None
        refused = Said()
        with held(settings.sessions_path):
            assert await uploads.add(kb, rota, refused, by) is None
            forgot = await uploads.forget(kb, "standup", by)
        busy = f"The session database {settings.sessions_path} is busy (another process holds it)"
        assert refused.lines[-1].startswith(f"I couldn't add rota.txt: {busy}")
        assert forgot.startswith(f"I couldn't remove `standup`: {busy}")
        # Refused whole: the upload not kept, the source not half removed; the same upload
        # and the same /forget do what they were asked once the database is free.
        assert not list((settings.data_dir / "uploads").rglob("rota.txt"))
        assert [i.source.id for i in await library.sources(kb)] == ["standup"]
        said = Said()
        added = await uploads.add(kb, rota, said, by)
        assert added is not None and added.status == "added", said.lines
        assert (await uploads.forget(kb, "standup", by)).startswith("Removed `standup`")
        assert [i.source.id for i in await library.sources(kb)] == ["rota"]
