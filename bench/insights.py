"""Insights over a large query log, through the path an admin runs: a SQLite session store
holding N logged questions (default 100,000, over 90 days, three platforms, a third of
them unanswered, disliked or weakly supported), read by ``Insights.report`` with the real
MiniLM embedder (ONNX) and grouped into gaps, then served again from the cache and
rendered as the page. Prints a table and the machine's load.

    .venv/bin/python bench/insights.py [--questions 100000] [--no-archive]

The questions are made from 60 things a team asks about, each in 8 phrasings, with
fillers and names, so most are distinct strings (as in a real log) while the groups are
known: the table also reports how many of the gaps hold one thing only.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from adapters.http.insights_view import range_query, report_page  # noqa: E402
from bench.machine import Contention, describe  # noqa: E402
from bot.insights import Insights  # noqa: E402
from bot.sessions import SessionStore  # noqa: E402
from bot.sessions.records import EXCHANGE_COLUMNS, ExchangeRecord  # noqa: E402
from retrieval.encoding.embed import SentenceTransformerEmbedder  # noqa: E402

THINGS = [
    "the VPN",
    "the on-call rota",
    "expense reports",
    "the office move",
    "the deploy freeze",
    "database backups",
    "the hiring plan",
    "sick leave",
    "vacation days",
    "the Keycloak cut-over",
    "laptop refresh",
    "the staging cluster",
    "the incident review",
    "the quarterly budget",
    "the security audit",
    "parental leave",
    "the coffee machine",
    "badge access",
    "the design system",
    "the mobile release",
    "the billing migration",
    "SSO for vendors",
    "the data retention policy",
    "the travel policy",
    "the bonus scheme",
    "the intern program",
    "the API rate limits",
    "the status page",
    "customer escalations",
    "the support rota",
    "the sales kickoff",
    "the roadmap review",
    "the new CRM",
    "GDPR requests",
    "pen tests",
    "the load tests",
    "the Kafka upgrade",
    "the Postgres upgrade",
    "feature flags",
    "the search relevance work",
    "the pricing change",
    "the partner portal",
    "the onboarding checklist",
    "code review rules",
    "the style guide",
    "the test flakiness",
    "the build cache",
    "the monorepo split",
    "the analytics dashboard",
    "the AB test results",
    "the accessibility audit",
    "the translation vendor",
    "the holiday party",
    "the remote work policy",
    "the equipment budget",
    "the team offsite",
    "the performance reviews",
    "the promotion process",
    "the mentoring program",
    "the engineering blog",
]
PHRASINGS = [
    "What is the latest on {t}?",
    "Who owns {t}?",
    "When is {t} happening?",
    "Is there a doc about {t}?",
    "what did we decide about {t}",
    "Any update on {t}?",
    "Can someone explain {t} to me?",
    "where do I find info on {t}",
]
FILLERS = ["", "Quick question: ", "Hi! ", "Sorry to bother, ", "hey team, ", "Hello, "]
NAMES = ["", " (asking for Priya)", " for the Berlin team", " - urgent", " thanks!", " pls"]


def make_log(n: int, seed: int = 11) -> list[tuple[int, ExchangeRecord, float, str]]:
    """``n`` (thing, record, created_at, platform) rows over the last 90 days."""
    rng = random.Random(seed)
    now = time.time()
    rows = []
    for i in range(n):
        thing = rng.randrange(len(THINGS))
        text = (
            rng.choice(FILLERS)
            + rng.choice(PHRASINGS).format(t=THINGS[thing])
            + rng.choice(NAMES)
            + ("" if rng.random() < 0.7 else f" #{rng.randrange(1000)}")
        )
        kind = rng.choices(["answer", "extractive", "nothing_found", "error"], [60, 15, 20, 5])[0]
        support = rng.choice([0.2, 0.5, 0.8]) if kind == "answer" else None
        record = ExchangeRecord(
            user=f"U{rng.randrange(300)}",
            question=text,
            answer="An answer [1]." if kind != "nothing_found" else "Nothing found.",
            kind=kind,
            mode="deep" if rng.random() < 0.05 else "quick",
            sources=[{"n": 1, "title": f"Meeting {thing}", "source_id": f"s{thing}"}],
            citations=[] if support is None else [{"n": 1, "support": support, "start_s": 60.0}],
            timings={"total": rng.uniform(300, 9000)},
            kb="bench",
        )
        rows.append(
            (thing, record, now - rng.uniform(0, 90 * 86400), ("slack", "discord", "api")[i % 3])
        )
    return rows


async def seed(store: SessionStore, rows: list[tuple[int, ExchangeRecord, float, str]]) -> None:
    async with store.driver.transaction() as tx:
        for p in ("slack", "discord", "api"):
            await tx.execute(
                "INSERT INTO sessions (platform, workspace, channel, thread, created_at,"
                " updated_at) VALUES (?, 'W', 'C', 't', 0, 0)",
                p,
            )
        ids = {p: i + 1 for i, p in enumerate(("slack", "discord", "api"))}
        marks = ", ".join("?" * len(rows[0][1].row(1, 0.0)))
        for n, (_thing, record, at, platform) in enumerate(rows):
            await tx.execute(
                f"INSERT INTO exchanges ({EXCHANGE_COLUMNS}) VALUES ({marks})",
                *record.row(ids[platform], at),
            )
            if n % 9 == 0:
                await tx.execute(
                    'INSERT INTO feedback (exchange_id, "user", value, created_at)'
                    " VALUES (?, 'V', ?, 0)",
                    n + 1,
                    -1 if n % 2 else 1,
                )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=100_000)
    args = parser.parse_args()
    rows = make_log(args.questions)
    with tempfile.TemporaryDirectory() as tmp:
        async with SessionStore.open(Path(tmp) / "s.sqlite3") as store:
            t = time.perf_counter()
            await seed(store, rows)
            print(f"seeded {len(rows):,} questions in {time.perf_counter() - t:.1f} s", flush=True)
            embedder = SentenceTransformerEmbedder.from_path()
            insights = Insights(sessions=store, embedder=embedder, archives=None)
            load: list[float | None] = []

            def progress(what: str, done: int, total: int) -> None:
                if done == total or done % (20 * 256) == 0:
                    print(f"  {what}: {done:,}/{total:,}", file=sys.stderr, flush=True)

            c = Contention(None)
            t = time.perf_counter()
            report = await insights.report("bench", time.time() - 91 * 86400, progress=progress)
            cold = time.perf_counter() - t
            load.append(c.others())
            c = Contention(None)
            t = time.perf_counter()
            again = await insights.report("bench", time.time() - 91 * 86400)
            html = report_page(
                again, days=90, range_href=range_query, href=lambda s, t, p: None, users=False
            )
            cached = time.perf_counter() - t
            load.append(c.others())
            embedder.close()
    things = {r.question: thing for thing, r, _, _ in rows}
    pure = sum(1 for g in report.gaps if len(Counter(things[e.question] for e in g.examples)) == 1)
    short = sum(1 for r in report.rows if r.shortfall)
    print()
    print("| what | figure |")
    print("|---|---|")
    print(f"| questions in the log | {report.questions:,} |")
    print(f"| questions the archive fell short on (grouped) | {short:,} |")
    print(f"| cold report: read, count, embed and group (gaps) | {cold:.1f} s |")
    print(
        f"| the page from a cached run (report + HTML, {len(html) / 1024:.0f} KB) | "
        f"{cached * 1000:.0f} ms |"
    )
    print(f"| gaps shown / of them about one thing only | {len(report.gaps)} / {pure} |")
    print()
    print(describe(load))


if __name__ == "__main__":
    asyncio.run(main())
