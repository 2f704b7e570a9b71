"""The HTML every Quorum page is made of: one shell (``page``), one stylesheet (``CSS``,
for the recording, document, insights and refusal pages alike), the security headers,
and a Content-Security-Policy that allows that stylesheet, and a page's one script, by
their hashes (``csp``). Server-rendered; no build step, no other inline code, no origin."""

from __future__ import annotations

import base64
import hashlib
from html import escape

from aiohttp import web

CSS = """
:root{color-scheme:light dark;font:16px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif}
body{margin:0 auto;max-width:76rem;padding:0 1rem 2rem;overflow-wrap:anywhere}
body.narrow{max-width:68rem}
header{padding:1rem 0 .5rem}
h1{font-size:1.3rem;margin:0 0 .2rem;line-height:1.3}
h2{font-size:1.1rem;margin:1.4rem 0 .4rem}
.meta,.note{color:GrayText;margin:.2rem 0;font-size:.92rem}
.note.warn{color:inherit;background:#fff3bf33;border-left:3px solid #e0a800;padding:.4rem .6rem}
a{color:LinkText}
a:focus-visible,li:focus-visible{outline:3px solid #3b82f6;outline-offset:2px}
.rec{display:grid;grid-template-columns:minmax(0,5fr) minmax(0,6fr);gap:1.5rem;align-items:start}
.player{position:sticky;top:0;padding:.5rem 0;background:Canvas;z-index:1}
video{width:100%;max-height:60vh;background:#000;border-radius:.4rem}
audio{width:100%}
.transcript{list-style:none;margin:0;padding:0;max-height:calc(100vh - 7rem);overflow-y:auto}
.transcript li{display:grid;grid-template-columns:4rem 1fr;gap:.2rem .5rem;padding:.35rem .5rem;
border-radius:.4rem;cursor:pointer}
.transcript li:hover{background:#8881}
.transcript li.now{background:#3b82f622}
.cited,.transcript li.cited{background:#ffd84d55;box-shadow:inset 4px 0 #e0a800}
.time{font-variant-numeric:tabular-nums;text-decoration:none;color:GrayText;padding-top:.05rem}
.who{font-weight:600;margin-right:.35rem}
.doc section{padding:.1rem .8rem;margin:.6rem 0;border-radius:.4rem}
.doc h2{font-size:1.05rem;margin:.6rem 0 .3rem}
.doc h3{font-size:1rem;margin:.5rem 0 .2rem}
.doc p{margin:.4rem 0;padding:.2rem .4rem;border-radius:.3rem;white-space:pre-line}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(9rem,1fr));gap:.6rem;
margin:.6rem 0}
.card{border:1px solid #8884;border-radius:.5rem;padding:.5rem .7rem}
.card b{display:block;font-size:1.5rem;font-variant-numeric:tabular-nums;line-height:1.2}
.card span{color:GrayText;font-size:.85rem}
nav.range a,nav.range strong{margin-right:.8rem}
svg{max-width:100%;height:auto;display:block}
svg text{font:12px system-ui,sans-serif;fill:GrayText}
.legend{display:flex;flex-wrap:wrap;gap:.3rem 1rem;font-size:.85rem;margin:.3rem 0}
.legend svg.sw{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;
vertical-align:-.1rem}
.gap{border:1px solid #8884;border-radius:.5rem;padding:.5rem .8rem;margin:.6rem 0}
.gap h3{font-size:1rem;margin:.1rem 0 .3rem}
.count{font-variant-numeric:tabular-nums;font-weight:400;color:GrayText;margin-left:.3rem}
.near{margin:.3rem 0 0;padding-left:1rem;border-left:3px solid #e0a800}
.near q{color:GrayText}
details{margin:.25rem 0}
summary{cursor:pointer}
table{border-collapse:collapse;width:100%}
td,th{text-align:left;padding:.3rem .4rem;border-bottom:1px solid #8883;vertical-align:top}
th{white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;width:4rem}
form{display:flex;flex-wrap:wrap;gap:.5rem;align-items:center;margin:1rem 0}
input{font:inherit;padding:.4rem .5rem;min-width:16rem;max-width:100%}
button{font:inherit;padding:.4rem .9rem;cursor:pointer}
.err{color:#c62828}
.speakers{display:block;margin:.6rem 0}
.speakers fieldset{margin:0;padding:.3rem .7rem .7rem;border:1px solid #8886;border-radius:.4rem}
.speakers legend{font-weight:600;padding:0 .3rem}
.speakers .row{display:flex;flex-wrap:wrap;gap:.5rem;align-items:flex-end}
.speakers label{display:flex;flex-direction:column;font-size:.9rem;gap:.15rem;flex:1 1 9rem}
.speakers input,.speakers select,.speakers button{font:inherit;box-sizing:border-box;
height:2.5rem;padding:0 .5rem;min-width:0}
.speakers button{flex:0 0 auto;padding:0 1rem}
@media (max-width:760px){
.rec{grid-template-columns:1fr;gap:.5rem}
.transcript{max-height:none;overflow:visible}
.transcript li{grid-template-columns:3.4rem 1fr}
video{max-height:32vh}
.cards{grid-template-columns:repeat(2,1fr)}
}
"""


def sha256(text: str) -> str:
    """``text``'s hash as a CSP source (``'sha256-…'``)."""
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def csp(script: str | None = None, form_action: str = "'none'") -> str:
    """The policy of a page: the stylesheet, ``script`` (its one script, if any), media and
    images from this origin only, forms posting to ``form_action``, never framed."""
    scripts = f" script-src {sha256(script)};" if script else ""
    return (
        f"default-src 'none'; style-src {sha256(CSS)};{scripts} media-src 'self'; "
        f"img-src 'self' data:; base-uri 'none'; form-action {form_action}; "
        "frame-ancestors 'none'"
    )


HEADERS = {
    "Content-Security-Policy": csp(),
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",  # a link's token must not leak to a linked site
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "X-Robots-Tag": "noindex, nofollow",
}
"""Every response of a page route carries these (a page with a script, its own ``csp``)."""


def page(title: str, body: str, *, script: str | None = None, narrow: bool = False) -> str:
    """A whole page: ``body`` in the shell, with the stylesheet and ``script``."""
    tail = f"<script>{script}</script>" if script else ""
    opening = "<body class=narrow>" if narrow else "<body>"
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        '<meta name="referrer" content="no-referrer">'
        f"<title>{escape(title)} · Quorum</title><style>{CSS}</style></head>"
        f"{opening}{body}{tail}</body></html>"
    )


def header(title: str, meta: str | None = None) -> str:
    """A page's heading and the line under it."""
    under = f"<p class=meta>{escape(meta)}</p>" if meta is not None else ""
    return f"<header><h1>{escape(title)}</h1>{under}</header>"


def message(title: str, text: str) -> str:
    """A page that only says something (invalid, expired, removed, starting)."""
    return page(title, f"{header(title)}<p>{escape(text)}</p>")


def html(status: int, body: str, *, policy: str, cache: str = "private, no-store") -> web.Response:
    """An HTML response with the security headers and the page's own policy."""
    return web.Response(
        status=status,
        text=body,
        content_type="text/html",
        charset="utf-8",
        headers={**HEADERS, "Content-Security-Policy": policy, "Cache-Control": cache},
    )
