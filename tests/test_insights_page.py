"""Insights over HTTP as an admin uses them: ``GET /api/insights`` for an admin token only
(a plain API token 403, another knowledge base's admin 403, no token 401), and the page in
headless Chromium, opened by trading the admin token for a signed link: its numbers match
the log, its gaps link to the closest moment's page, one knowledge base's admin never sees
the other's questions, and a tampered or borrowed link gets 403."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page

from bot.config import load_settings
from bot.sessions.sql import SqlSessions
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.insights_questions import QUESTIONS
from tests.pages_harness import DESKTOP, PHONE, Served, chromium, serving
from tests.sample_archive import load_sample
from tests.test_insights import NOW, Seeded, seeded_log, write_log

SHOTS = Path(__file__).resolve().parent.parent / ".pytest_cache" / "pages-shots"


@dataclass
class World:
    served: Served
    kb: str
    other: str
    log: list[Seeded]
    browser: Browser


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[World]:
    kb, other = f"t{uuid.uuid4().hex[:10]}", f"t{uuid.uuid4().hex[:10]}"
    settings = load_settings(
        data_dir=tmp_path_factory.mktemp("insights") / "data",
        admin_tokens=f"admin-a:{kb},admin-b:{other}",
        api_tokens=f"plain:{kb}",
    )
    log = [
        Seeded(kb if s.kb == "alpha" else other, *list(s.__dict__.values())[1:])
        for s in seeded_log(240)
    ]
    # what the archive cannot answer: nobody ever recorded the on-call rota
    log += [
        Seeded(
            kb,
            "slack",
            f"{q} (harbour team)",
            "nothing_found",
            "quick",
            NOW - 60 * i,
            400.0,
            (),
            None,
        )
        for i, q in enumerate(QUESTIONS["oncall"])
    ]
    async with serving(settings, weaviate_endpoint, store, embedder) as served:
        await load_sample(store, embedder, kb)
        sessions = served.services.sessions
        assert isinstance(sessions, SqlSessions)
        await write_log(sessions, log)
        async with chromium() as browser:
            yield World(served, kb, other, log, browser)


async def get(world: World, token: str | None, query: str = "") -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with world.served.http.get(
        f"{world.served.url}/api/insights{query}", headers=headers
    ) as r:
        return r.status, await r.json()


async def test_the_api_answers_admins_of_their_own_knowledge_base_only(world: World) -> None:
    status, body = await get(world, "admin-a", "?gaps=false")
    assert status == 200, body
    mine = [s for s in world.log if s.kb == world.kb]
    assert body["kb"] == world.kb and body["questions"] == len(mine)
    assert body["outcomes"]["nothing_found"] == sum(s.kind == "nothing_found" for s in mine)

    status, body = await get(world, "admin-b", "?gaps=false")
    assert status == 200 and body["questions"] == sum(s.kb == world.other for s in world.log)
    theirs = {q["question"] for q in body["disliked"]} | {q["question"] for q in body["research"]}
    assert not [q for q in theirs if "harbour team" in q]  # kb's questions stay with kb

    assert (await get(world, "admin-b", f"?kb={world.kb}"))[0] == 403
    status, body = await get(world, "plain")
    assert status == 403 and "admin token" in str(body["error"])
    assert (await get(world, None))[0] == 401
    assert (await get(world, "nope"))[0] == 401
    assert (await get(world, "ädmin"))[0] == 401
    status, body = await get(world, "admin-a", "?days=lots")
    assert status == 422 and "days" in str(body["error"])


async def open_insights(world: World, token: str, size: dict[str, int] = DESKTOP) -> Page:
    page = await world.browser.new_page(viewport=size)  # type: ignore[arg-type]
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if "Security Policy" in m.text else None)
    page.on(
        "response",
        lambda r: (
            problems.append(f"{r.status} {r.url}")
            if r.status >= 400 and not r.url.endswith("/favicon.ico")
            else None
        ),
    )
    await page.goto(f"{world.served.url}/insights")
    await page.fill("#token", token)
    await page.click("button[type=submit]")
    await page.wait_for_url("**/insights/*")
    assert problems == []  # no style or script refused by the page's own CSP
    return page


async def test_the_page_shows_what_the_log_says_and_links_the_closest_moment(
    world: World,
) -> None:
    page = await open_insights(world, "admin-a")
    assert await page.locator("h1").inner_text() == f"Insights: {world.kb}"
    cards = await page.locator(".card").all_inner_texts()
    mine = [s for s in world.log if s.kb == world.kb]
    assert cards[0].split()[0] == str(len(mine))
    assert cards[2].split()[0] == str(sum(s.kind == "nothing_found" for s in mine))
    top = page.locator("section.gap").first
    assert "on-call" in (await top.locator("h3").inner_text()).lower() or "call" in (
        await top.locator("h3").inner_text()
    )
    closest = top.locator(".near a").first
    href = await closest.get_attribute("href")
    assert href and href.startswith(f"{world.served.url}/v/") and "#t=" in href
    assert await page.locator("svg[aria-label^='Questions per day']").count() == 1
    # a question opens to its answer
    await top.locator("details summary").first.click()
    assert await top.locator("details[open] p").count() >= 1
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / "insights-desktop.png"), full_page=True)
    await closest.click()
    await page.wait_for_url("**/v/**")
    assert await page.locator("#transcript li").count() > 0

    phone = await open_insights(world, "admin-a", PHONE)
    await phone.screenshot(path=str(SHOTS / "insights-phone.png"), full_page=True)
    width = await phone.evaluate("() => document.documentElement.scrollWidth")
    assert width <= PHONE["width"]  # nothing runs off the side of a phone


async def test_links_are_scoped_and_refused_when_wrong(world: World) -> None:
    page = await open_insights(world, "admin-b")
    assert await page.locator("h1").inner_text() == f"Insights: {world.other}"
    text = await page.content()
    assert "harbour team" not in text
    link = page.url.split("?")[0]
    token = link.rsplit("/", 1)[1]

    http = world.served.http
    async with http.get(link[:-3] + ("AAA" if not link.endswith("AAA") else "BBB")) as r:
        assert r.status == 403 and "does not work" in await r.text()
    recording = world.served.signer.token(world.kb, "some-source")
    async with http.get(f"{world.served.url}/insights/{recording}") as r:
        assert r.status == 403  # a recording's link does not open insights
    async with http.get(f"{world.served.url}/v/{token}") as r:
        assert r.status == 404  # nor does an insights link open a source
    expired = world.served.signer.token(world.kb, "~insights", now=NOW - 400 * 86400)
    async with http.get(f"{world.served.url}/insights/{expired}") as r:
        assert r.status == 403 and "expired" in await r.text()
    async with http.post(f"{world.served.url}/insights", data={"token": "plain"}) as r:
        assert r.status == 403 and "not an admin token" in await r.text()
    async with http.get(f"{link}?days=0") as r:
        assert r.status == 422
