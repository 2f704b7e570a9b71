"""Bearer tokens and the knowledge base each opens, for every route of the HTTP port:

    QUORUM_API_TOKENS    ``tok1:kb1,tok2:kb2``: the JSON API and ``/mcp``
    QUORUM_ADMIN_TOKENS  the same shape: insights, for the people who run Quorum

A token opens its own knowledge base and nothing else. No token, or one Quorum does not
know, is 401; another knowledge base, or a plain API token where an admin's is needed,
is 403. Tokens are compared in constant time, as bytes (a caller chooses what it sends).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass

from aiohttp import web
from pydantic import SecretStr

from adapters.http.problems import Reject, problem
from bot.config import Settings
from retrieval.errors import ConfigError, InvalidInput
from retrieval.models import check_kb

API_TOKENS = "QUORUM_API_TOKENS"
ADMIN_TOKENS = "QUORUM_ADMIN_TOKENS"


def parse_tokens(raw: SecretStr | None, variable: str = API_TOKENS) -> dict[str, str]:
    """``tok1:kb1,tok2:kb2`` -> {token: kb}; a malformed pair, a token a header cannot
    carry (not printable ASCII) or one listed twice is a ConfigError naming the variable."""
    tokens: dict[str, str] = {}
    if raw is None:
        return tokens
    for n, pair in enumerate(raw.get_secret_value().split(","), 1):
        if not pair.strip():
            continue
        token, sep, kb = pair.strip().partition(":")
        if not sep or not token or not kb:
            raise ConfigError(f"{variable} must look like token1:kb1,token2:kb2.")
        if not (token.isascii() and token.isprintable()) or " " in token:
            raise ConfigError(
                f"{variable}: token {n} is not printable ASCII without spaces; "
                "an Authorization header cannot carry it."
            )
        if token in tokens:
            raise ConfigError(
                f"{variable}: token {n} repeats an earlier token; "
                "each token opens one knowledge base."
            )
        try:
            tokens[token] = check_kb(kb)
        except InvalidInput as exc:
            raise ConfigError(f"{variable}: {exc}") from None
    return tokens


def bearer(request: web.Request, variable: str) -> bytes:
    """The request's bearer token as bytes; 401 naming ``variable`` without one."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Reject(problem(401, f"Send Authorization: Bearer TOKEN ({variable})."))
    return sent(token)


def sent(token: str) -> bytes:
    """A token as a caller sent it, as bytes: compare_digest refuses non-ASCII text."""
    return token.strip().encode("utf-8", "backslashreplace")


def owner(tokens: dict[str, str], token: bytes) -> str | None:
    """The knowledge base ``token`` opens among ``tokens`` (each compared in constant time)."""
    return next((kb for t, kb in tokens.items() if hmac.compare_digest(t.encode(), token)), None)


def allowed(own: str, asked: str | None, verb: str = "use") -> str:
    """The knowledge base to use: the token's own, or 403 when another is ``asked``."""
    if asked is not None and asked != own:
        raise Reject(problem(403, f"This token may not {verb} knowledge base {asked!r}."))
    return own


@dataclass(frozen=True)
class Scopes:
    """Every token of the port and the knowledge base it opens: the API's (``/api``,
    ``/mcp``) and the admins' (insights)."""

    api: dict[str, str]
    admin: dict[str, str]

    @classmethod
    def from_settings(cls, settings: Settings) -> Scopes:
        """Both kinds of token, read from the settings (a ConfigError names a bad one)."""
        return cls(
            parse_tokens(settings.api_tokens, API_TOKENS),
            parse_tokens(settings.admin_tokens, ADMIN_TOKENS),
        )

    def api_kb(self, request: web.Request) -> str:
        """The knowledge base of the request's API token; 401 without a known one."""
        kb = owner(self.api, bearer(request, API_TOKENS))
        if kb is None:
            raise Reject(problem(401, "Unknown API token."))
        return kb

    def admin_kb(self, request: web.Request) -> str:
        """The knowledge base of the request's admin token; 403 for an API token (it is
        known, and not enough), 401 for anything else."""
        token = bearer(request, ADMIN_TOKENS)
        kb = owner(self.admin, token)
        if kb is None:
            if owner(self.api, token) is not None:
                raise Reject(problem(403, f"Insights need an admin token ({ADMIN_TOKENS})."))
            raise Reject(problem(401, "Unknown admin token."))
        return kb
