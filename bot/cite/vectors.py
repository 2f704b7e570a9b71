"""Sentence vectors remembered: the embedder behind alignment and the extractive answer.

The quick path ``prefetch``-es its passages' sentences while Claude writes, so when the
answer arrives only its own few claims still need encoding; a thread's follow-ups see
the same passages again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence

from bot.inflight import InFlight
from retrieval.encoding.embed import Embedder

log = logging.getLogger("quorum.align")


class SentenceVectors:
    """The embedder, remembering sentence vectors (an Embedder itself).

    The quick path ``prefetch``-es its passages' sentences while Claude writes, so when
    the answer arrives only its own few claims still need encoding; a thread's
    follow-ups see the same passages again."""

    def __init__(self, embedder: Embedder, size: int = 8192) -> None:
        self.embedder = embedder
        self.size = size
        self._rows: OrderedDict[str, list[float]] = OrderedDict()
        self._pending: dict[str, asyncio.Future[list[float]]] = {}
        self._prefetching = InFlight(log)

    @property
    def dim(self) -> int:
        """Vector length."""
        return self.embedder.dim

    async def embed_query(self, text: str) -> list[float]:
        """A search query's vector (the embedder caches those itself)."""
        return await self.embedder.embed_query(text)

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text: remembered, being computed, or computed now in one batch."""
        loop = asyncio.get_running_loop()
        mine = [t for t in dict.fromkeys(texts) if t not in self._rows and t not in self._pending]
        for t in mine:
            self._pending[t] = loop.create_future()
        if mine:
            try:
                rows = await self.embedder.embed_documents(mine)
            except BaseException as exc:
                for t in mine:  # waiters on these texts fail (or stop) with this call
                    future = self._pending.pop(t)
                    if isinstance(exc, Exception):
                        future.set_exception(exc)
                        future.exception()  # marked retrieved: no warning if none waits
                    else:
                        future.cancel()
                raise
            for t, row in zip(mine, rows, strict=True):
                self._rows[t] = row
                future = self._pending.pop(t)
                if not future.done():
                    future.set_result(row)
        out: list[list[float]] = []
        for t in texts:
            known = self._rows.get(t)
            if known is None:
                known = await asyncio.shield(self._pending[t])
            else:
                self._rows.move_to_end(t)
            out.append(known)
        while len(self._rows) > self.size:
            self._rows.popitem(last=False)
        return out

    def prefetch(self, texts: Sequence[str]) -> None:
        """Start computing vectors for ``texts`` in the background."""
        missing = [t for t in dict.fromkeys(texts) if t not in self._rows]
        if not missing:
            return

        async def run() -> None:
            try:
                await self.embed_documents(missing)
            except Exception:
                log.debug("prefetching sentence vectors failed", exc_info=True)

        self._prefetching.spawn(run())


def sentence_vectors(embedder: Embedder | None) -> SentenceVectors | None:
    """``embedder`` as a ``SentenceVectors`` (the same one if it already is)."""
    if embedder is None or isinstance(embedder, SentenceVectors):
        return embedder
    return SentenceVectors(embedder)
