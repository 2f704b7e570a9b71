"""Requests no HTTP client would send, written straight to the socket of ``quorum
serve``'s HTTP server: a bad request line, an over-long line or header, too many
headers, bytes a header may not hold. Each gets its status (414 for an over-long request
line, 431 for over-long or too many headers, else 400) and one log line, never a
traceback (anyone can send them, and a log of tracebacks hides the errors that matter)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from adapters.http.server import OpsServer
from bot.config import load_settings

GET = b"GET /healthz HTTP/1.1\r\nHost: q\r\n"
PROBES = {
    "not http": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 hello\r\n\r\n",
    "bad method": b"G{T /healthz HTTP/1.1\r\nHost: q\r\n\r\n",
    "bad version": b"GET /healthz HTTP/9.Z\r\nHost: q\r\n\r\n",
    "long request line": b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: q\r\n\r\n",
    "long header": GET + b"X-Long: " + b"b" * 20_000 + b"\r\n\r\n",
    "long header name": GET + b"X-" + b"n" * 20_000 + b": 1\r\n\r\n",
    "too many headers": GET + b"".join(b"X-%d: 1\r\n" % i for i in range(400)) + b"\r\n",
    "header without colon": GET + b"NoColonHere\r\n\r\n",
    "control byte in header": GET + b"X-Evil: a\x00b\r\n\r\n",
    "space before colon": GET + b"Host : q\r\n\r\n",
    "bad content length": b"POST /api/ask HTTP/1.1\r\nHost: q\r\nContent-Length: -1\r\n\r\n",
    "two content lengths": (
        b"POST /api/ask HTTP/1.1\r\nHost: q\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"
    ),
    "bad chunk": (
        b"POST /api/ask HTTP/1.1\r\nHost: q\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nx\r\n"
    ),
}


@pytest_asyncio.fixture
async def server() -> AsyncIterator[int]:
    ops = OpsServer(load_settings())
    port = await ops.start(0, "127.0.0.1")
    try:
        yield port
    finally:
        await ops.stop()


async def send(port: int, raw: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(raw)
        await writer.drain()
        return await asyncio.wait_for(reader.read(65536), 10)
    finally:
        writer.close()


STATUS = {
    "long request line": b"414",  # URI Too Long
    "long header": b"431",  # Request Header Fields Too Large
    "long header name": b"431",
    "too many headers": b"431",
}


@pytest.mark.parametrize("probe", list(PROBES))
async def test_a_malformed_request_gets_its_status_and_one_log_line(
    server: int, caplog: pytest.LogCaptureFixture, probe: str
) -> None:
    caplog.set_level(logging.DEBUG)
    answer = await send(server, PROBES[probe])
    assert answer.split(b" ", 2)[1] == STATUS.get(probe, b"400"), answer[:200]
    assert b"Traceback" not in answer
    await asyncio.sleep(0.05)  # the server logs after answering
    said = [r for r in caplog.records if r.name.startswith(("aiohttp", "quorum.http"))]
    assert not [r for r in said if r.exc_info or r.exc_text], [r.getMessage() for r in said]
    assert all(len(r.getMessage()) < 300 for r in said)  # what was sent is cut, not echoed
    assert len([r for r in said if r.levelno >= logging.WARNING]) <= 1


async def test_a_good_request_still_works_after_the_bad_ones(server: int) -> None:
    for raw in PROBES.values():
        await send(server, raw)
    answer = await send(server, GET + b"Connection: close\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 ") and b'"alive"' in answer
