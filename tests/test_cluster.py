"""Retrieval past one machine: Quorum on a three-node Weaviate cluster (the product's own
weaviate-server, three processes on loopback) keeps answering with one node killed, and
the node rejoins; a replication setting that does not fit the server is one line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from bench.cluster import run
from retrieval.errors import ConfigError
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import EmbeddedServer, Endpoint, async_client

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.mark.slow
async def test_a_node_killed_mid_stream_loses_no_question_and_rejoins(tmp_path: Path) -> None:
    result = await run(
        tmp_path,
        6,
        [EXAMPLES / "recordings" / "2024-01-09-auth-kickoff.vtt"],
        EXAMPLES / "handbook",
    )
    seen = [(p.name, p.asked, p.answered, p.errors, p.nothing_found) for p in result.phases]
    assert [s[1:] for s in seen] == [(2, 2, 0, 0)] * 3, (seen, result)
    # Written at QUORUM with the node down (in the seconds after the kill a write may fail
    # and is then run again, as a user would); once caught up, a read at ALL through the
    # restarted node (every copy must answer) finds both sources.
    assert result.write_while_down.endswith("segments)"), result
    assert result.caught_up_s is not None, result
    assert (result.all_read, result.sources) == (2, 2), result


def test_replicas_a_single_server_cannot_keep_is_one_line(
    weaviate_env: Endpoint, store: WeaviateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ``store`` has created the collections, with one copy, on the single session server.
    monkeypatch.setenv("QUORUM_WEAVIATE_REPLICAS", "3")
    result = CliRunner().invoke(app, ["sources"])
    assert result.exit_code == 1
    assert "Traceback" not in result.stdout + result.stderr
    assert " ".join(result.stderr.split()) == (
        "Error: Weaviate's QuorumSegment keeps 1 copy of each object but "
        "QUORUM_WEAVIATE_REPLICAS is 3: set QUORUM_WEAVIATE_REPLICAS=1 (the factor of "
        "existing collections is changed in Weaviate, not by Quorum)."
    )


async def test_more_replicas_than_nodes_is_said_before_weaviate_refuses(tmp_path: Path) -> None:
    server = EmbeddedServer(tmp_path / "server")
    endpoint = await asyncio.to_thread(server.start)
    try:
        with pytest.raises(ConfigError) as caught:
            async with WeaviateStore.connect(async_client(endpoint), endpoint.url, replicas=3):
                pass
        assert str(caught.value) == (
            f"QUORUM_WEAVIATE_REPLICAS is 3 but Weaviate at {endpoint.url} has 1 node: "
            "start a cluster of at least 3 or lower the setting."
        )
    finally:
        await asyncio.to_thread(server.stop)
