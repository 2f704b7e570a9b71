"""A third chat platform, "rooms", defined only in ``tests/rooms/`` (its settings, its
adapter, its doctor row, its poster) plus one entry in ``adapters.platform.REGISTRY``:
``quorum serve`` runs it on the real core, ``quorum doctor`` checks it, ingest announces
to it, and it gets every rule of the conversation (who is answered, exactly once, the
allow-list, typed options, live progress, apologies, linked citations) without writing
any of them."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from adapters import platform
from adapters.chat.announce import announce, targets
from adapters.chat.conversation import APOLOGY, NOT_ALLOWED
from adapters.cli.main import add_platform_commands, app
from adapters.doctor import run_checks
from bot.config import load_settings
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.errors import ConfigError
from retrieval.search.search import SearchService
from retrieval.store import Store
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import ingest
from tests.fakes import FakeCore, Script
from tests.rooms import adapter
from tests.rooms.adapter import VALID_TOKEN, RoomAdapter, Rooms
from tests.rooms.settings import RoomsSettings

RETRO = Path(__file__).resolve().parent.parent / "examples/recordings/2024-02-27-cutover-retro.txt"


@pytest.fixture
def rooms(monkeypatch: pytest.MonkeyPatch) -> Iterator[Rooms]:
    """The rooms platform registered (its one line) and its servers fresh."""
    monkeypatch.setattr(platform, "REGISTRY", (*platform.REGISTRY, "tests.rooms"))
    api = Rooms()
    monkeypatch.setattr(adapter, "API", api)
    yield api


@pytest.fixture
async def core(tmp_path: Path) -> AsyncIterator[FakeCore]:
    fake = FakeCore(tmp_path / "claims.sqlite3")
    yield fake
    await fake.close()


def event(room: str, id: str, text: str, user: str = "u1") -> dict[str, Any]:
    return {"room": room, "id": id, "user": user, "text": text}


async def test_a_third_platform_gets_every_rule_for_free(core: FakeCore) -> None:
    api = Rooms()
    own = RoomsSettings.model_validate({"rooms": ["r1", "r2"]})
    chat = RoomAdapter(core, api, own)
    ask = event("r1", "e1", "@quorum who chose Cognito? speaker:John")
    await chat.on_event(ask)
    await chat.on_event(ask)  # redelivered: answered once
    await chat.on_event(event("r2", "e2", "lunch?"))  # not for us
    (posted,) = api.posted
    assert posted["text"] == "Searching the archive…"
    assert posted["edits"][-1].startswith("We chose Cognito over Auth0 for cost <https://")
    assert "1. Auth deep dive @ 12:14" in posted["edits"][-1] and "[+1] [-1]" in posted["edits"][-1]
    assert (
        core.questions[0].filters.speaker == "John"
        and core.questions[0].text == "who chose Cognito?"
    )

    await chat.on_event(event("r1", "e3", "and when?", user="u2"))  # follow-up
    assert len(api.posted) == 2

    core.enqueue(Script(error=RuntimeError("boom")))
    await chat.on_event(event("r1", "e4", "@quorum again?", user="u2"))
    assert api.last(-1) == APOLOGY

    asked = len(core.questions)
    await chat.on_event(event("r1", "e5", "@quorum x after:someday"))  # a bad option: told
    assert "is not a date" in api.last(-1) and len(core.questions) == asked

    # Claimed before the allow-list (the same order on every platform): a refused message
    # redelivered is refused once, and never reaches the core.
    outside = event("r9", "e6", "@quorum who chose Cognito?")
    await chat.on_event(outside)
    await chat.on_event(outside)
    assert [p["text"] for p in api.posted if p["room"] == "r9"] == [NOT_ALLOWED]
    assert len(core.questions) == asked


def test_quorum_serve_runs_it_on_the_real_core(
    rooms: Rooms, weaviate_env: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    said = " ".join(runner.invoke(app, ["serve", "rooms"]).stderr.split())
    assert "Set ROOMS_TOKEN to serve rooms." in said  # not configured: named
    assert "rooms" in runner.invoke(app, ["serve", "teams"]).stderr  # the names it knows
    monkeypatch.setenv("QUORUM_ROOMS_POLL_S", "-1")  # its settings load like the core's
    bad = runner.invoke(app, ["serve"])
    assert bad.exit_code == 1 and "Traceback" not in bad.output
    assert "QUORUM_ROOMS_POLL_S: Input should be greater than 0." in " ".join(bad.stderr.split())
    monkeypatch.delenv("QUORUM_ROOMS_POLL_S")

    monkeypatch.setenv("ROOMS_TOKEN", VALID_TOKEN)
    monkeypatch.setenv("QUORUM_HTTP_PORT", "0")
    ask = event("lobby", "m1", "@quorum who chose Cognito?")
    rooms.inbox += [ask, ask, event("hall", "m2", "lunch?")]  # the last: not for us
    result = runner.invoke(app, ["serve", "rooms"])  # returns once its inbox is empty
    assert result.exit_code == 0, result.output
    (answer,) = rooms.posted  # answered once, through the real session store's claims
    assert answer["text"] == "Searching the archive…"
    assert answer["edits"] and rooms.last(0) not in (APOLOGY, answer["text"])


async def test_quorum_doctor_checks_it(
    rooms: Rooms, weaviate_env: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = {c.name: c for c in await run_checks(load_settings())}
    assert "rooms" not in checks and "ROOMS_TOKEN" in checks["serves"].fix

    monkeypatch.setenv("ROOMS_TOKEN", "stale")
    checks = {c.name: c for c in await run_checks(load_settings())}
    assert checks["serves"].detail == "rooms"
    assert checks["rooms"].status == "FAIL" and "ROOMS_TOKEN" in checks["rooms"].detail
    assert checks["rooms"].fix == "Copy the token from the rooms admin page."

    monkeypatch.setenv("QUORUM_ROOMS_POLL_S", "soon")
    result = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    said = " ".join(result.output.split())
    assert result.exit_code == 1 and "QUORUM_ROOMS_POLL_S: Input should be a valid number" in said


async def test_ingest_announces_to_it(
    rooms: Rooms,
    store: Store,
    embedder: SentenceTransformerEmbedder,
    kb: str,
    tmp_path: Path,
) -> None:
    assert targets("rooms:lobby")[0].platform == "rooms"
    with pytest.raises(ConfigError, match="rooms:ROOM"):
        targets("teams:general")
    folder = tmp_path / "in"
    folder.mkdir()
    for path in (RETRO, RETRO.with_suffix(".meta.json")):
        shutil.copy(path, folder / path.name)
    report = await ingest(store, embedder, kb, [folder])
    settings = load_settings(rooms_token=VALID_TOKEN, post_summaries="rooms:lobby")
    archive = SearchService(store, embedder).archive(kb)
    assert await announce(settings, archive, report.results) == []
    (posted,) = rooms.posted
    assert posted["room"] == "lobby" and "New recording: Cut-over retro" in posted["text"]


def test_its_commands_join_the_command_line(rooms: Rooms) -> None:
    cli = typer.Typer()
    cli.command("version")(lambda: None)  # a group needs a sibling to be addressed by name
    add_platform_commands(cli)
    rooms.posted.append({"room": "lobby", "text": "hi", "edits": []})
    result = CliRunner().invoke(cli, ["rooms", "list"])
    assert result.exit_code == 0 and result.output.strip() == "lobby"
