"""Every level of a document, built at ingest from what is already computed.

The reader gives windows and turns (``retrieval.write.levels.turns``); once the windows are
embedded, ``build`` adds topics (TextTiling over the window vectors), a summary
(``retrieval.write.summary``) and the turns worth searching, each with a vector derived from the
window vectors. Only a few candidate sentences per topic are encoded, to title it, and
only when a source has several topics. A source of fewer than ``MIN_WINDOWS`` windows gets
no topic or summary unit: its windows already are the whole of it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

from retrieval.encoding.embed import Embedder
from retrieval.models import Document, Segment
from retrieval.write.levels import mean_vector, searchable, topics, turn_vectors
from retrieval.write.summary import Line, Summarizer, extractive, summary_unit, titled

MIN_WINDOWS = 3
log = logging.getLogger("quorum.ingest")


@dataclass(frozen=True)
class Levels:
    """A document with its other levels, and one vector per unit of them."""

    doc: Document
    vectors: list[list[float]]


async def build(
    doc: Document,
    vectors: Sequence[Sequence[float]],
    embedder: Embedder,
    summarizer: Summarizer | None = None,
) -> Levels:
    """``doc`` with its turns, topics and summary as ``doc.levels``, and their vectors."""
    windows = doc.segments
    all_turns = [t for t in doc.levels if t.level == "turn"]
    window_texts = {w.text for w in windows}
    # A turn that is a whole window (a one-paragraph section) would only repeat it.
    kept_turns = searchable([t for t in all_turns if t.text not in window_texts])
    units: list[Segment] = list(kept_turns)
    unit_vectors = turn_vectors(kept_turns, windows, vectors) if windows else []
    if len(windows) >= MIN_WINDOWS:
        found, topic_vectors = topics(windows, vectors, all_turns)
        every_turn_vector = turn_vectors(all_turns, windows, vectors)
        lines, titles = await extractive(
            windows, vectors, found, topic_vectors, all_turns, every_turn_vector, embedder
        )
        found = titled(found, titles)
        if summarizer is not None:
            lines = await _written(summarizer, doc, found) or lines
        units += found
        unit_vectors += topic_vectors
        units.append(summary_unit(doc.source, lines, windows))
        unit_vectors.append(mean_vector(vectors))
    return Levels(replace(doc, levels=tuple(units)), unit_vectors)


async def _written(summarizer: Summarizer, doc: Document, found: Sequence[Segment]) -> list[Line]:
    try:
        return await summarizer.summarize(doc.source, found) or []
    except Exception as exc:  # the extractive summary stands in; the ingest goes on
        log.warning("summary of %s fell back to extractive (%s)", doc.source.id, exc)
        return []
