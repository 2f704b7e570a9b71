"""The connectors' shared status (``bot.connectors``) as an operator reads it: rows written
through the typed API on SQLite and PostgreSQL, the lease one process holds at a time,
`quorum doctor`'s row per connector, `quorum jobs`' connectors section and ``/metrics``."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from adapters.doctor import check_connectors
from bot.config import load_settings
from bot.connectors import ConnectorStatuses, Counts, statuses_of
from bot.jobs import JobTable
from bot.metrics import Metrics
from bot.sessions import SessionStore
from tests import test_sessions
from tests.test_sessions import Opener

open_store = test_sessions.open_store  # a store on SQLite, then on PostgreSQL

runner = CliRunner()


async def test_a_connector_s_runs_counts_and_errors_are_kept(open_store: Opener) -> None:
    async with open_store() as sessions:
        statuses = statuses_of(sessions)
        await statuses.register("s3:calls/in", "s3", "team")
        await statuses.count("s3:calls/in", "seen", 3)
        await statuses.count("s3:calls/in", "queued", 2)
        await statuses.count("s3:calls/in", "failed")
        await statuses.ran("s3:calls/in", next_run=time.time() + 30, cursor="in/b.vtt")
        await statuses.error("s3:calls/in", "The bucket refused the credentials.")
    async with open_store() as sessions:  # as after a restart
        [status] = await statuses_of(sessions).all()
        assert (status.name, status.kind, status.kb) == ("s3:calls/in", "s3", "team")
        assert status.counts == Counts(seen=3, queued=2, failed=1, forgotten=0)
        assert status.cursor == "in/b.vtt"
        assert status.problems()[0].startswith("The bucket refused the credentials. (at ")
        # A run that goes well clears the error, keeps the cursor.
        await statuses_of(sessions).ran("s3:calls/in", next_run=time.time() + 30)
        again = await statuses_of(sessions).get("s3:calls/in")
        assert again is not None and again.problems() == [] and again.cursor == "in/b.vtt"
        with pytest.raises(ValueError):
            await statuses_of(sessions).count("s3:calls/in", "deleted")  # type: ignore[arg-type]


async def test_one_process_holds_a_connector_s_lease_at_a_time(open_store: Opener) -> None:
    async with open_store() as sessions:
        statuses = statuses_of(sessions)
        await statuses.register("folder:/calls", "folder", "team")
        won = await asyncio.gather(
            *(statuses.lease("folder:/calls", f"replica-{i}", 0.5) for i in range(4))
        )
        assert sorted(won) == [False, False, False, True]
        holder = f"replica-{won.index(True)}"
        other = "replica-9"
        assert await statuses.lease("folder:/calls", holder, 0.5)  # renewed
        assert not await statuses.lease("folder:/calls", other, 0.5)
        await asyncio.sleep(0.6)  # the holder stopped renewing: another takes over
        assert await statuses.lease("folder:/calls", other, 5)
        await statuses.release("folder:/calls", other)
        assert await statuses.lease("folder:/calls", holder, 5)  # released: at once


async def test_doctor_jobs_and_metrics_show_each_connector(tmp_path: Path) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    settings.data_dir.mkdir(parents=True)
    async with SessionStore.open(settings.sessions_path) as sessions:
        statuses = ConnectorStatuses(sessions.driver)
        await statuses.register("folder:/srv/calls", "folder", "team")
        await statuses.count("folder:/srv/calls", "seen", 2)
        await statuses.ran("folder:/srv/calls", next_run=time.time() + 5)
        await statuses.register("s3:calls", "s3", "default")
        await statuses.ran(
            "s3:calls", next_run=time.time() - 600, error="The bucket refused the credentials."
        )
        metrics = Metrics()
        await metrics.jobs().read(JobTable(sessions.driver))
    rows = {c.name: c for c in await check_connectors(settings)}
    ok, broken = rows["connector folder:/srv/calls"], rows["connector s3:calls"]
    assert ok.status == "ok" and "folder -> team" in ok.detail and "seen 2" in ok.detail
    assert broken.status == "FAIL"
    assert broken.detail.startswith("The bucket refused the credentials.")
    assert "has not polled since" in broken.detail

    body = metrics.render()[0].decode()
    assert (
        'quorum_connector_items_total{connector="folder:/srv/calls",event="seen",kb="team",'
        'kind="folder"} 2.0' in body
    )
    assert 'quorum_connector_error{connector="s3:calls",kb="default",kind="s3"} 1.0' in body

    env = {"QUORUM_DATA_DIR": str(settings.data_dir), "COLUMNS": "250"}
    result = await asyncio.to_thread(runner.invoke, app, ["jobs"], env=env)
    assert result.exit_code == 0, result.stderr
    assert "connectors" in result.stdout and "folder:/srv/calls" in result.stdout
    assert "The bucket refused" in result.stdout
    result = await asyncio.to_thread(
        runner.invoke, app, ["jobs", "--json", "--connectors"], env=env
    )
    shown = json.loads(result.stdout)
    assert shown["jobs"] == []
    assert [c["name"] for c in shown["connectors"]] == ["folder:/srv/calls", "s3:calls"]
    assert shown["connectors"][0]["counts"]["seen"] == 2
