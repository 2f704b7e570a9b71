"""The OpenAI-compatible backend: the emulator refuses what Ollama, vLLM and OpenAI refuse
(so a wrong call fails a test), the real ``openai`` SDK's streamed tool calls are
assembled, a server without tools is ``NoTools``, and the settings that pick a backend
stop start-up with one line naming the variable when they cannot work."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from bot.config import load_settings
from bot.errors import ConfigError, LLMError
from bot.llm import NoTools, Text, Tool, ToolCall, ToolResult, from_settings, openai_model
from bot.metrics import Metrics
from tests.emulators.openai import API_KEY, OpenAIEmulator, Reply, ToolUse

USER: list[Any] = [{"role": "user", "content": "Why did we move off Auth0?"}]
SEARCH = Tool(
    "search",
    "Search the archive.",
    {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
)
FN = {"type": "function", "function": {"name": "search", "parameters": SEARCH.schema}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
GOOD: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


@pytest_asyncio.fixture
async def emu() -> AsyncIterator[OpenAIEmulator]:
    async with OpenAIEmulator() as e:
        yield e


async def post(emu: OpenAIEmulator, body: Any, key: str = API_KEY) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as s,
        s.post(
            f"{emu.url}/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}
        ) as r,
    ):
        return r.status, await r.text()


def turn(*msgs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "m", "messages": list(msgs), **extra}


U = {"role": "user", "content": "hi"}
A_CALLS = {"role": "assistant", "content": None, "tool_calls": [CALL]}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"messages": [U]}, "model"),
        (turn(), "at least one message"),
        (turn({"role": "robot", "content": "x"}), "role"),
        (turn({"role": "assistant", "content": "x"}), "start with a user message"),
        (turn(U, {"role": "system", "content": "late"}), "only allowed at the start"),
        (turn(U, {"role": "tool", "tool_call_id": "call_1", "content": "x"}), "tool_call_id"),
        (turn(U, A_CALLS, U), "must be followed by tool messages"),
        (turn(U, A_CALLS), "without a tool message"),
        (
            turn(U, A_CALLS, {"role": "tool", "tool_call_id": "call_9", "content": "x"}),
            "does not answer a tool call",
        ),
        (
            turn(
                U,
                {
                    "role": "assistant",
                    "tool_calls": [{**CALL, "function": {"name": "s", "arguments": "{oops"}}],
                },
            ),
            "valid JSON",
        ),
        (turn(U, {"role": "assistant", "content": None}), "content or tool_calls"),
        (turn(U, max_tokens=0), "max_tokens"),
        (turn(U, stream_options={"include_usage": True}), "only allowed when 'stream'"),
        (turn(U, frobnicate=True), "Unrecognized request argument"),
        (
            turn(U, tools=[{"type": "function", "function": {"name": "bad name!"}}]),
            "function.name",
        ),
        (turn(U, tools=[FN, FN]), "unique"),
        (
            turn(
                U,
                tools=[
                    {
                        "type": "function",
                        "function": {
                            "name": "s",
                            "parameters": {"type": "object", "properties": {"q": {"type": 7}}},
                        },
                    }
                ],
            ),
            "invalid schema",
        ),
        (
            turn(
                U,
                tools=[
                    {"type": "function", "function": {"name": "s", "parameters": {"type": "array"}}}
                ],
            ),
            "JSON Schema object",
        ),
        (turn(U, tools=[FN], tool_choice="sometimes"), "tool_choice"),
    ],
)
async def test_emulator_rejects_what_servers_reject(
    emu: OpenAIEmulator, body: dict[str, Any], message: str
) -> None:
    emu.default = Reply(text="never")
    status, text = await post(emu, body)
    assert status == 400, text
    assert message in json.loads(text)["error"]["message"]


async def test_emulator_checks_the_key_and_accepts_a_tool_round_trip(emu: OpenAIEmulator) -> None:
    status, _ = await post(emu, GOOD, key="wrong")
    assert status == 401
    emu.default = Reply(text="ok")
    ok = turn(U, A_CALLS, {"role": "tool", "tool_call_id": "call_1", "content": "r"}, tools=[FN])
    status, text = await post(emu, ok)
    assert status == 200, text
    assert json.loads(text)["choices"][0]["message"]["content"] == "ok"


async def test_tool_calls_stream_in_pieces_and_are_assembled(emu: OpenAIEmulator) -> None:
    long_query = {"query": "why we moved off Auth0 and what the bill was " * 3}
    a, b = ToolUse("search", long_query), ToolUse("search", {"query": "invalid_grant"})
    emu.enqueue(Reply.tools(a, b, text="Two searches."))
    status, text = await post(
        emu,
        {**GOOD, "tools": [FN], "stream": True, "stream_options": {"include_usage": True}},
    )
    assert status == 200
    chunks = [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]
    pieces = [
        d["tool_calls"][0]
        for c in chunks
        for ch in c["choices"]
        if (d := ch["delta"]).get("tool_calls")
    ]
    assert len(pieces) > 6 and pieces[0]["id"] == a.id and "id" not in pieces[1]
    assert text.rstrip().endswith("data: [DONE]") and chunks[-1]["usage"]["total_tokens"] > 0

    emu.enqueue(Reply.tools(a, b, text="Two searches."), "Done.")
    llm = openai_model(base_url=emu.url, api_key=API_KEY, model="m", fast_model="m")
    done = await llm.create(system="research", messages=USER, tools=[SEARCH], max_tokens=200)
    assert done.text == "Two searches." and done.stop_reason == "tool_calls"
    assert done.tool_calls == (
        ToolCall(a.id, "search", long_query),
        ToolCall(b.id, "search", {"query": "invalid_grant"}),
    )
    # The next turn replays the calls and answers each by id; the emulator checks the order.
    await llm.create(
        system="research",
        messages=[
            *USER,
            {"role": "assistant", "content": [Text(done.text), *done.tool_calls]},
            {
                "role": "user",
                "content": [ToolResult(a.id, "[1] ..."), ToolResult(b.id, "bad", is_error=True)],
            },
        ],
        tools=[SEARCH],
        max_tokens=200,
    )
    await llm.aclose()
    sent = emu.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "tool"]
    assert sent[2]["tool_calls"][0]["function"]["arguments"] == json.dumps(long_query)
    assert sent[4] == {"role": "tool", "tool_call_id": b.id, "content": "Error: bad"}
    assert sent[1]["content"] == USER[0]["content"] and llm.tools_supported is True


async def test_a_model_without_tools_is_no_tools_and_quick_answers_still_work() -> None:
    async with OpenAIEmulator(api_key=None, supports_tools=False, default=Reply(text="ok")) as emu:
        llm = openai_model(base_url=emu.url, model="gemma:2b", fast_model="gemma:2b")
        with pytest.raises(NoTools, match="cannot call tools"):
            await llm.create(system="s", messages=USER, tools=[SEARCH], max_tokens=50)
        assert llm.tools_supported is False
        done = await llm.complete(system="s", messages=USER, max_tokens=50)
        await llm.aclose()
    assert done.text == "ok"
    assert emu.requests[-1].headers["authorization"] == "Bearer not-needed"  # no key set


async def test_an_unknown_model_is_rejected_once() -> None:
    async with OpenAIEmulator(models={"llama3.1:8b"}) as emu:
        llm = openai_model(base_url=emu.url, api_key=API_KEY, model="nope", fast_model="nope")
        with pytest.raises(Exception, match="rejected the request \\(HTTP 404\\)") as info:
            await llm.complete(system="s", messages=USER, max_tokens=50)
        await llm.aclose()
    assert len(emu.requests) == 1 and "127.0.0.1" in str(info.value)


def test_settings_pick_the_backend() -> None:
    assert load_settings().llm_backend is None
    assert load_settings(anthropic_api_key="sk-x").llm_backend == "claude"
    ollama = load_settings(openai_base_url="http://localhost:11434/v1", model="qwen2.5:7b")
    assert ollama.llm_backend == "openai" and ollama.openai_fast_model == "qwen2.5:7b"
    llm = from_settings(ollama)
    assert llm is not None and llm.name == "openai" and llm.fast_model == "qwen2.5:7b"
    both = {"anthropic_api_key": "sk-x", "openai_base_url": "http://h:8000/v1", "model": "m"}
    assert load_settings(**both, llm="claude").llm_backend == "claude"
    assert load_settings(llm="none", anthropic_api_key="sk-x").llm_backend is None


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"llm": "openai"}, "QUORUM_OPENAI_BASE_URL"),
        ({"llm": "openai", "openai_base_url": "localhost:11434", "model": "m"}, "QUORUM_OPENAI"),
        ({"openai_base_url": "http://localhost:11434/v1"}, "QUORUM_MODEL"),
        ({"llm": "claude"}, "ANTHROPIC_API_KEY"),
        (
            {"anthropic_api_key": "sk-x", "openai_base_url": "http://h/v1", "model": "m"},
            "QUORUM_LLM",
        ),
    ],
)
def test_a_bad_combination_stops_start_up_naming_the_variable(
    overrides: dict[str, Any], variable: str
) -> None:
    with pytest.raises(ConfigError) as info:
        load_settings(**overrides)
    message = str(info.value)
    assert message.startswith(variable) and "\n" not in message


def test_the_environment_selects_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUORUM_LLM", "openai")
    monkeypatch.setenv("QUORUM_OPENAI_BASE_URL", "http://vllm:8000/v1")
    with pytest.raises(ConfigError, match="^QUORUM_MODEL"):
        load_settings()
    monkeypatch.setenv("QUORUM_MODEL", "Qwen/Qwen2.5-7B-Instruct")
    settings = load_settings()
    assert settings.llm_backend == "openai" and settings.model == "Qwen/Qwen2.5-7B-Instruct"


async def test_metrics_count_tokens_and_errors_per_backend(emu: OpenAIEmulator) -> None:
    llm = openai_model(base_url=emu.url, api_key=API_KEY, model="m", fast_model="m")
    metrics = Metrics(llm)
    emu.enqueue("An answer [1].", Reply.error(503))  # then 500s: nothing more is enqueued
    await llm.complete(system="s", messages=USER, max_tokens=50)
    with pytest.raises(LLMError):
        await llm.complete(system="s", messages=USER, max_tokens=50)
    await llm.aclose()
    text = metrics.render()[0].decode()
    assert (
        f'quorum_llm_tokens_total{{backend="openai",kind="input"}} {llm.usage.input_tokens}.0'
        in text
    )
    assert llm.usage.input_tokens > 0 and llm.usage.output_tokens > 0
    assert 'quorum_llm_errors_total{backend="openai"} 1.0' in text
    assert 'quorum_llm_retries_total{backend="openai"} 2.0' in text  # 503, then 500 twice
