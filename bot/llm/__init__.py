"""The language model behind Quorum, as one seam (``base``) with one module per vendor:
``claude`` (the Anthropic SDK) and ``openai_compat`` (the ``openai`` SDK's Chat
Completions against Ollama, vLLM, llama.cpp's server, LM Studio or OpenAI).
``from_settings`` picks the one ``QUORUM_LLM`` names (see ``Settings.llm_backend``)."""

from __future__ import annotations

from bot.config import Settings
from bot.llm.base import (
    CUT_LINE,
    LLM,
    Backend,
    BrokenReply,
    Completion,
    Content,
    Message,
    Model,
    NoTools,
    Request,
    Text,
    TextSink,
    Tool,
    ToolCall,
    ToolResult,
    Transient,
    Usage,
    retry_after_s,
)

__all__ = [
    "CUT_LINE",
    "LLM",
    "Backend",
    "BrokenReply",
    "Completion",
    "Content",
    "Message",
    "Model",
    "NoTools",
    "Request",
    "Text",
    "TextSink",
    "Tool",
    "ToolCall",
    "ToolResult",
    "Transient",
    "Usage",
    "claude_model",
    "from_settings",
    "openai_model",
    "retry_after_s",
]


def claude_model(
    *,
    api_key: str,
    model: str,
    fast_model: str,
    base_url: str | None = None,
    timeout_s: float = 60.0,
    max_retries: int = 2,
    backoff_s: float = 0.5,
) -> Model:
    """Claude through the Anthropic SDK under Quorum's retry policy."""
    from bot.llm.claude import ClaudeBackend  # the Anthropic SDK: only when Claude is chosen

    backend = ClaudeBackend(api_key=api_key, base_url=base_url, timeout_s=timeout_s)
    return Model(backend, model, fast_model, timeout_s, max_retries, backoff_s)


def openai_model(
    *,
    base_url: str,
    model: str,
    fast_model: str,
    api_key: str | None = None,
    timeout_s: float = 60.0,
    max_retries: int = 2,
    backoff_s: float = 0.5,
) -> Model:
    """An OpenAI-compatible server through the ``openai`` SDK under the same policy."""
    from bot.llm.openai_compat import OpenAIBackend  # the openai SDK: only when chosen

    backend = OpenAIBackend(base_url=base_url, api_key=api_key, timeout_s=timeout_s)
    return Model(backend, model, fast_model, timeout_s, max_retries, backoff_s)


def from_settings(settings: Settings) -> Model | None:
    """The configured model, or None when there is none (answers are extractive)."""
    which = settings.llm_backend
    if which == "claude":
        assert settings.anthropic_api_key is not None
        return claude_model(
            api_key=settings.anthropic_api_key.get_secret_value(),
            base_url=settings.anthropic_base_url,
            model=settings.model,
            fast_model=settings.fast_model,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )
    if which == "openai":
        assert settings.openai_base_url is not None
        key = settings.openai_api_key
        return openai_model(
            base_url=settings.openai_base_url,
            api_key=key.get_secret_value() if key is not None else None,
            model=settings.model,
            fast_model=settings.openai_fast_model,
            timeout_s=settings.llm_timeout_s,
            max_retries=settings.llm_max_retries,
        )
    return None
