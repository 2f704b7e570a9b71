"""What the page tests share: the ops server with the real core over the session Weaviate
(signed links on its own address), and headless Chromium from Debian driven by Playwright
(never a downloaded browser)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from playwright.async_api import Browser, Page, async_playwright

from adapters.http.server import OpsServer
from bot.config import Settings
from bot.metrics import MeteredCore, Metrics
from bot.wiring import CoreServices, open_core, retrieval_config
from retrieval.encoding.embed import LazyEmbedder, SentenceTransformerEmbedder
from retrieval.links.share import LinkSigner, load_secret
from retrieval.search.search import SearchService
from retrieval.service import Retrieval
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@dataclass
class Served:
    url: str
    server: OpsServer
    services: CoreServices
    signer: LinkSigner
    http: aiohttp.ClientSession


@contextlib.asynccontextmanager
async def serving(
    settings: Settings,
    endpoint: Endpoint,
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
) -> AsyncIterator[Served]:
    """The ops server on a free port with the core attached; links signed for its address."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    server = OpsServer(settings)
    port = await server.start(0, "127.0.0.1")
    url = f"http://127.0.0.1:{port}"
    lazy = LazyEmbedder(None, settings.embed_batch_size)
    lazy._model = embedder  # the session's model, already loaded
    signer = LinkSigner(load_secret(settings.data_dir), url, settings.link_ttl_days)
    search = SearchService(store, lazy, signer=signer)
    config = retrieval_config(settings)
    retrieval = Retrieval(config, store, lazy, search, config.transcriber())
    try:
        async with open_core(settings, retrieval=retrieval) as services:
            metrics = Metrics(services.llm)
            server.attach(services, MeteredCore(services.engine, metrics), metrics)
            async with aiohttp.ClientSession() as http:
                yield Served(url, server, services, signer, http)
    finally:
        await server.stop()


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless."""
    if shutil.which(CHROMIUM) is None:
        pytest.fail("chromium is not installed: run `make install` (it installs it).")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


async def opened(browser: Browser, link: str, size: dict[str, int] = DESKTOP) -> Page:
    """A page at ``link`` whose media (if any) has loaded and sought."""
    page = await browser.new_page(viewport=size)  # type: ignore[arg-type]
    await page.goto(link)
    if await page.locator("#media").count():
        await page.wait_for_function(
            "() => { const m = document.getElementById('media');"
            " return m.readyState >= 2 && !m.seeking; }",
            timeout=15_000,
        )
    return page


async def media_state(page: Page) -> dict[str, Any]:
    """The player's time, and the highlighted line's text and second."""
    result: dict[str, Any] = await page.evaluate(
        "() => { const m = document.getElementById('media');"
        " const c = document.querySelector('.cited');"
        " return {t: m ? m.currentTime : null,"
        " cited: c ? c.textContent : null, l: c ? c.dataset.l : null,"
        " paused: m ? m.paused : null}; }"
    )
    return result
