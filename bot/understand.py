"""What a question says about where to look: a recording it names ("at the kickoff",
"according to the cut-over retro") and a person whose words it asks for ("what did
Marcus say", "John's reasons").

Both become *boosts*, never filters: the quick path searches with them and without them,
and puts what they find first, so a wrong guess costs rank, not the answer. Nothing is
understood when it is ambiguous (two recordings or two people match), and typed options
(``speaker:``, ``source:``) always win over what is read from the question.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.extractive import STOPWORDS
from retrieval.models import Source

# "at the kickoff", "in the migration review", "according to the cut-over retro"
_PLACE = re.compile(
    r"\b(?:at|in|during|from|of|according to)\s+(?:the|our|that|this)\s+"
    r"((?:[A-Za-z0-9][\w'-]*\s*){1,4})",
    re.I,
)
_WORD = re.compile(r"[A-Za-z0-9][\w'-]*")
# Words that ask for what someone said (after their name: "what did Marcus say").
_SPEECH = re.compile(
    r"\b(?:say|said|says|saying|propose[ds]?|suggest(?:ed|s)?|think|thought|argue[ds]?|"
    r"want(?:ed|s)?|mention(?:ed|s)?|explain(?:ed|s)?|recommend(?:ed|s)?|pick(?:ed|s)?|"
    r"ask(?:ed|s)?|warn(?:ed|s)?|promise[ds]?|claim(?:ed|s)?|describe[ds]?)\b",
    re.I,
)


@dataclass(frozen=True)
class Understood:
    """Where the question points: a source and a speaker, each maybe."""

    source: Source | None = None
    speaker: str | None = None

    def describe(self) -> str | None:
        """``"John Park's remarks in *Auth kickoff*"``, or None when nothing was read."""
        who = f"{self.speaker}'s remarks" if self.speaker else None
        where = f"*{self.source.title}*" if self.source else None
        if who and where:
            return f"Looked first at {who} in {where}."
        if who or where:
            return f"Looked first at {who or where}."
        return None


def _norm(word: str) -> str:
    word = word.casefold().replace("-", "").replace("'s", "").strip("'")
    return word[:-1] if len(word) > 4 and word.endswith("s") else word


def _bag(text: str) -> set[str]:
    return {_norm(w) for w in _WORD.findall(text) if w.casefold() not in STOPWORDS}


def named_source(question: str, sources: Sequence[Source]) -> Source | None:
    """The one recording or document the question names after "at/in/according to the",
    by the words of its short name (the title before a colon, plus its kind), or of its
    whole title for two words or more; None when no source or several match."""
    for match in _PLACE.finditer(question):
        words: list[str] = []
        for w in _WORD.findall(match.group(1)):
            if w.casefold() in STOPWORDS:
                break
            words.append(_norm(w))
        if not words:
            continue
        want = set(words)
        short = [s for s in sources if want <= _bag(f"{s.title.split(':')[0]} {s.kind}")]
        found = short or ([s for s in sources if want <= _bag(s.title)] if len(want) >= 2 else [])
        if len(found) == 1:
            return found[0]
    return None


def named_speaker(question: str, speakers: Sequence[str]) -> str | None:
    """The speaker whose words the question asks for: named (full or first name, with its
    capital) and in the possessive ("John's reasons") or followed by a verb of speech
    ("what did Marcus say"); the first such name when several are ("what did Marcus say
    when Priya asked"). None when no one matches, or a first name fits two people."""
    firsts: dict[str, list[str]] = {}
    for name in speakers:
        firsts.setdefault(name.split()[0], []).append(name)
    found: list[tuple[int, str]] = []
    for name in speakers:
        for part in dict.fromkeys([name, name.split()[0]]):
            at = re.search(rf"\b{re.escape(part)}(?:'s|\u2019s)?(?![\w-])", question)
            if at is None:
                continue
            if part == name.split()[0] and len(firsts[part]) > 1:
                break  # "John" with two Johns in the archive: ambiguous
            possessive = question[at.end() - 2 : at.end()] in ("'s", "\u2019s")
            if possessive or _SPEECH.match(question[at.end() :].strip()):
                found.append((at.start(), name))
            break
    return min(found)[1] if found else None


def understand(question: str, sources: Sequence[Source], speakers: Sequence[str]) -> Understood:
    """What the question names (see the module docstring)."""
    return Understood(named_source(question, sources), named_speaker(question, speakers))
