"""The HTML of a source's page: a recording (player and transcript) or a document.

Server-rendered in the shared shell (``adapters.http.shell``: its stylesheet) with one
small script, allowed by its hash in the Content-Security-Policy (``CSP``); no build step.
Where a link opens rides in the URL's fragment (``#t=734``, ``#page=5``, ``#u=12``),
which the script reads: the transcript line is highlighted and scrolled to, the player
seeks there, the line being spoken follows playback, and clicking a line seeks to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from adapters.http.shell import csp, header, page
from retrieval.links.links import format_timestamp

SCRIPT = """
(function(){
var m=document.getElementById('media'),ext=document.getElementById('ext');
var lines=Array.prototype.slice.call(document.querySelectorAll('#transcript li'));
var cited=null,now=null;
function frag(k){var p=new URLSearchParams(location.hash.slice(1));return p.get(k);}
function lineAt(t){var best=null;for(var i=0;i<lines.length;i++){
 if(+lines[i].dataset.l<=t+0.05)best=lines[i];else break;}return best||lines[0]||null;}
function said(v){if(v===null)return null;var x=parseFloat(v),b=null;
 lines.forEach(function(l){if(!b||Math.abs(+l.dataset.s-x)<Math.abs(+b.dataset.s-x))b=l;});
 return b;}
function mark(el){if(cited)cited.classList.remove('cited');cited=el;if(!el)return;
 el.classList.add('cited');el.scrollIntoView({block:el.tagName==='LI'?'center':'start'});}
function deep(url,t){var u=new URL(url),h=u.hostname;
 if(/(^|\\.)youtube\\.com$/.test(h)||h==='youtu.be'){u.searchParams.set('t',t+'s');return u.href;}
 if(/(^|\\.)vimeo\\.com$/.test(h)){u.hash='t='+t+'s';return u.href;}
 if(/(^|\\.)loom\\.com$/.test(h)){u.searchParams.set('t',t);return u.href;}
 u.hash='t='+t;return u.href;}
function fmt(s){var h=Math.floor(s/3600),mm=Math.floor(s%3600/60),ss=('0'+s%60).slice(-2);
 return h?h+':'+('0'+mm).slice(-2)+':'+ss:mm+':'+ss;}
function seek(t){if(!m)return;var go=function(){m.currentTime=t;var p=m.play();
 if(p&&p.catch)p.catch(function(){});};
 if(m.readyState>=1)go();else m.addEventListener('loadedmetadata',go,{once:true});}
function open(){var t=frag('t'),pg=frag('page'),u=frag('u');
 if(t!==null){var s=Math.max(0,parseInt(t,10)||0);
  mark(said(frag('s'))||lines.filter(function(l){return +l.dataset.l===s;})[0]||lineAt(s));
  seek(s);
  if(ext){ext.href=deep(ext.dataset.url,s);
   ext.textContent='Open at '+fmt(s)+' on '+ext.dataset.host;}}
 else if(pg!==null){mark(document.getElementById('page-'+parseInt(pg,10)));
  var f=document.getElementById('pdf');if(f)f.href=f.dataset.url+'#page='+parseInt(pg,10);}
 else if(u!==null){mark(document.getElementById('u-'+parseInt(u,10)));}}
lines.forEach(function(l){l.addEventListener('click',function(e){if(e.target.closest('a'))return;
 var h=l.querySelector('a.time').getAttribute('href');
 if(location.hash===h)open();else location.hash=h;});});
document.addEventListener('click',function(e){var a=e.target.closest('a.time');
 if(a&&location.hash===a.getAttribute('href')){e.preventDefault();open();}});
if(m){m.addEventListener('timeupdate',function(){var l=lineAt(m.currentTime);if(l===now)return;
 if(now)now.classList.remove('now');now=l;if(!l)return;l.classList.add('now');
 if(!m.paused&&l!==cited)l.scrollIntoView({block:'nearest'});});
 m.addEventListener('error',function(){var n=document.getElementById('unplayable');
 if(n)n.hidden=false;});}
window.addEventListener('hashchange',open);open();
})();
"""


# Only the stylesheet and this script may run on a page (no other inline code, no origin).
CSP = csp(SCRIPT)
# An admin link's page posts its one form (the speakers' names) back here, nowhere else.
ADMIN_CSP = csp(SCRIPT, form_action="'self'")


@dataclass(frozen=True)
class Line:
    """One transcript line: a sentence, who said it, when, and where its link opens."""

    start_s: float
    link_s: int
    speaker: str | None
    text: str


@dataclass(frozen=True)
class Passage:
    """A passage of a document: its position (``#u=``), page or heading, and text."""

    position: int
    page: int | None
    heading: str | None
    text: str


def recording(
    *,
    title: str,
    meta: str,
    lines: Sequence[Line],
    media_url: str | None,
    audio_only: bool,
    notes: Sequence[str] = (),
    external: str | None = None,
    external_host: str = "",
    form: str = "",
) -> str:
    """A recording's page: the player (when Quorum has the media) and the transcript."""
    parts = ['<main class=rec><section class=player aria-label="Player">']
    if media_url:
        tag = "audio" if audio_only else "video"
        parts.append(
            f'<{tag} id=media controls preload=metadata src="{escape(media_url)}"></{tag}>'
            '<p id=unplayable class="note warn" hidden>Your browser cannot play this '
            f'recording. <a href="{escape(media_url)}" download>Download it</a>.</p>'
        )
    for note in notes:
        parts.append(f'<p class="note warn">{escape(note)}</p>')
    if external:
        parts.append(
            f'<p><a id=ext rel="noopener noreferrer" href="{escape(external)}" '
            f'data-url="{escape(external)}" data-host="{escape(external_host)}">'
            f"Open on {escape(external_host)}</a></p>"
        )
    parts.append(form)
    parts.append('</section><ol id=transcript class=transcript aria-label="Transcript">')
    for line in lines:
        who = f"<span class=who>{escape(line.speaker)}</span>" if line.speaker else ""
        parts.append(
            f'<li data-s="{line.start_s:.2f}" data-l="{line.link_s}">'
            f'<a class=time href="#t={line.link_s}&amp;s={line.start_s:.1f}" aria-label="Play from '
            f'{format_timestamp(line.link_s)}">{format_timestamp(line.start_s)}</a>'
            f"<span>{who}{escape(line.text)}</span></li>"
        )
    if not lines:
        parts.append("<li>No transcript is stored for this recording.</li>")
    parts.append("</ol></main>")
    return page(title, header(title, meta) + "".join(parts), script=SCRIPT)


def speaker_form(action: str, speakers: Sequence[str], key: str, said: str = "") -> str:
    """The small form an admin link's page shows: one speaker of the recording and the
    name to give it (``said``: what the last try was told)."""
    options = "".join(f"<option>{escape(s)}</option>" for s in speakers)
    note = f'<p class="note warn" role=alert>{escape(said)}</p>' if said else ""
    return (
        f'<form class=speakers method=post action="{escape(action)}">'
        "<fieldset><legend>Name a speaker</legend>"
        f'{note}<input type=hidden name=csrf value="{escape(key)}"><div class=row>'
        f"<label>Speaker<select name=speaker>{options}</select></label>"
        "<label>Name<input name=name maxlength=80 required autocomplete=off "
        'placeholder="Full name"></label>'
        "<button type=submit>Rename</button></div></fieldset></form>"
    )


def document(
    *,
    title: str,
    meta: str,
    passages: Sequence[Passage],
    file_url: str | None,
    file_label: str,
    notes: Sequence[str] = (),
) -> str:
    """A document's page: its text by page or heading, and the file itself when kept."""
    parts = []
    if file_url:
        parts.append(
            f'<p><a id=pdf href="{escape(file_url)}" data-url="{escape(file_url)}" '
            f'target=_blank rel="noopener">{escape(file_label)}</a></p>'
        )
    parts.extend(f'<p class="note warn">{escape(n)}</p>' for n in notes)
    parts.append("<main class=doc>")
    group: tuple[int | None, str | None] | None = None
    for p in passages:
        key = (p.page, p.heading)
        if key != group:
            if group is not None:
                parts.append("</section>")
            group = key
            anchor = f' id="page-{p.page}"' if p.page is not None else ""
            parts.append(f"<section{anchor}>")
            if p.page is not None:
                parts.append(f"<h2>Page {p.page}</h2>")
            if p.heading:
                path = [h.strip() for h in p.heading.split(" > ") if h.strip()]
                level = min(3, 1 + len(path)) if path else 2
                parts.append(f"<h{level}>{escape(' › '.join(path))}</h{level}>")
        parts.append(f'<p id="u-{p.position}">{escape(p.text)}</p>')
    if group is not None:
        parts.append("</section>")
    parts.append("</main>")
    return page(title, header(title, meta) + "".join(parts), script=SCRIPT)
