"""Quorum's own pages, opened from real answers in headless Chromium: a recording ingested
from a local file plays at the cited second with the quoted sentence highlighted, clicking
another line seeks, a PDF opens at its page, Markdown shows the cited passage; and the
link is a capability: tampered, expired, other-source and other-tenant links get 403, a
removed source 404, media answers Range requests with 206 and nothing else is reachable."""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser

from bot.config import load_settings
from bot.models import Actor, Answer, Question, ThreadKey
from bot.write import Writer
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.indexer import ingest
from tests.conftest import EXAMPLES
from tests.media_fixtures import speak
from tests.pages_harness import PHONE, Served, chromium, media_state, opened, serving

SAID = [
    "Welcome to the planning call for the new warehouse.",
    "The zanzibar launch moves to the second week of June.",
    "Marco owns the billing migration checklist.",
    "We review the quarterly budget on Friday afternoon.",
]
HANDBOOK = """# On-call handbook

## Paging

Page the secondary after fifteen minutes without an acknowledgement.

## Escalation

The incident commander decides when to call the vendor's emergency line.
"""
SHOTS = Path(__file__).resolve().parent.parent / ".pytest_cache" / "pages-shots"


@dataclass
class World:
    served: Served
    kb: str
    recording: str
    browser: Browser


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def world(
    weaviate_endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[World]:
    """A knowledge base with a recording, a PDF and a Markdown file ingested from disk."""
    folder = tmp_path_factory.mktemp("pages")
    kb = f"t{uuid.uuid4().hex[:12]}"
    settings = load_settings(data_dir=folder / "data")
    files = folder / "files"
    files.mkdir()
    speak(files / "warehouse-planning.wav", SAID, gap_s=3.0)
    shutil.copy(EXAMPLES / "docs" / "auth-migration-plan.pdf", files / "migration-plan.pdf")
    (files / "on-call.md").write_text(HANDBOOK)
    async with serving(settings, weaviate_endpoint, store, embedder) as served:
        r = served.services.retrieval
        report = await ingest(
            store,
            r.embedder,
            kb,
            [files],
            chunking=r.chunking,
            transcriber=r.transcriber,
            media=r.media,
        )
        assert not report.failed, report.failed
        async with chromium() as browser:
            yield World(served, kb, "warehouse-planning", browser)


async def ask(world: World, text: str) -> Answer:
    thread = ThreadKey("console", "local", "pages", uuid.uuid4().hex)
    return await world.served.services.engine.ask(Question(text, thread, "u1", world.kb))


async def shoot(page: object, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=False)  # type: ignore[attr-defined]


async def test_a_recordings_citation_opens_playing_at_the_quoted_sentence(world: World) -> None:
    answer = await ask(world, "Who owns the checklist?")
    cite = answer.citations[0]
    assert cite.link and cite.link.startswith(f"{world.served.url}/v/"), cite.link
    assert cite.quote and "migration checklist" in cite.quote
    second = int(re.findall(r"#t=(\d+)", cite.link)[0])

    page = await opened(world.browser, cite.link)
    state = await media_state(page)
    assert abs(state["t"] - second) < 1.0, (state, second)
    assert state["cited"] and cite.quote in state["cited"]
    assert not state["paused"]  # it plays (autoplay is allowed in the test browser)
    await shoot(page, "recording-desktop")

    # Clicking another line seeks there and highlights it.
    other = page.locator("#transcript li", has_text="quarterly budget")
    target = int(await other.get_attribute("data-l") or -1)
    await other.locator("span").click()
    await page.wait_for_function(
        f"() => Math.abs(document.getElementById('media').currentTime - {target}) < 1"
    )
    assert "quarterly budget" in (await media_state(page))["cited"]

    # The keyboard reaches every line's time and Enter seeks.
    first = page.locator("#transcript li a.time").first
    await first.focus()
    await page.keyboard.press("Enter")
    await page.wait_for_function("() => document.getElementById('media').currentTime < 1.5")
    await page.close()

    phone = await opened(world.browser, cite.link, PHONE)
    state = await media_state(phone)
    assert abs(state["t"] - second) < 1.0
    assert await phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    await shoot(phone, "recording-phone")
    await phone.close()


async def test_a_pdf_citation_opens_at_its_page_and_markdown_at_its_passage(
    world: World,
) -> None:
    served = world.served
    [pdf] = [
        h
        for h in await served.services.retrieval.search.search(
            world.kb, "rollback plan per-org auth_provider flag", k=8
        )
        if h.segment.page is not None
    ][:1]
    assert pdf.link and f"#page={pdf.segment.page}" in pdf.link
    page = await opened(world.browser, pdf.link)
    cited = page.locator(".cited")
    assert await cited.get_attribute("id") == f"page-{pdf.segment.page}"
    href = await page.locator("#pdf").get_attribute("href")
    assert href and href.endswith(f"/file#page={pdf.segment.page}")
    await shoot(page, "pdf-desktop")
    async with served.http.get(served.url + href.split("#")[0]) as r:
        assert r.status == 200 and r.content_type == "application/pdf"
        assert (await r.read()).startswith(b"%PDF")
    await page.close()
    phone = await opened(world.browser, pdf.link, PHONE)
    assert await phone.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    await shoot(phone, "pdf-phone")
    await phone.close()

    [md] = [
        h
        for h in await served.services.retrieval.search.search(
            world.kb, "who decides to call the vendor emergency line", k=8
        )
        if h.source.id == "on-call"
    ][:1]
    assert md.link and "#u=" in md.link
    page = await opened(world.browser, md.link)
    assert "emergency line" in (await page.locator(".cited").inner_text())
    await shoot(page, "markdown-desktop")
    await page.close()


async def test_media_answers_range_requests_with_206(world: World) -> None:
    served = world.served
    media = served.signer.page(world.kb, world.recording) + "/media"
    async with served.http.get(media, headers={"Range": "bytes=100-199"}) as r:
        assert r.status == 206
        assert r.headers["Content-Range"].startswith("bytes 100-199/")
        assert r.content_type == "audio/wav"
        assert len(await r.read()) == 100
    async with served.http.get(media) as r:
        assert r.status == 200 and r.headers["Accept-Ranges"] == "bytes"
        assert r.headers["X-Content-Type-Options"] == "nosniff"


async def test_tampered_expired_other_source_and_other_tenant_links_get_403(
    world: World,
) -> None:
    served, signer = world.served, world.served.signer
    good = signer.page(world.kb, world.recording)
    token = good.rsplit("/", 1)[1]
    body, sig = token.split(".")
    other_source = signer.token(world.kb, "on-call").split(".")[0]
    other_kb = signer.token("elsewhere", world.recording).split(".")[0]
    expired = signer.page(world.kb, world.recording, now=0)
    cases = {
        "tampered signature": f"{served.url}/v/{body}.{sig[:-2]}AA",
        "another source's payload": f"{served.url}/v/{other_source}.{sig}",
        "another tenant's payload": f"{served.url}/v/{other_kb}.{sig}",
        "garbage": f"{served.url}/v/not-a-token",
        "expired": expired,
    }
    for name, url in cases.items():
        for suffix in ("", "/media", "/file"):
            async with served.http.get(url + suffix) as r:
                text = await r.text()
                assert r.status == 403, (name, suffix, r.status)
                assert world.kb not in text and world.recording not in text, name
                assert ("expired" in text) == (name == "expired"), name
                assert r.headers["Content-Security-Policy"].startswith("default-src 'none'")
    async with served.http.get(good) as r:
        assert r.status == 200
        assert r.headers["Referrer-Policy"] == "no-referrer"
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]


