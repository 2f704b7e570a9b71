"""What a question says about where to look: a recording it names ("at the kickoff",
"according to the cut-over retro", "in ES2004a"), a person whose words it asks for
("what did Marcus say", "John's reasons", "what did the marketing expert think"), and
when ("last week", "in January 2024", relative to when it is asked).

Each becomes a filter that falls back to a boost: the quick path searches with them,
puts what that finds first and tops the rest up from the plain search, so a wrong guess
costs rank, not the answer. Nothing is understood when it is ambiguous (two recordings,
two people, two dates match, or "Marcus and Priya"), a name is read as a speaker only
when the question asks for their words (a verb of speech or a possessive follows it),
and typed options (``speaker:``, ``source:``, ``after:``/``before:``) always win.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import date

from bot.answer.dates import DateRange, named_dates
from bot.words import STOPWORDS
from retrieval.models import SearchFilters, Source
from retrieval.search.names import SourceChoice

# "at the kickoff", "in the migration review", "according to the cut-over retro"
_PLACE = re.compile(
    r"\b(?:at|in|during|from|of|according to)\s+(?:the|our|that|this)\s+"
    r"((?:[A-Za-z0-9][\w'-]*\s*){1,4})",
    re.I,
)
# "in Auth kickoff" (no article): only a capitalised name, matched whole.
_BARE_PLACE = re.compile(
    r"\b(?:at|in|during|from|according to)\s+([A-Z][\w'-]*(?:\s+[A-Za-z0-9][\w'-]*){0,3})"
)
_WORD = re.compile(r"[A-Za-z0-9][\w'-]*")
_TOKEN = re.compile(r"[a-z0-9]+")
# Words that ask for what someone said (after their name: "what did Marcus say").
_SPEECH = re.compile(
    r"(?:(?:also|first|then|later|initially|originally|ever|never|just|actually|really|"
    r"\w+ly)\s+)?"
    r"(?:say|said|says|saying|propose[ds]?|suggest(?:ed|s)?|think|thinks|thought|"
    r"argue[ds]?|want(?:ed|s)?|mention(?:ed|s)?|explain(?:ed|s)?|recommend(?:ed|s)?|"
    r"pick(?:ed|s)?|ask(?:ed|s)?|warn(?:ed|s)?|promise[ds]?|claim(?:ed|s)?|describe[ds]?|"
    r"feel|feels|felt|believe[ds]?|prefer(?:red|s)?|agree[ds]?|disagree[ds]?|decide[ds]?|"
    r"report(?:ed|s)?|present(?:ed|s)?|respond(?:ed|s)?|repl(?:y|ied|ies)|"
    r"answer(?:ed|s)?|note[ds]?|point(?:ed|s)? out|conclude[ds]?|object(?:ed|s)?|"
    r"insist(?:ed|s)?|complain(?:ed|s)?|worr(?:y|ied|ies)|talk(?:ed|s)? about|"
    r"discuss(?:ed|es)?|emphasi[sz]e[ds]?|stress(?:ed|es)?|add(?:ed|s)?|"
    r"show(?:ed|s)?|demonstrate[ds]?|reply|express(?:ed|es)?|raise[ds]?|"
    r"bring up|brought up|say about)\b",
    re.I,
)
_POSSESSIVE = ("'s", "\u2019s")
# A role's head noun after its name: "the marketing expert", "the UI designer".
_ROLE_NOUN = (
    r"(?:\s+(?:expert|person|lead|team|rep|representative|specialist|guy|people|"
    r"manager|designer|member|folks?))?"
)
_HONORIFIC = frozenset("mr mrs ms miss dr prof hon right the rt sir dame am mp mla".split())
_JOINED = re.compile(r"^\s*(?:,|and|or|&|\+|/)\s*$", re.I)


@dataclass(frozen=True)
class Understood:
    """Where the question points: a source, a speaker, a date range, each maybe."""

    source: Source | None = None
    speaker: str | None = None
    dates: DateRange | None = None

    def is_empty(self) -> bool:
        """True when nothing was read from the question."""
        return self.source is None and self.speaker is None and self.dates is None

    def narrow(self, filters: SearchFilters) -> SearchFilters:
        """``filters`` with what was understood added (typed options were left out of
        understanding, so nothing here overrides them)."""
        return replace(
            filters,
            speaker=self.speaker or filters.speaker,
            source_ids=(self.source.id,) if self.source else filters.source_ids,
            after=self.dates.after if self.dates else filters.after,
            before=self.dates.before if self.dates else filters.before,
        )

    def describe(self) -> str | None:
        """``"Searched John Park's remarks in *Auth kickoff*, Jan 2024 first."``; None
        when nothing was read."""
        what = f"{self.speaker}'s remarks" if self.speaker else None
        if self.source:
            title = f"*{self.source.title}*"
            what = f"{what} in {title}" if what else title
        if self.dates:
            what = f"{what}, {self.dates.label}" if what else f"recordings of {self.dates.label}"
        return f"Searched {what} first." if what else None


def _norm(word: str) -> str:
    word = word.casefold().replace("-", "").replace("'s", "").strip("'")
    return word[:-1] if len(word) > 4 and word.endswith("s") else word


def _bag(text: str) -> set[str]:
    return {_norm(w) for w in _WORD.findall(text) if w.casefold() not in STOPWORDS}


def _words_until_stop(phrase: str) -> list[str]:
    words: list[str] = []
    for w in _WORD.findall(phrase):
        if w.casefold() in STOPWORDS:
            break
        words.append(_norm(w))
    return words


def named_source(question: str, sources: Sequence[Source]) -> Source | None:
    """The one recording or document the question names: its id as a word ("in
    ES2004a"); or, after "at/in/according to the", the words of its short name (the title
    before a colon, plus its kind), or of its whole title for two words or more; or,
    after "in" with no article, its whole short name capitalised ("in Auth kickoff").
    None when no source or several match."""
    q_tokens = _TOKEN.findall(question.casefold())
    by_id = [s for s in sources if _names_id(s.id, q_tokens)]
    if len(by_id) == 1:
        return by_id[0]
    if by_id:
        return None
    for match in _PLACE.finditer(question):
        want = set(_words_until_stop(match.group(1)))
        if not want:
            continue
        short = [s for s in sources if want <= _bag(f"{s.title.split(':')[0]} {s.kind}")]
        found = short or ([s for s in sources if want <= _bag(s.title)] if len(want) >= 2 else [])
        if len(found) == 1:
            return found[0]
    for match in _BARE_PLACE.finditer(question):
        words = _words_until_stop(match.group(1))
        for n in range(len(words), 0, -1):  # the longest run of words that is a short name
            want = set(words[:n])
            found = [s for s in sources if want == _bag(s.title.split(":")[0])]
            if len(found) == 1:
                return found[0]
    return None


def _names_id(source_id: str, q_tokens: list[str]) -> bool:
    """The id (one with letters and digits, like "es2004a" or "bed003") is a word of
    the question."""
    ids = _TOKEN.findall(source_id.casefold())
    if len(ids) != 1 or not re.search(r"\d", ids[0]) or not re.search(r"[a-z]", ids[0]):
        return False
    return ids[0] in q_tokens


def _core(name: str) -> list[str]:
    """A speaker's name without honorifics or a parenthesised riding or office:
    "Hon. Bill Morneau (Minister of Finance)" -> ["Bill", "Morneau"]."""
    plain = re.sub(r"\([^)]*\)?", " ", name)
    words = [w.strip(".,") for w in plain.split()]
    core = [w for w in words if w and w.casefold().strip(".") not in _HONORIFIC]
    return core or words


@dataclass(frozen=True)
class _Mention:
    start: int
    end: int
    speaker: str | None  # None: the name fits two people
    cue: bool  # a verb of speech or a possessive follows: their words are asked for


def _forms(speakers: Sequence[str]) -> dict[str, str | None]:
    """Each way a speaker may be named (full name, core name, first or last name, role
    initials "UI") -> the speaker it names; None when it names two people."""
    forms: dict[str, dict[str, str]] = {}
    for name in speakers:
        core = _core(name)
        candidates = {" ".join(name.split()), " ".join(core), core[0], core[-1]}
        if len(core) > 1 and all(w[:1].isupper() for w in core):
            candidates.add("".join(w[0] for w in core))  # "User Interface" -> "UI"
        for form in candidates:
            # Two spellings of one person ("Hon. Bill Morneau (Minister of Finance)")
            # share a core name: the first (most frequent) stands for both.
            forms.setdefault(form, {}).setdefault(" ".join(core).casefold(), name)
    return {f: next(iter(p.values())) if len(p) == 1 else None for f, p in forms.items()}


def _mentions(question: str, speakers: Sequence[str]) -> list[_Mention]:
    """Every non-overlapping naming of a speaker, the longest first where two overlap
    ("the UI designer" is User Interface, not Industrial Designer)."""
    spans: list[tuple[int, int, str | None]] = []
    for form, speaker in _forms(speakers).items():
        # A short form ("C", "UI") or an everyday word ("Will") only as written.
        exact = len(form) <= 2 or form.casefold() in STOPWORDS
        pattern = rf"(?:\bthe\s+)?(?<![\w-]){re.escape(form)}(?![\w-]){_ROLE_NOUN}"
        for at in re.finditer(pattern, question, 0 if exact else re.I):
            spans.append((at.start(), at.end(), speaker))
    found: list[_Mention] = []
    for start, end, speaker in sorted(spans, key=lambda s: (s[0] - s[1], s[0])):
        if any(m.start < end and start < m.end for m in found):
            continue
        rest = question[end:]
        cue = rest.startswith(_POSSESSIVE) or _SPEECH.match(rest.strip()) is not None
        cue = cue or bool(re.search(r"according to\s*$", question[:start], re.I))
        found.append(_Mention(start, end, speaker, cue))
    return sorted(found, key=lambda m: m.start)


def named_speaker(question: str, speakers: Sequence[str]) -> str | None:
    """The speaker whose words the question asks for: named (full, first or last name,
    a role, any case) and in the possessive ("John's reasons") or followed by a verb of
    speech ("what did Marcus say"); the first such name when several are ("what did
    Marcus say when Priya asked"). None when no one matches, a name fits two people, or
    the name is joined to another ("Marcus and Priya")."""
    mentions = _mentions(question, speakers)
    for i, m in enumerate(mentions):
        if not m.cue:
            continue
        if m.speaker is None:
            return None  # "John" with two Johns in the archive: ambiguous
        near = [n for n in (mentions[i - 1] if i else None, *mentions[i + 1 : i + 2]) if n]
        for n in near:
            between = question[min(m.end, n.end) : max(m.start, n.start)]
            if n.speaker != m.speaker and _JOINED.match(between):
                return None  # "what did Marcus and Priya say": more than one person
        return m.speaker
    return None


def understand(
    question: str,
    sources: Sequence[Source],
    speakers: Sequence[str],
    today: date | None = None,
) -> Understood:
    """What the question names (see the module docstring). A date range is kept only
    when some recording falls in it; pass ``today=None`` to read no dates (a typed
    date wins)."""
    source = named_source(question, sources)
    if source is not None and source.speakers:
        # Inside one recording, its own speakers: "what did C say" is PhD C there.
        speaker = named_speaker(question, source.speakers)
    else:
        speaker = named_speaker(question, speakers)
    dates = named_dates(question, today) if today is not None else None
    if dates is not None and not any(
        s.recorded_at and dates.after <= s.recorded_at <= dates.before
        for s in ([source] if source else sources)
    ):
        dates = None
    return Understood(source, speaker, dates)


def choice_note(name: str, choice: SourceChoice, sources: Sequence[Source]) -> str | None:
    """What a typed source name selected when it named no source exactly; None when it
    did (or selected nothing: the answer then says nothing matched)."""
    if choice.exact or not choice.ids:
        return None
    titles = {s.id: s.title for s in sources}
    picked = [f"*{titles.get(i, i)}*" for i in choice.ids]
    shown = ", ".join(picked[:5]) + (f" and {len(picked) - 5} more" if len(picked) > 5 else "")
    return f"No source is called \u201c{name}\u201d; searched {shown}."
