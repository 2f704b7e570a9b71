"""A session database another process holds past SQLite's busy timeout (a backup, a long
removal): each door that writes the jobs table says so in one sentence, never a traceback,
and the same request succeeds once the lock is let go (nothing was lost or half done)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from bot.config import load_settings
from retrieval.store.weaviate.server import Endpoint
from tests.test_jobs import aquorum


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
