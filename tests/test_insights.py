"""Insights as the person who runs Quorum uses them: a seeded log of a few hundred
questions across two knowledge bases on SQLite and PostgreSQL, counted the way the log
says (per outcome, day and platform, 👍/👎, answer time), one knowledge base never
showing another's questions; the unanswered ones grouped by meaning (a labelled set of
70 paraphrases) with the archive's closest moment; and ``quorum insights`` in a terminal."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from bot.insights import Insights
from bot.insights.gaps import embed_questions, group_vectors
from bot.insights.report import build, percentile
from bot.models import ThreadKey
from bot.sessions import ExchangeRecord, SessionStore
from bot.sessions.postgres import PostgresSessionStore
from bot.sessions.sql import SqlSessions
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.store import Store
from retrieval.store.weaviate.server import Endpoint
from tests.insights_questions import QUESTIONS
from tests.sample_archive import load_sample

Opener = Callable[[], contextlib.AbstractAsyncContextManager[SqlSessions]]
DAY = 86400.0
NOW = time.time()
KINDS = ("answer", "answer", "extractive", "nothing_found", "answer", "error", "help")


@dataclass(frozen=True)
class Seeded:
    kb: str
    platform: str
    question: str
    kind: str
    mode: str
    at: float
    total_ms: float
    votes: tuple[int, ...]
    support: float | None


def seeded_log(n: int = 320, seed: int = 7) -> list[Seeded]:
    """A deterministic log: two knowledge bases, three platforms, ten days."""
    rng = random.Random(seed)
    topics = list(QUESTIONS.values())
    log = []
    for i in range(n):
        topic = topics[i % len(topics)]
        kind = KINDS[i % len(KINDS)]
        log.append(
            Seeded(
                kb="alpha" if i % 3 else "beta",
                platform=("slack", "discord", "api")[i % 3 if i % 2 else 0],
                question=topic[rng.randrange(len(topic))],
                kind=kind,
                mode="deep" if i % 13 == 0 else "quick",
                at=NOW - (i % 10) * DAY - rng.uniform(0, 3600),
                total_ms=rng.uniform(200, 9000),
                votes=(1,) if i % 7 == 0 else (-1, -1) if i % 11 == 0 else (),
                support=rng.choice([None, 0.2, 0.6, 0.9]) if kind == "answer" else None,
            )
        )
    return log


async def write_log(store: SqlSessions, log: list[Seeded]) -> None:
    for i, s in enumerate(log):
        thread = ThreadKey(s.platform, "W1", "C1", f"t{i % 40}")
        citations = [] if s.support is None else [{"n": 1, "support": s.support, "start_s": 5.0}]
        record = ExchangeRecord(
            user=f"U{i % 9}",
            question=s.question,
            answer="An answer [1]." if citations else "Nothing found.",
            kind=s.kind,
            mode=s.mode,
            sources=[{"n": 1, "title": "Auth kickoff", "source_id": "kickoff"}],
            citations=citations,
            timings={"total": s.total_ms},
            kb=s.kb,
        )
        exchange = await store.add_exchange(thread, record)
        await store.driver.execute(
            "UPDATE exchanges SET created_at = ? WHERE id = ?", s.at, exchange
        )
        for voter, value in enumerate(s.votes):
            await store.record_feedback(exchange, f"V{voter}", value)


@pytest.fixture(params=["sqlite", "postgresql"])
def open_store(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    if request.param == "sqlite":
        path = tmp_path / "s.sqlite3"
        return lambda: SessionStore.open(path)
    url: str = request.getfixturevalue("postgres_url")
    return lambda: PostgresSessionStore.open(url)


async def test_numbers_match_the_log_and_stay_in_their_knowledge_base(open_store: Opener) -> None:
    log = seeded_log()
    async with open_store() as store:
        await write_log(store, log)
        for kb in ("alpha", "beta"):
            mine = [s for s in log if s.kb == kb]
            rows = await store.asked(kb, NOW - 30 * DAY, NOW + 1)
            report = build(kb, NOW - 30 * DAY, NOW + 1, rows)
            assert report.questions == len(mine) and {r.kb for r in rows} == {kb}
            assert {r.question for r in rows} <= {s.question for s in mine}
            outcome = Counter(
                s.kind if s.kind in ("extractive", "nothing_found", "error") else "answered"
                for s in mine
            )
            assert report.outcomes == {k: outcome[k] for k in report.outcomes}
            assert report.up == sum(v > 0 for s in mine for v in s.votes)
            assert report.down == sum(v < 0 for s in mine for v in s.votes)
            per_day = Counter(time.strftime("%Y-%m-%d", time.gmtime(s.at)) for s in mine)
            assert {d: sum(c.values()) for d, c in report.days if c} == dict(per_day)
            by_platform = Counter(s.platform for s in mine)
            assert {p: sum(c.get(p, 0) for _, c in report.days) for p in by_platform} == dict(
                by_platform
            )
            timed = [s.total_ms for s in mine if s.kind != "help"]
            assert report.median_ms == pytest.approx(percentile(timed, 0.5))
            assert report.p95_ms == pytest.approx(percentile(timed, 0.95))
            assert len(report.research) == sum(s.mode == "deep" for s in mine)
            assert len(report.disliked) == sum(sum(s.votes) < 0 for s in mine)
        # a range that ends before the log sees none of it
        assert await store.asked("alpha", NOW - 60 * DAY, NOW - 30 * DAY) == []


def _quality(groups: list[list[int]], labels: list[str]) -> tuple[float, float]:
    """(share of questions in a group of their own topic's majority, share of each
    topic's questions in its biggest group)."""
    purity = sum(max(Counter(labels[i] for i in g).values()) for g in groups) / len(labels)
    complete = sum(
        max(sum(labels[i] == topic for i in g) for g in groups) for topic in set(labels)
    ) / len(labels)
    return purity, complete


async def test_paraphrases_are_grouped_and_topics_kept_apart(
    embedder: SentenceTransformerEmbedder,
) -> None:
    labels = [t for t, qs in QUESTIONS.items() for _ in qs]
    texts = [q for qs in QUESTIONS.values() for q in qs]
    assert len(texts) >= 60
    vectors = await embed_questions(embedder, texts)
    for seed in range(3):  # whatever order the questions were asked in
        order = list(range(len(texts)))
        random.Random(seed).shuffle(order)
        groups = [[order[i] for i in g] for g in group_vectors(vectors[order])]
        purity, complete = _quality(groups, labels)
        assert purity >= 0.85 and complete >= 0.85, (seed, purity, complete, len(groups))
        assert len(groups) <= 2 * len(QUESTIONS)


def test_grouping_holds_for_many_questions() -> None:
    """Ten thousand questions about 50 things, each asked with as much noise as MiniLM
    puts between paraphrases (two of one thing about 0.5 alike): one group per thing."""
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(50, 384)).astype(np.float32)
    members = np.repeat(np.arange(50), 200)
    vectors = centres[members] + rng.normal(scale=1.0, size=(len(members), 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    groups = group_vectors(vectors)
    assert len(groups) == 50
    assert all(len({int(members[i]) for i in g}) == 1 for g in groups)


async def test_gaps_name_what_went_unanswered_and_the_closest_moment(
    store: Store,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    kb: str,
    tmp_path: Path,
) -> None:
    await load_sample(store, embedder, kb)
    async with SessionStore.open(tmp_path / "s.sqlite3") as sessions:
        log = [
            Seeded(kb, "slack", q, "nothing_found", "quick", NOW - i, 500.0, (), None)
            for i, q in enumerate(QUESTIONS["oncall"] + QUESTIONS["auth0"][:3])
        ]
        log.append(
            Seeded(kb, "slack", "Why did we pick Keycloak?", "answer", "quick", NOW, 9, (1,), 0.9)
        )
        await write_log(sessions, log)
        insights = Insights(sessions=sessions, embedder=embedder, archives=search.archive)
        report = await insights.report(kb, NOW - DAY)
        assert report.questions == len(log)
        top = report.gaps[0]
        assert top.count >= 6 and "call" in top.label.lower()
        assert top.reasons == {"unanswered": top.count}
        assert top.nearest and top.nearest[0].title and top.nearest[0].text
        # an answered, liked question is no gap
        assert all("Keycloak?" not in r.question for g in report.gaps for r in g.examples)
        # served again from the cache, not rebuilt
        assert await insights.report(kb, NOW - DAY) is report


runner = CliRunner()


def test_the_command_prints_tables_json_and_csv(
    weaviate_env: Endpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kb: str
) -> None:
    import asyncio

    monkeypatch.setenv("QUORUM_DATA_DIR", str(tmp_path / "data"))
    log = seeded_log(60)

    async def seed() -> None:
        async with SessionStore.open(tmp_path / "data" / "sessions.sqlite3") as store:
            await write_log(store, [s.__class__(**{**s.__dict__, "kb": kb}) for s in log])

    (tmp_path / "data").mkdir()
    asyncio.run(seed())
    result = runner.invoke(app, ["insights", "--kb", kb, "--json", "--no-gaps"])
    assert result.exit_code == 0, result.stderr
    shown = json.loads(result.stdout)
    assert shown["questions"] == 60 and shown["kb"] == kb
    assert shown["outcomes"]["nothing_found"] == sum(s.kind == "nothing_found" for s in log)
    assert all("user" not in q for q in shown["disliked"])  # names only when opted in

    result = runner.invoke(app, ["insights", "--kb", kb, "--csv", "--no-gaps"])
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert len(rows) == 60 and "user" not in rows[0]
    monkeypatch.setenv("QUORUM_INSIGHTS_USERS", "true")
    result = runner.invoke(app, ["insights", "--kb", kb, "--csv", "--no-gaps"])
    assert {r["user"] for r in csv.DictReader(io.StringIO(result.stdout))} >= {"U0", "U1"}

    result = runner.invoke(app, ["insights", "--kb", kb, "--no-gaps"])
    assert result.exit_code == 0 and "Questions per day" in result.stdout

    result = runner.invoke(app, ["insights", "--kb", kb, "--since", "May"])
    assert result.exit_code == 1 and "--since 'May' is not a date" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
