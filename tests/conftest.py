"""Shared fixtures: one real Weaviate server and one real PostgreSQL server for the whole
run (temp data dirs, free ports), one embedding model, and an autouse fixture that
isolates environment variables and working directory so a developer's own settings never
leak into a test."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.links.share import LinkSigner
from retrieval.search.search import SearchService
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import EmbeddedServer, Endpoint, async_client, find_binary
from tests.backends import BACKENDS, Served
from tests.emulators.anthropic import AnthropicEmulator
from tests.emulators.openai import OpenAIEmulator
from tests.postgres_server import Postgres, running_postgres

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SHARED_EVAL = REPO.parent / "shared" / "eval"
_PREFIXES = ("QUORUM_", "ANTHROPIC_", "OPENAI_", "SLACK_", "DISCORD_", "AWS_")
PAGES = "http://quorum.test"  # where the tests' search services say Quorum's pages are
SIGNER = LinkSigner(b"a test secret, not a real one", PAGES)


@pytest.fixture(autouse=True)
def _isolate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.startswith(_PREFIXES):
            monkeypatch.delenv(name)
    monkeypatch.setenv("QUORUM_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)  # no stray .env from the repo


@pytest.fixture(scope="session")
def weaviate_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    """A real weaviate-server for the whole test run."""
    binary = find_binary(os.environ.get("QUORUM_WEAVIATE_BINARY"))
    if binary is None:
        pytest.fail("weaviate-server not found: run `make install` first.")
    server = EmbeddedServer(tmp_path_factory.mktemp("weaviate"), binary)
    endpoint = server.start()
    yield endpoint
    server.stop()


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The packaged MiniLM model, loaded once."""
    return SentenceTransformerEmbedder.from_path()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def store(weaviate_endpoint: Endpoint) -> AsyncIterator[WeaviateStore]:
    """A connected store on the session server."""
    async with WeaviateStore.connect(async_client(weaviate_endpoint), weaviate_endpoint.url) as s:
        yield s


@pytest.fixture
def kb() -> str:
    """A fresh knowledge base name, so tests never see each other's data."""
    return f"t{uuid.uuid4().hex[:12]}"


@pytest.fixture
def search(store: WeaviateStore, embedder: SentenceTransformerEmbedder) -> SearchService:
    """A search service over the session store."""
    return SearchService(store, embedder, signer=SIGNER)


@pytest.fixture
def weaviate_env(monkeypatch: pytest.MonkeyPatch, weaviate_endpoint: Endpoint) -> Endpoint:
    """Point Quorum's settings (the CLI, the wiring) at the session server."""
    monkeypatch.setenv("QUORUM_WEAVIATE_MODE", "local")
    monkeypatch.setenv("QUORUM_WEAVIATE_URL", weaviate_endpoint.url)
    monkeypatch.setenv("QUORUM_WEAVIATE_GRPC_PORT", str(weaviate_endpoint.grpc_port))
    return weaviate_endpoint


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A real PostgreSQL server for the whole test run (initdb + pg_ctl in a temp dir)."""
    with running_postgres() as server:
        yield server


@pytest_asyncio.fixture
async def postgres_url(postgres: Postgres) -> str:
    """The URL of a fresh, empty database on the session's PostgreSQL server."""
    return await postgres.create_database()


@pytest_asyncio.fixture(params=["sqlite", "postgresql"])
async def session_database(request: pytest.FixtureRequest) -> dict[str, str]:
    """The settings of the session database a test runs on, once on each kind: SQLite (the
    data dir's own file) and a fresh database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return {}
    postgres: Postgres = request.getfixturevalue("postgres")
    return {"database_url": await postgres.create_database()}


@pytest_asyncio.fixture(params=BACKENDS)
async def served(request: pytest.FixtureRequest) -> AsyncIterator[Served]:
    """One model backend (Claude's API or an OpenAI-compatible server) on its emulator:
    a test that takes it runs once per backend."""
    kind = request.param
    emu = AnthropicEmulator() if kind == "claude" else OpenAIEmulator()
    async with emu:
        yield Served(kind, emu)
