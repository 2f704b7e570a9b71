"""Model through the real anthropic SDK against the local Messages API emulator, and
the emulator's own checks (it must refuse what the real service refuses)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bot.config import load_settings
from bot.errors import LLMError
from bot.llm import Model, Tool, ToolResult, claude_model, retry_after_s
from bot.llm import from_settings as llm_from_settings
from tests.backends import MODEL, Served, system
from tests.emulators.anthropic import AnthropicEmulator, Reply, ToolUse

USER: list[Any] = [{"role": "user", "content": "Why did we move off Auth0?"}]
SEARCH = Tool(
    "search",
    "Search the archive.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
SEARCH_TOOL = {
    "name": SEARCH.name,
    "description": SEARCH.description,
    "input_schema": SEARCH.schema,
}


@pytest_asyncio.fixture
async def emu() -> AsyncIterator[AnthropicEmulator]:
    async with AnthropicEmulator() as e:
        yield e


def claude(emu: AnthropicEmulator, timeout_s: float = 5.0, retries: int = 2) -> Model:
    return claude_model(
        api_key=emu.api_key,
        base_url=emu.url,
        model="claude-test",
        fast_model="claude-test-fast",
        timeout_s=timeout_s,
        max_retries=retries,
        backoff_s=0.02,
    )


async def post(emu: AnthropicEmulator, body: Any, headers: dict[str, str] | None = None) -> Any:
    hdrs = {"x-api-key": emu.api_key, "anthropic-version": "2023-06-01"}
    hdrs.update(headers or {})
    async with (
        aiohttp.ClientSession() as s,
        s.post(f"{emu.url}/v1/messages", json=body, headers=hdrs) as r,
    ):
        return r.status, await r.text()


# --- the emulator refuses what the service refuses --------------------------------------

GOOD = {"model": "m", "max_tokens": 10, "messages": USER}
TOOL_USE = {
    "role": "assistant",
    "content": [{"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"query": "x"}}],
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"model": ""}, "model"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"max_tokens": None}, "max_tokens"),
        ({"messages": []}, "at least one message"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "first message"),
        ({"messages": [*USER, *USER]}, "alternate"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": ""}]}]}, "non-empty"),
        ({"messages": [{"role": "user", "content": [{"type": "nope"}]}]}, "unknown content block"),
        ({"messages": [{"role": "user", "content": []}]}, "at least one content block"),
        ({"system": [{"type": "text", "text": "s", "cache_control": {"type": "x"}}]}, "ephemeral"),
        ({"tools": [{"name": "bad name", "description": "d", "input_schema": {}}]}, "name"),
        ({"tools": [{"name": "search", "input_schema": {"type": "object"}}]}, "description"),
        (
            {"tools": [{"name": "s", "description": "d", "input_schema": {"type": "array"}}]},
            "input_schema",
        ),
        (
            {
                "tools": [
                    {
                        "name": "s",
                        "description": "d",
                        "input_schema": {"type": "object", "required": ["q"]},
                    }
                ]
            },
            "required",
        ),
        (
            {
                "messages": [
                    *USER,
                    TOOL_USE,
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": "toolu_9", "content": "r"}
                        ],
                    },
                ]
            },
            "tool_use_id",
        ),
        ({"messages": [*USER, TOOL_USE, {"role": "user", "content": "no result"}]}, "tool_result"),
        ({"unknown_field": 1}, "Extra inputs"),
    ],
)
async def test_emulator_rejects_invalid_requests(
    emu: AnthropicEmulator, change: dict[str, Any], message: str
) -> None:
    emu.enqueue("never sent")
    status, text = await post(emu, {**GOOD, **change})
    assert status == 400
    body = json.loads(text)
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert message in body["error"]["message"]
    assert emu.pending == 1


async def test_emulator_checks_headers(emu: AnthropicEmulator) -> None:
    status, text = await post(emu, GOOD, {"x-api-key": "wrong"})
    assert status == 401 and json.loads(text)["error"]["type"] == "authentication_error"
    status, text = await post(emu, GOOD, {"anthropic-version": ""})
    assert status == 400 and "anthropic-version" in text


async def test_emulator_accepts_a_tool_round_trip(emu: AnthropicEmulator) -> None:
    emu.enqueue("done")
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "found"}
    body = {
        **GOOD,
        "tools": [SEARCH_TOOL],
        "messages": [*USER, TOOL_USE, {"role": "user", "content": [result]}],
    }
    status, text = await post(emu, body)
    assert status == 200 and json.loads(text)["content"][0]["text"] == "done"


async def test_emulator_streams_the_real_event_sequence(emu: AnthropicEmulator) -> None:
    emu.enqueue(Reply.tools(ToolUse("search", {"query": "auth0"}), text="Let me look."))
    status, text = await post(emu, {**GOOD, "stream": True, "tools": [SEARCH_TOOL]})
    assert status == 200
    events = [line[7:] for line in text.splitlines() if line.startswith("event: ")]
    assert events[0] == "message_start" and events[-2:] == ["message_delta", "message_stop"]
    assert events.count("content_block_start") == 2 == events.count("content_block_stop")
    datas = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]
    kinds = {d["delta"]["type"] for d in datas if d["type"] == "content_block_delta"}
    assert kinds == {"text_delta", "input_json_delta"}
    delta = next(d for d in datas if d["type"] == "message_delta")
    assert delta["delta"]["stop_reason"] == "tool_use" and delta["usage"]["output_tokens"] > 0


# --- Model with the real SDK ---------------------------------------------------------


async def test_stream_calls_back_with_the_text_so_far(served: Served) -> None:
    llm = served.model(timeout_s=5, retries=2)
    served.emu.enqueue("Cost, an outage and a rate limit [1].")
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    done = await llm.stream(system="Be brief.", messages=USER, max_tokens=300, on_text=on_text)
    await llm.aclose()
    assert done.text == "Cost, an outage and a rate limit [1]."
    assert len(seen) > 1 and seen[-1] == done.text
    assert all(b.startswith(a) for a, b in zip(seen, seen[1:], strict=False))
    (req,) = served.emu.requests
    assert req.stream and req.body["model"] == MODEL and req.body["max_tokens"] == 300
    assert system(req.body) == "Be brief." and llm.usage.output_tokens > 0
    if served.kind == "claude":  # the static prompt is marked for caching
        assert req.body["system"][0]["cache_control"] == {"type": "ephemeral"}
    else:  # the system prompt goes first, and the usage comes with the stream
        assert req.body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert req.body["stream_options"] == {"include_usage": True}


async def test_prompt_caching_and_usage_are_recorded(emu: AnthropicEmulator) -> None:
    llm = claude(emu)
    emu.enqueue("one", "two")
    first = await llm.complete(system="S" * 400, messages=USER, max_tokens=50)
    second = await llm.complete(system="S" * 400, messages=USER, max_tokens=50)
    await llm.aclose()
    assert first.usage.cache_creation_input_tokens > 0 and first.usage.cache_read_input_tokens == 0
    assert second.usage.cache_read_input_tokens > 0
    assert llm.usage.output_tokens == first.usage.output_tokens + second.usage.output_tokens
    assert llm.usage.input_tokens > 0


@pytest.mark.parametrize("status", [529, 500, 429])
async def test_retries_then_succeeds(served: Served, status: int) -> None:
    llm = served.model(timeout_s=5, retries=2)
    served.emu.enqueue(Reply.error(status), Reply.error(status))
    served.emu.enqueue("finally")
    done = await llm.complete(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert done.text == "finally" and done.attempts == 3
    assert len(served.emu.requests) == 3


async def test_gives_up_after_max_retries(served: Served) -> None:
    llm = served.model(timeout_s=5, retries=2)
    served.emu.enqueue(Reply.error(529), times=5)
    with pytest.raises(LLMError, match="529") as info:
        await llm.stream(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert len(served.emu.requests) == 3 and info.value.status == 529 and info.value.retryable


async def test_honours_retry_after(served: Served) -> None:
    llm = served.model(timeout_s=5, retries=2)
    served.emu.enqueue(Reply.error(429, retry_after=0.4))
    served.emu.enqueue("ok")
    t0 = time.perf_counter()
    await llm.complete(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert time.perf_counter() - t0 >= 0.4


async def test_retry_after_past_the_deadline_fails_at_once(served: Served) -> None:
    llm = served.model(timeout_s=2.0, retries=2)
    served.emu.enqueue(Reply.error(429, retry_after=30))
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match="deadline"):
        await llm.complete(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert time.perf_counter() - t0 < 1.0


async def test_overall_deadline_covers_a_slow_reply(served: Served) -> None:
    llm = served.model(timeout_s=0.8, retries=2)
    served.emu.enqueue(Reply(text="too late", delay_s=5))
    t0 = time.perf_counter()
    with pytest.raises(LLMError, match="within 0.8 seconds"):
        await llm.stream(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert time.perf_counter() - t0 < 0.8 + 0.5


async def test_a_slow_stream_hits_the_deadline_too(served: Served) -> None:
    llm = served.model(timeout_s=0.8, retries=2)
    served.emu.enqueue(Reply(text="word " * 50, chunk_delay_s=0.1))
    t0 = time.perf_counter()
    with pytest.raises(LLMError):
        await llm.stream(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert time.perf_counter() - t0 < 0.8 + 0.5


async def test_mid_stream_error_is_retried(served: Served) -> None:
    llm = served.model(timeout_s=5, retries=2)
    served.emu.enqueue(
        Reply(text="half an answer", stream_error="overloaded_error"), "a whole answer"
    )
    done = await llm.stream(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert done.text == "a whole answer" and done.attempts == 2


async def test_bad_request_is_not_retried(served: Served) -> None:
    llm = served.model(timeout_s=5, retries=2)
    bad: list[Any] = [{"role": "assistant", "content": "I speak first."}]
    with pytest.raises(LLMError, match="rejected") as info:
        await llm.complete(system="s", messages=bad, max_tokens=50)
    await llm.aclose()
    assert len(served.emu.requests) == 1 and not info.value.retryable
    assert info.value.status == 400 and llm.errors == 1


async def test_wrong_key_is_not_retried(served: Served) -> None:
    llm = served.model(timeout_s=5, retries=3)
    served.emu.api_key = "another-key"
    with pytest.raises(LLMError) as info:
        await llm.complete(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert info.value.status == 401 and len(served.emu.requests) == 1


async def test_connection_refused_is_an_llm_error(served: Served) -> None:
    await served.emu.stop()
    llm = served.model(timeout_s=5, retries=1)
    with pytest.raises(LLMError, match="connection"):
        await llm.complete(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    assert llm.retries == 1


async def test_create_with_tools_returns_the_calls(emu: AnthropicEmulator) -> None:
    llm = claude(emu)
    emu.enqueue(Reply.tools(ToolUse("search", {"query": "auth0 cognito"})))
    turn = await llm.create(system="research", messages=USER, tools=[SEARCH], max_tokens=200)
    assert turn.stop_reason == "tool_use"
    (call,) = turn.tool_calls
    assert call.name == "search" and call.input == {"query": "auth0 cognito"}
    # The tool loop's next turn is accepted: the result names the tool_use id.
    emu.enqueue("Auth0 was replaced by Cognito.")
    follow = await llm.create(
        system="research",
        messages=[
            *USER,
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [ToolResult(call.id, "...")]},
        ],
        tools=[SEARCH],
        max_tokens=200,
    )
    await llm.aclose()
    assert follow.text == "Auth0 was replaced by Cognito." and emu.requests[-1].status == 200
    sent = emu.requests[-1].body["messages"]
    assert sent[1]["content"][0]["type"] == "tool_use"
    assert sent[2]["content"][0] == {
        "type": "tool_result",
        "tool_use_id": call.id,
        "content": "...",
        "cache_control": {"type": "ephemeral"},  # the newest result is cached
    }


def test_from_settings() -> None:
    assert llm_from_settings(load_settings()) is None
    settings = load_settings(anthropic_api_key="sk-x", anthropic_base_url="http://127.0.0.1:9")
    llm = llm_from_settings(settings)
    assert llm is not None and llm.model == settings.model and llm.max_retries == 2
    assert llm.name == "claude"
    client = llm.backend.client  # type: ignore[attr-defined]
    assert str(client.base_url).startswith("http://127.0.0.1:9")
    assert client.max_retries == 0


def test_retry_after_parsing() -> None:
    assert retry_after_s({"retry-after": "2"}) == 2.0
    assert retry_after_s({"retry-after-ms": "250"}) == 0.25
    assert retry_after_s({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0
    assert retry_after_s({"retry-after": "soon"}) is None
    assert retry_after_s({}) is None
