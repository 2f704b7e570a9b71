"""The speakers' rename form on a recording's page, in headless Chromium and as a hostile
caller would post to it: an admin link's page shows the form and a rename there changes
the transcript's speaker column; a plain link shows no form and its post is 403; a post
without the form's key, from another site, too big, or to a tampered link is refused; a
bad name is the page again with one sentence. Screenshots at 1280 and 390 px wide."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

import pytest
import pytest_asyncio
from playwright.async_api import Browser

from bot.config import load_settings
from bot.models import Actor
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.pages_harness import DESKTOP, PHONE, Served, chromium, opened, serving
from tests.speaker_meeting import write_meeting

SID = "2024-06-04-infra-review"
SHOTS = Path(__file__).resolve().parent.parent / ".pytest_cache" / "pages-shots"


@dataclass
class World:
    served: Served
    kb: str
    browser: Browser


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[World]:
    """The meeting (Speaker 1…3) ingested through the write path of a running server."""
    folder = tmp_path_factory.mktemp("speakers-page")
    kb = f"t{uuid.uuid4().hex[:12]}"
    settings = load_settings(data_dir=folder / "data")
    path = write_meeting(folder / "files", SID)
    async with serving(settings, weaviate_endpoint, store, embedder) as served:
        written = await served.services.writer.add(kb, [path], Actor("cli", "test"))
        assert not written.report.failed, written.report.failed
        async with chromium() as browser:
            yield World(served, kb, browser)


def token(link: str) -> str:
    return link.split("/v/", 1)[1]


async def post(world: World, link: str, fields: dict[str, str], **headers: str) -> tuple[int, str]:
    async with world.served.http.post(
        f"{world.served.url}/v/{token(link)}/speakers",
        data=fields,
        headers=headers,
        allow_redirects=False,
    ) as resp:
        return resp.status, await resp.text()


async def speakers_now(world: World) -> tuple[str, ...]:
    infos = await world.served.services.retrieval.store.list_sources(world.kb)
    return next(i.source.speakers for i in infos if i.source.id == SID)


async def shoot(page: object, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)  # type: ignore[attr-defined]


async def test_an_admin_link_renames_a_speaker_from_the_page(world: World) -> None:
    admin = world.served.signer.admin_page(world.kb, SID)
    page = await opened(world.browser, admin, DESKTOP)
    form = page.locator("form.speakers")
    assert await form.is_visible()
    await shoot(page, "speakers-form-desktop")
    await page.select_option("select[name=speaker]", "Speaker 2")
    await page.fill("input[name=name]", "Amara Osei")
    async with page.expect_navigation():
        await page.click("form.speakers button")
    assert page.url == admin, await page.content()  # back on the page (303)
    who = await page.locator("#transcript .who").all_inner_texts()
    assert "Amara Osei" in who and "Speaker 2" not in who
    assert "Amara Osei" in await page.locator("header .meta").inner_text()
    await shoot(page, "speakers-renamed-desktop")

    # A name the recording already has: the page again, saying what to do instead.
    await page.select_option("select[name=speaker]", "Speaker 3")
    await page.fill("input[name=name]", "Amara Osei")
    async with page.expect_navigation():
        await page.click("form.speakers button")
    alert = await page.locator("form.speakers [role=alert]").inner_text()
    assert "already has a speaker 'Amara Osei'" in alert and "merge" in alert
    await page.close()

    phone = await opened(world.browser, admin, PHONE)
    assert await phone.locator("form.speakers").is_visible()
    assert await phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    await shoot(phone, "speakers-form-phone")
    await phone.close()
    assert "Amara Osei" in await speakers_now(world)


async def test_a_plain_link_shows_no_form_and_its_post_is_refused(world: World) -> None:
    plain = world.served.signer.page(world.kb, SID)
    page = await opened(world.browser, plain, DESKTOP)
    assert await page.locator("form").count() == 0
    await page.close()
    before = await speakers_now(world)
    key = world.served.signer.form_key(token(plain))
    status, body = await post(world, plain, {"speaker": "Speaker 1", "name": "X", "csrf": key})
    assert status == 403 and "cannot rename speakers" in body
    assert await speakers_now(world) == before


async def test_hostile_posts_to_an_admin_link_change_nothing(world: World) -> None:
    admin = world.served.signer.admin_page(world.kb, SID)
    key = world.served.signer.form_key(token(admin))
    good = {"speaker": "Speaker 1", "name": "Ben Okafor", "csrf": key}
    before = await speakers_now(world)
    assert (await post(world, admin, {**good, "csrf": "forged"}))[0] == 403
    assert (await post(world, admin, {k: v for k, v in good.items() if k != "csrf"}))[0] == 403
    assert (await post(world, admin, good, Origin="https://evil.example"))[0] == 403
    assert (await post(world, admin, good, **{"Sec-Fetch-Site": "cross-site"}))[0] == 403
    assert (await post(world, admin, {**good, "name": "B" * 5000}))[0] == 413
    other = world.served.signer.admin_page(world.kb, "another-source")
    assert (await post(world, other, good))[0] == 404  # its key, its source: not this one
    tampered = admin[:-3] + ("AAA" if not admin.endswith("AAA") else "BBB")
    assert (await post(world, tampered, good))[0] == 403
    status, body = await post(world, admin, {**good, "name": "  "})
    assert status == 400 and "A speaker&#x27;s name cannot be empty." in body
    status, body = await post(world, admin, {**good, "speaker": "Speaker 9"})
    assert status == 400 and "is not a speaker of" in body
    assert await speakers_now(world) == before
    status, _ = await post(world, admin, good, Origin=world.served.url)
    assert status == 303 and "Ben Okafor" in await speakers_now(world)


async def test_a_form_that_arrives_in_parts_is_read_whole(world: World) -> None:
    """A browser's body may reach the server in several packets: the rename reads them all
    (a form cut at the first packet would lose its key and be refused)."""
    admin = world.served.signer.admin_page(world.kb, SID)
    speaker = (await speakers_now(world))[0]
    body = urlencode(
        {
            "speaker": speaker,
            "name": "Chidi Okonkwo",
            "csrf": world.served.signer.form_key(token(admin)),
        }
    ).encode()

    async def parts() -> AsyncIterator[bytes]:
        yield body[:10]
        await asyncio.sleep(0.3)
        yield body[10:]

    async with world.served.http.post(
        f"{world.served.url}/v/{token(admin)}/speakers",
        data=parts(),
        headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": world.served.url},
        allow_redirects=False,
    ) as resp:
        assert resp.status == 303
    assert "Chidi Okonkwo" in await speakers_now(world)