async def test_no_url_reaches_a_file_but_the_sources_own(world: World) -> None:
    served = world.served
    token = served.signer.token(world.kb, world.recording)
    for path in (
        f"/v/{token}/../../etc/passwd",
        f"/v/{token}/media/../../../etc/passwd",
        f"/v/{token}/%2e%2e%2f%2e%2e%2fetc%2fpasswd",
        "/v/..%2f..%2fetc%2fpasswd/media",
    ):
        async with served.http.get(served.url + path) as r:
            assert r.status in (403, 404), (path, r.status)
            assert b"root:" not in await r.read()


async def test_a_removed_source_is_404_and_a_rotated_secret_revokes(world: World) -> None:
    served = world.served
    page = served.signer.page(world.kb, "on-call")
    async with served.http.get(page) as r:
        assert r.status == 200
    library = served.services.engine.library
    assert library is not None
    await library.forget(world.kb, "on-call")
    for suffix in ("", "/file"):
        async with served.http.get(page + suffix) as r:
            assert r.status == 404
            assert "no longer" in await r.text()


async def test_a_moved_or_deleted_recording_still_plays_from_the_copy_quorum_kept(
    world: World, tmp_path: Path
) -> None:
    served, kb = world.served, f"t{uuid.uuid4().hex[:12]}"
    wav = speak(tmp_path / "standup.wav", ["The quarterly budget review is on Friday."]).path
    # Through the one write path every door uses: it hands the indexer the media store.
    await Writer.of(served.services.retrieval).add(kb, [wav], Actor("cli"))
    page = served.signer.page(kb, "standup")
    wav.unlink()
    async with served.http.get(page) as resp:
        text = await resp.text()
        assert "id=media" in text and "quarterly budget" in text
    browser_page = await opened(world.browser, page + "#t=0")
    assert (await media_state(browser_page))["t"] < 1.0
    await browser_page.close()
