"""Hostile text and broken local state at the command line: titles, transcript lines and
arguments that look like Rich markup are printed as they are, and a bad kb name or a
damaged session database is one sentence, never a traceback."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import adapters.cli.main  # noqa: F401  (registers chat, demo and serve on the app)
from adapters.cli.main import app
from adapters.console.app import ConsoleChat
from bot.engine import Engine
from bot.errors import ConfigError
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import ingest
from tests.fakes import FakeLLM

runner = CliRunner()
MARKUP = "Plan [/] [bold]bold[/bold] [link=x]"


def quorum(*args: str, stdin: str | None = None) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args), input=stdin)
    return result.exit_code, result.stdout, result.stderr


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def marked(tmp_path: Path) -> Path:
    """A folder whose file name, title, speaker and words all look like markup."""
    root = tmp_path / "marked"
    root.mkdir()
    (root / "[red]odd.md").write_text(
        f"---\ntitle: '{MARKUP}'\nurl: https://example.com/a b\n---\n"
        "The zorbulon [/] ships in [bold]March[/bold].\n"
    )
    (root / "also [red] broken.json").write_text("{ nope [/]")
    return root


def test_markup_in_files_and_arguments_is_printed_as_text(
    weaviate_env: Endpoint, marked: Path, kb: str
) -> None:
    code, out, err = quorum("ingest", str(marked), "--kb", kb)
    assert code == 1, out + err  # the broken file failed; the run went on
    assert "also [red] broken.json" in flat(err) and "Traceback" not in out + err

    code, out, err = quorum("sources", "--kb", kb)
    assert code == 0, err
    assert "Plan [/]" in out and "[bold]bold[/bold]" in flat(out)

    code, out, err = quorum("search", "zorbulon", "--kb", kb)
    assert code == 0, err
    assert "[/]" in out and "Plan" in out

    code, out, err = quorum("remove", "[/]", "--kb", kb)
    assert code == 1 and "No source '[/]'" in flat(err) and "Traceback" not in out + err


async def test_chat_sources_and_unknown_commands_print_markup_as_text(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    marked: Path,
    kb: str,
    tmp_path: Path,
) -> None:
    await ingest(store, embedder, kb, [marked])
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, color_system=None)
    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        engine = Engine(
            archives=SearchService(store, embedder).archive, sessions=sessions, llm=FakeLLM()
        )
        chat = ConsoleChat(engine, kb, console, interactive=False)
        assert await chat.handle("/sources")
        assert await chat.handle("/[/]")
    out = buffer.getvalue()
    assert MARKUP in out and "Unknown command /[/]" in out


@pytest.mark.parametrize("name", ["kb\n", "kb\r\n", " kb", "k b"])
def test_kb_names_are_checked_whole(weaviate_env: Endpoint, name: str) -> None:
    code, out, err = quorum("sources", "--kb", name)
    assert code == 1 and "Knowledge base names use" in flat(err)
    assert "Traceback" not in out + err


def _damage(data: Path, how: str) -> None:
    if how == "corrupt":
        data.mkdir(parents=True, exist_ok=True)
        (data / "sessions.sqlite3").write_bytes(b"this is not a database, " * 100)
    elif how == "a folder":
        (data / "sessions.sqlite3").mkdir(parents=True)
    else:  # the data dir is a file, so the database's folder cannot exist
        data.parent.mkdir(parents=True, exist_ok=True)
        data.write_text("not a folder")


@pytest.mark.parametrize("how", ["corrupt", "a folder", "no folder"])
@pytest.mark.parametrize("command", ["ask", "chat"])
def test_a_damaged_session_database_is_one_sentence(
    weaviate_env: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str, command: str
) -> None:
    data = tmp_path / "damaged"
    monkeypatch.setenv("QUORUM_DATA_DIR", str(data))
    _damage(data, how)
    args = ["ask", "What happened?"] if command == "ask" else ["chat"]
    code, out, err = quorum(*args, stdin="hello\n")
    assert code == 1
    # Without a data folder the first thing that needs it says so (the link secret, or
    # the session database); either way one sentence naming QUORUM_DATA_DIR.
    assert "cannot be used" in flat(err) and "QUORUM_DATA_DIR" in flat(err)
    if how != "no folder":
        assert "The session database" in flat(err)
    assert "Traceback" not in out + err


def test_serve_discord_with_an_unreachable_api_is_one_sentence(
    weaviate_env: Endpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    import discord

    monkeypatch.setattr(discord.http.Route, "BASE", discord.http.Route.BASE)  # restored after
    monkeypatch.setenv("DISCORD_TOKEN", "x.y.z")
    monkeypatch.setenv("QUORUM_DISCORD_API_URL", "http://127.0.0.1:9/api/v10")
    monkeypatch.setenv("QUORUM_HTTP_PORT", "0")  # 8088 may be taken on a shared machine
    code, out, err = quorum("serve", "discord")
    assert code == 1
    assert "Discord at http://127.0.0.1:9/api/v10 is not reachable" in flat(err)
    assert "Traceback" not in out + err


async def test_a_session_database_that_fails_mid_chat_is_one_sentence(tmp_path: Path) -> None:
    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        await sessions.driver.execute("PRAGMA query_only=ON")  # every write now fails
        with pytest.raises(ConfigError, match="The session database .* cannot be used"):
            await sessions.claim_event("slack", "Ev1")
