"""``quorum demo``, ``quorum ask`` and ``quorum chat`` on the sample archive (examples/),
without an API key, through typer's CliRunner against the session's Weaviate."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import adapters.cli.main  # noqa: F401  (registers chat, demo and serve on the app)
from adapters.cli.main import app
from adapters.console.app import ConsoleChat
from bot.answer.extractive import MODEL_OFF, NO_MODEL, UNAVAILABLE
from bot.engine import Engine
from bot.sessions import SessionStore
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.conftest import EXAMPLES
from tests.fakes import FakeLLM
from tests.sample_archive import load_sample

runner = CliRunner()
QUESTION = "Why did we move off Auth0?"
PAGES = "http://localhost:8088/v/"  # QUORUM_PUBLIC_URL's default: the local server's pages

pytestmark = pytest.mark.skipif(
    not (EXAMPLES / "recordings").is_dir(), reason="the sample archive is not there yet"
)


@pytest.fixture(scope="module")
def demo_ingested(weaviate_endpoint: Endpoint, tmp_path_factory: pytest.TempPathFactory) -> str:
    """``quorum demo --no-chat`` once: the sample archive in the "demo" knowledge base."""
    env = {
        "QUORUM_WEAVIATE_MODE": "local",
        "QUORUM_WEAVIATE_URL": weaviate_endpoint.url,
        "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate_endpoint.grpc_port),
        "QUORUM_DATA_DIR": str(tmp_path_factory.mktemp("demo-data")),
    }
    result = runner.invoke(app, ["demo", "--no-chat", "--no-speak"], env=env)
    assert result.exit_code == 0, result.output
    assert "Sample archive:" in result.output and QUESTION in result.output
    again = runner.invoke(app, ["demo", "--no-chat", "--no-speak"], env=env)
    assert again.exit_code == 0 and "0 indexed" in again.output  # unchanged files skipped
    return "demo"


def test_ask_without_key_quotes_a_passage_with_a_timestamp_link(
    demo_ingested: str, weaviate_env: Endpoint
) -> None:
    result = runner.invoke(app, ["ask", QUESTION, "--kb", demo_ingested])
    assert result.exit_code == 0, result.output
    out = result.stdout
    text = " ".join(out.split())  # rich wraps the text at the console's width
    assert text.startswith(NO_MODEL)
    assert re.search(r'Auth kickoff: leaving Auth0\? @ \d+:\d\d: John Park: "[^"]*Auth0', text)
    assert re.search(re.escape(PAGES) + r"[\w.-]+#t=\d+", out)
    assert "quick \u00b7 extractive" in out and "total" in out


@pytest.mark.parametrize(
    ("env", "first"),
    [
        ({}, NO_MODEL),
        ({"QUORUM_LLM": "none", "ANTHROPIC_API_KEY": "sk-ant-kept-for-later"}, MODEL_OFF),
        (
            {
                "QUORUM_LLM": "openai",
                "QUORUM_OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
                "QUORUM_MODEL": "qwen2.5:7b-instruct",
                "QUORUM_LLM_MAX_RETRIES": "0",
            },
            UNAVAILABLE,
        ),
    ],
    ids=["no-model-set-up", "model-chosen-off", "own-model-failing"],
)
def test_an_answer_without_a_model_says_why_in_one_line_naming_no_vendor(
    demo_ingested: str, weaviate_env: Endpoint, env: dict[str, str], first: str
) -> None:
    result = runner.invoke(app, ["ask", QUESTION, "--kb", demo_ingested], env=env)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert text.startswith(first)
    opening = result.stdout.split("\n- ")[0]  # the reason, before the quotes
    assert "Claude" not in opening and "Anthropic" not in opening and "API key" not in opening


def test_deep_research_asked_with_the_model_chosen_off_names_the_choice_not_a_vendor(
    demo_ingested: str, weaviate_env: Endpoint
) -> None:
    env = {"QUORUM_LLM": "none", "ANTHROPIC_API_KEY": "sk-ant-kept-for-later"}
    result = runner.invoke(app, ["ask", QUESTION, "--kb", demo_ingested, "--deep"], env=env)
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "QUORUM_LLM=none" in text and "ANTHROPIC_API_KEY" not in text, text
    assert "Claude" not in text and "Anthropic" not in text


def test_ask_json(demo_ingested: str, weaviate_env: Endpoint) -> None:
    result = runner.invoke(app, ["ask", QUESTION, "--kb", demo_ingested, "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["kind"] == "extractive" and answer["mode"] == "quick"
    assert answer["citations"] and answer["sources"]
    kickoff = [c for c in answer["citations"] if c["title"].startswith("Auth kickoff")]
    assert kickoff and isinstance(kickoff[0]["start_s"], float)
    assert kickoff[0]["link"].startswith(PAGES)
    assert f"#t={int(kickoff[0]['start_s'])}" in kickoff[0]["link"]
    assert set(answer["timings"]) >= {"search", "total"}
    assert answer["exchange_id"] is not None


def test_ask_with_filters_that_match_nothing(demo_ingested: str, weaviate_env: Endpoint) -> None:
    result = runner.invoke(
        app,
        ["ask", QUESTION, "--kb", demo_ingested, "--speaker", "Jon Parks", "--after", "2030-01-01"],
    )
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "I couldn't find anything about" in text
    assert "Widen the dates" in text and "John Park" in text


def test_ask_with_a_bad_date_is_one_sentence(weaviate_env: Endpoint) -> None:
    result = runner.invoke(app, ["ask", QUESTION, "--after", "last week"])
    assert result.exit_code == 1
    assert "is not a date; use YYYY-MM-DD" in result.output
    assert "Traceback" not in result.output


def test_ask_with_weaviate_down_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUORUM_WEAVIATE_MODE", "local")
    monkeypatch.setenv("QUORUM_WEAVIATE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("QUORUM_WEAVIATE_GRPC_PORT", "10")
    result = runner.invoke(app, ["ask", QUESTION])
    assert result.exit_code == 1
    assert "not reachable" in result.output and "Traceback" not in result.output


def test_chat_reads_questions_from_piped_stdin(demo_ingested: str, weaviate_env: Endpoint) -> None:
    lines = [
        QUESTION,
        "what did he say about the cost?",
        "/sources",
        "/research Compare them",
        "/quit",
        "never read",
    ]
    result = runner.invoke(app, ["chat", "--kb", demo_ingested], input="\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.count("No model is set up (QUORUM_LLM)") == 3
    assert "Cut-over retro" in out and "Introduction to MCP" in out  # the /sources table
    assert "Deep research needs a model" in out  # the router, wired by open_core
    assert "never read" not in out


async def test_interactive_chat_shows_the_streamed_answer(
    store: WeaviateStore, embedder: SentenceTransformerEmbedder, tmp_path: Path
) -> None:
    await load_sample(store, embedder, "console_sample")
    llm = FakeLLM()
    llm.enqueue("John listed cost, an outage and a rate limit [1].")
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=120, color_system=None)
    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        engine = Engine(archives=SearchService(store, embedder).archive, sessions=sessions, llm=llm)
        chat = ConsoleChat(engine, "console_sample", console, interactive=True)
        assert await chat.handle("Why did we move off Auth0?")
        assert await chat.handle("/reset")
        assert await chat.handle("/nope")
        assert not await chat.handle("/quit")
    out = buffer.getvalue()
    assert "John listed cost, an outage and a rate limit" in out
    assert "Sources" in out and "https://www.youtube.com/watch?v=abc123&t=" in out
    assert "Started a new conversation." in out and "Unknown command /nope" in out


def test_an_overview_question_cites_a_summary_or_topic_at_its_moments(
    demo_ingested: str, weaviate_env: Endpoint
) -> None:
    question = "What was the cut-over retro about?"
    result = runner.invoke(app, ["ask", question, "--kb", demo_ingested, "--json"])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    retro = [s for s in answer["sources"] if s["title"].startswith("Cut-over retro")]
    assert retro, [s["title"] for s in answer["sources"]]
    # Each retro passage (a topic or the summary) opens at its own second.
    assert all(s["link"].endswith(f"#t={int(s['start_s'])}") for s in retro)
    assert answer["citations"]
