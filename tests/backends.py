"""Both model backends, for the tests that must pass on each: ``Served`` is one emulator
(Anthropic's Messages API or OpenAI's Chat Completions) with the ``Model`` that talks to
it through the real SDK, and the settings that point Quorum at it. The ``served`` fixture
(``tests/conftest.py``) runs a test once per backend.

The helpers read a recorded request body whichever API it was sent to, so a test (or a
scripted ``fn(body) -> Reply``) asks "the system prompt", "the tools", "the last turn's
tool results" once for both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bot.llm import Model, claude_model, openai_model
from tests.emulators.anthropic import AnthropicEmulator
from tests.emulators.openai import OpenAIEmulator
from tests.emulators.script import Reply, ToolUse

__all__ = ["BACKENDS", "FAST", "MODEL", "Reply", "Result", "Served", "ToolUse"]

Kind = Literal["claude", "openai"]
BACKENDS: tuple[Kind, ...] = ("claude", "openai")
MODEL, FAST = "answer-model", "fast-model"


@dataclass(frozen=True)
class Result:
    """One tool result as the model received it."""

    call_id: str
    content: str
    is_error: bool


@dataclass
class Served:
    """One backend's emulator and how Quorum reaches it."""

    kind: Kind
    emu: AnthropicEmulator | OpenAIEmulator

    def model(self, *, timeout_s: float = 30.0, retries: int = 0, backoff_s: float = 0.02) -> Model:
        """A ``Model`` on this backend (close it with ``aclose``)."""
        if self.kind == "claude":
            return claude_model(
                api_key=self.emu.api_key or "",
                base_url=self.emu.url,
                model=MODEL,
                fast_model=FAST,
                timeout_s=timeout_s,
                max_retries=retries,
                backoff_s=backoff_s,
            )
        return openai_model(
            base_url=self.emu.url,
            api_key=self.emu.api_key,
            model=MODEL,
            fast_model=FAST,
            timeout_s=timeout_s,
            max_retries=retries,
            backoff_s=backoff_s,
        )

    def settings(self) -> dict[str, Any]:
        """``load_settings`` overrides that select this backend."""
        if self.kind == "claude":
            return {"anthropic_api_key": self.emu.api_key, "anthropic_base_url": self.emu.url}
        return {
            "llm": "openai",
            "openai_base_url": self.emu.url,
            "openai_api_key": self.emu.api_key,
            "model": MODEL,
            "fast_model": FAST,
        }

    def env(self) -> dict[str, str]:
        """Environment variables that select this backend (what an operator sets)."""
        if self.kind == "claude":
            return {"ANTHROPIC_API_KEY": self.emu.api_key or "", "ANTHROPIC_BASE_URL": self.emu.url}
        return {
            "QUORUM_LLM": "openai",
            "QUORUM_OPENAI_BASE_URL": self.emu.url,
            "QUORUM_OPENAI_API_KEY": self.emu.api_key or "",
            "QUORUM_MODEL": MODEL,
            "QUORUM_FAST_MODEL": FAST,
        }

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """Every request body received, in order."""
        return [r.body for r in self.emu.requests]


def is_openai(body: dict[str, Any]) -> bool:
    msgs = body.get("messages") or []
    return bool(msgs) and msgs[0].get("role") == "system" or "stream_options" in body


def system(body: dict[str, Any]) -> str:
    """The system prompt."""
    if is_openai(body):
        return str(body["messages"][0]["content"])
    sys = body.get("system")
    return "".join(b["text"] for b in sys) if isinstance(sys, list) else str(sys or "")


def tool_names(body: dict[str, Any]) -> list[str]:
    """The names of the tools offered (empty: none)."""
    tools = body.get("tools") or []
    return [t["function"]["name"] if "function" in t else t["name"] for t in tools]


def turns(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation without the system prompt, as ``{"role", "text", "results"}``: a
    user turn's tool results grouped with it, whichever API."""
    out: list[dict[str, Any]] = []
    for msg in body["messages"]:
        role, content = msg["role"], msg.get("content")
        if role in ("system", "developer"):
            continue
        if role == "tool":
            result = Result(msg["tool_call_id"], content, content.startswith("Error: "))
            if not out or out[-1]["role"] != "user" or out[-1]["text"]:
                out.append({"role": "user", "text": "", "results": []})
            out[-1]["results"].append(result)
            continue
        if isinstance(content, list):
            text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
            results = [
                Result(b["tool_use_id"], _text(b.get("content")), bool(b.get("is_error")))
                for b in content
                if b.get("type") == "tool_result"
            ]
        else:
            text, results = content or "", []
        if role == "user" and out and out[-1]["role"] == "user" and out[-1]["results"]:
            out[-1]["text"] = text  # OpenAI: the text after a turn's tool messages
            continue
        out.append({"role": role, "text": text, "results": results})
    return out


def tool_results(body: dict[str, Any]) -> list[Result]:
    """The tool results of the request's last turn."""
    last = turns(body)[-1]
    assert last["role"] == "user"
    return list(last["results"])


def last_text(body: dict[str, Any]) -> str:
    """The text of the last user turn."""
    return str(turns(body)[-1]["text"])


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content)
    return str(content or "")
