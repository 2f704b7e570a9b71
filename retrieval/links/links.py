"""Deep links into sources: a recording at the second, a PDF at the page (and any URL with
its credentials hidden, for messages).

- YouTube: ``t=734s`` query parameter (``youtu.be`` and ``youtube.com``)
- Vimeo: ``#t=734s`` fragment
- Loom: ``?t=734`` query parameter
- any other media URL: ``#t=734`` (W3C Media Fragments)
- PDFs: ``#page=5``
- Quorum's own page (``Source.view``, for a source without a URL): ``#t=734``,
  ``#page=5``, or ``#u=12`` (a passage by its position)
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from retrieval.models import Segment, Source


def _with_query(url: str, key: str, value: str) -> str:
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != key]
    query.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _with_fragment(url: str, fragment: str) -> str:
    return urlunsplit(urlsplit(url)._replace(fragment=fragment))


def media_link(url: str, seconds: float) -> str:
    """The URL of a recording opened at ``seconds`` (floored to a whole second)."""
    t = max(0, int(seconds))
    host = (urlsplit(url).hostname or "").lower()
    if host.endswith("youtube.com") or host == "youtu.be":
        return _with_query(url, "t", f"{t}s")
    if host.endswith("vimeo.com"):
        return _with_fragment(url, f"t={t}s")
    if host.endswith("loom.com"):
        return _with_query(url, "t", str(t))
    return _with_fragment(url, f"t={t}")


def page_link(url: str, page: int) -> str:
    """The URL of a PDF opened at ``page`` (1-based)."""
    return _with_fragment(url, f"page={page}")


def segment_link(source: Source, segment: Segment) -> str | None:
    """The best deep link for a segment: media at its start, PDF at its page, else the
    lesson's or source's URL."""
    if segment.lesson_url and segment.start_s is None:
        return segment.lesson_url
    if not source.url:
        return view_link(source.view, segment) if source.view else None
    if segment.start_s is not None and source.kind in ("video", "audio"):
        return media_link(source.url, segment.start_s)
    if segment.page is not None:
        return page_link(source.url, segment.page)
    return source.url


def view_link(view: str, segment: Segment) -> str:
    """Quorum's own page of a source (``view``) opened at ``segment``: its second, its
    page, or the passage itself."""
    if segment.start_s is not None:
        return _with_fragment(view, f"t={max(0, int(segment.start_s))}")
    if segment.page is not None:
        return _with_fragment(view, f"page={segment.page}")
    return _with_fragment(view, f"u={segment.position}")


def said_at(source: Source, link: str | None, said: float | None) -> str | None:
    """``link`` to Quorum's own page of ``source`` with the second the cited sentence
    starts at (``&s=243.2``), which picks its line when several open at one second."""
    if link is None or said is None or not source.view or not link.startswith(source.view):
        return link
    return f"{link}&s={said:.1f}" if "#t=" in link else link


def format_timestamp(seconds: float) -> str:
    """``734`` -> ``"12:14"``; ``3725`` -> ``"1:02:05"``."""
    t = max(0, int(seconds))
    h, rem = divmod(t, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def locator(segment: Segment) -> str | None:
    """A short human label for where a segment sits: ``12:14``, ``p. 5``, ``Lesson 2``."""
    if segment.start_s is not None:
        return format_timestamp(segment.start_s)
    if segment.page is not None:
        return f"p. {segment.page}"
    if segment.lesson is not None:
        return f"Lesson {segment.lesson}"
    if segment.heading:
        return segment.heading
    return None


def redact_url(url: str) -> str:
    """The URL with any ``user:password@`` replaced by ``***@``, for messages and logs."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)?[^/@]*@", lambda m: (m[1] or "") + "***@", url)
