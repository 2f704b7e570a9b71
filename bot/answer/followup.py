"""A question before it is searched: answered at once when there is nothing to search
for (empty, too long, a greeting or a question about Quorum: ``precheck``), and, without
Claude, a follow-up made standalone with the previous question's key terms
(``heuristic_rewrite``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.answer import prompts
from bot.models import Answer, Mode, Question
from bot.sessions import Exchange
from bot.words import STOPWORDS

_HELP = re.compile(
    r"^\s*(?:(?:hi|hello|hey|hiya|yo|howdy|good (?:morning|afternoon|evening)|thanks|thank you)"
    r"(?: there| quorum| all| team)?|help|/?help me|what can you do|what do you do|"
    r"how do(?:es)? (?:this|it|you|quorum) work|how do i use (?:this|you|quorum)|"
    r"who are you|what are you|what is quorum|what's quorum)\s*[!?.]*\s*$",
    re.IGNORECASE,
)
_PERSONAL = frozenset("he she they him her them his hers their theirs".split())
_POINTING = frozenset("it its that this those these there then former latter one ones".split())
_FOLLOW_UP_START = re.compile(r"^\s*(?:and|also|so|but|what about|how about|why not)\b", re.I)


def error_answer(text: str, mode: Mode = "quick") -> Answer:
    """A one-sentence answer of kind "error"."""
    return Answer(text=text, kind="error", mode=mode)


def precheck(question: Question, max_chars: int) -> Answer | None:
    """An answer without searching: for an empty or over-long question, or a greeting or
    a question about Quorum itself (help). None when the question should be answered."""
    text = question.text.strip()
    if not text:
        return error_answer("Ask me a question about your recordings or documents.")
    if len(text) > max_chars:
        return error_answer(
            f"That question is too long ({len(text):,} characters; the limit is "
            f"{max_chars:,}), please shorten it."
        )
    if _HELP.match(text):
        return Answer(text=prompts.HELP_TEXT.strip(), kind="help", mode="quick")
    return None


def looks_like_follow_up(question: str) -> bool:
    """True when a question leans on earlier turns: it starts with "and ..."/"what about",
    says "he"/"they" without naming anyone, or points ("it", "that") with little else."""
    if _FOLLOW_UP_START.match(question):
        return True
    words = re.findall(r"[a-z']+", question.casefold())
    content = [w for w in words if w not in STOPWORDS]
    names = re.findall(r"(?<!^)(?<![.?!]\s)\b[A-Z][a-z]+", question.strip())
    if any(w in _PERSONAL for w in words) and not names:
        return True
    if any(w in _POINTING for w in words) and len(content) <= 2:
        return True
    return len(content) < 2


def key_terms(text: str, limit: int = 6) -> list[str]:
    """The words of a question worth carrying into a follow-up: names, products, numbers
    first (as written), then other content words."""
    words = re.findall(r"[A-Za-z0-9][\w'.-]*[\w]|[A-Za-z0-9]", text)
    content = [w for w in words if w.casefold() not in STOPWORDS and len(w) > 1]
    strong = [w for w in content if w[0].isupper() or any(c.isdigit() for c in w)]
    ordered = list(dict.fromkeys([*strong, *content]))
    return ordered[:limit]


def heuristic_rewrite(question: str, history: Sequence[Exchange]) -> str:
    """Without Claude: a follow-up gets the previous question's key terms appended."""
    if not history or not looks_like_follow_up(question):
        return question
    prev = history[-1].standalone_query or history[-1].question
    have = {w.casefold() for w in re.findall(r"[\w'.-]+", question)}
    extra = [t for t in key_terms(prev) if t.casefold() not in have]
    return f"{question.strip()} {' '.join(extra)}".strip()
