"""``quorum doctor``: on a fresh clone it says what to set and exits 1; against the
emulators it checks what the real services would (Slack's token and scopes, Discord's
token, intent and commands, the model: Claude's key or a server's, and whether it takes
tools) and names the fix for each failure."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import discord
import pytest
import yaml
from discord.gateway import DiscordWebSocket
from typer.testing import CliRunner

from adapters.cli.main import app
from adapters.discord.cli import sync_commands
from adapters.doctor import check_data, check_llm, check_pages, run_checks
from adapters.platform import Check
from adapters.slack.doctor import MANIFEST, bot_scopes, check_slack
from bot.config import Settings, load_settings
from retrieval.store.weaviate.server import Endpoint
from tests.backends import Served, tool_names
from tests.emulators.anthropic import API_KEY, AnthropicEmulator, Reply
from tests.emulators.discord import DiscordEmulator
from tests.emulators.openai import OpenAIEmulator
from tests.emulators.slack import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, SlackEmulator

GUILD = 1300000000000000001


def test_a_fresh_clone_is_told_what_to_set_and_exits_1() -> None:
    result = CliRunner().invoke(app, ["doctor"], env={"COLUMNS": "200"})
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())
    for variable in ("SLACK_BOT_TOKEN", "DISCORD_TOKEN", "QUORUM_API_TOKENS", "ANTHROPIC_API_KEY"):
        assert variable in text
    assert "1 check(s) failed: serves." in text
    assert "embedded, version 1.39.0" in text  # the rest of a fresh clone works
    assert "Traceback" not in result.output


@pytest.fixture
async def emulators() -> AsyncIterator[tuple[SlackEmulator, DiscordEmulator, AnthropicEmulator]]:
    old, old_gateway = discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY
    async with (
        SlackEmulator() as slack,
        DiscordEmulator() as disc,
        AnthropicEmulator(default=Reply(text="pong")) as claude,
    ):
        yield slack, disc, claude
        assert disc.unexpected == []
    discord.http.Route.BASE, DiscordWebSocket.DEFAULT_GATEWAY = old, old_gateway


def configured(
    slack: SlackEmulator,
    disc: DiscordEmulator,
    claude: AnthropicEmulator,
    tmp_path: Path,
    **overrides: Any,
) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "http_port": 0,
        "slack_bot_token": BOT_TOKEN,
        "slack_app_token": APP_TOKEN,
        "slack_signing_secret": SIGNING_SECRET,
        "slack_api_url": slack.api_url,
        "discord_token": disc.token,
        "discord_api_url": disc.url,
        "discord_guild_id": GUILD,
        "anthropic_api_key": API_KEY,
        "anthropic_base_url": claude.url,
        "api_tokens": "tok:team",
        "public_url": "https://quorum.example.com",
    }
    return load_settings(**(values | overrides))


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


async def test_everything_configured_passes_against_the_emulators(
    emulators: tuple[SlackEmulator, DiscordEmulator, AnthropicEmulator],
    weaviate_env: Endpoint,
    tmp_path: Path,
) -> None:
    slack, disc, claude = emulators
    settings = configured(slack, disc, claude, tmp_path)
    await sync_commands(settings, globally=False)
    checks = by_name(await run_checks(settings))
    assert {n: c.status for n, c in checks.items() if c.status != "ok"} == {}
    assert checks["serves"].detail == "slack, discord, the JSON API"
    assert "scopes match manifest.yml" in checks["slack"].detail
    assert weaviate_env.url in checks["weaviate"].detail
    [ping] = claude.requests
    assert ping.body["max_tokens"] == 1  # one cheap request
    assert slack.called("apps.connections.open", ok=True)


async def test_each_failure_names_its_fix(
    emulators: tuple[SlackEmulator, DiscordEmulator, AnthropicEmulator],
    weaviate_env: Endpoint,
    tmp_path: Path,
) -> None:
    slack, disc, claude = emulators
    slack.scopes.remove("chat:write")
    disc.message_content_enabled = False
    settings = configured(
        slack, disc, claude, tmp_path, anthropic_api_key="sk-ant-wrong", slack_app_token=None
    )
    checks = by_name(await run_checks(settings))
    assert checks["slack"].status == "FAIL"
    assert checks["slack"].detail == "The bot token lacks scopes: chat:write."
    assert "manifest.yml" in checks["slack"].fix
    assert checks["discord"].status == "FAIL" and "Message Content" in checks["discord"].fix
    assert checks["llm"].status == "FAIL" and "ANTHROPIC_API_KEY" in checks["llm"].detail

    disc.message_content_enabled = True
    settings = configured(slack, disc, claude, tmp_path, slack_bot_token="xoxb-revoked")
    checks = by_name(await run_checks(settings))
    assert checks["slack"].detail == "Slack rejected SLACK_BOT_TOKEN (invalid_auth)."
    assert checks["discord"].detail == (
        "Slash commands not registered: /ask, /forget, /ingest, /research, /sources, /speakers."
    )
    assert checks["discord"].fix == "Run `quorum discord sync`."

    settings = configured(slack, disc, claude, tmp_path, discord_token="not-the-token")
    assert by_name(await run_checks(settings))["discord"].detail == (
        "Discord rejected DISCORD_TOKEN."
    )


async def test_a_token_without_the_assistant_scope_is_told_to_reinstall(
    emulators: tuple[SlackEmulator, DiscordEmulator, AnthropicEmulator],
    weaviate_env: Endpoint,
    tmp_path: Path,
) -> None:
    slack, disc, claude = emulators
    slack.scopes.remove("assistant:write")  # installed before the app became an AI app
    checks = by_name(await run_checks(configured(slack, disc, claude, tmp_path)))
    assert checks["slack"].status == "FAIL"
    assert checks["slack"].detail == (
        "The bot token lacks scopes: assistant:write. assistant:write is for the assistant "
        "panel (its status line and suggested prompts)."
    )
    assert "Reinstall" in checks["slack"].fix and "manifest.yml" in checks["slack"].fix


def test_the_manifest_installs_the_assistant_panel() -> None:
    manifest = yaml.safe_load(MANIFEST.read_text())
    assert manifest["features"]["assistant_view"]["assistant_description"]
    events = set(manifest["settings"]["event_subscriptions"]["bot_events"])
    assert {"assistant_thread_started", "assistant_thread_context_changed", "message.im"} <= events
    assert "assistant:write" in manifest["oauth_config"]["scopes"]["bot"]


def test_the_emulated_scopes_are_the_manifests() -> None:
    """The emulator grants what manifest.yml asks for, so a missing scope is the test's."""
    assert set(SlackEmulator().scopes) == bot_scopes()


def test_page_links_on_localhost_are_a_warning_once_a_chat_platform_is_configured() -> None:
    alone = check_pages(load_settings())
    assert alone.status == "ok" and "http://localhost:8088/v/" in alone.detail
    chat = load_settings(discord_token="x" * 40)
    warned = check_pages(chat)
    assert warned.status == "warn" and "only this machine" in warned.detail
    assert "QUORUM_PUBLIC_URL" in warned.fix
    public = load_settings(discord_token="x" * 40, public_url="https://quorum.example.com")
    assert check_pages(public).status == "ok"


def test_doctor_says_what_the_data_dir_holds_by_kind(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "transcripts").mkdir(parents=True)
    (data / "transcripts" / "abc.tiny.en.json").write_bytes(b"x" * 2048)
    (data / "uploads" / "kb1").mkdir(parents=True)
    (data / "uploads" / "kb1" / "standup.wav").write_bytes(b"y" * 10)
    (data / "sessions.sqlite3").write_bytes(b"z" * 5)
    check = check_data(load_settings(data_dir=data))
    assert check.status == "ok"
    assert check.detail == (
        "index 0 B, transcripts 2.0 KB, voiceprints 0 B, uploads 10 B, media 0 B, sessions 5 B, "
        "other 0 B"
    )


async def test_a_slack_token_without_a_way_in_is_slacks_failure() -> None:
    settings = load_settings(slack_bot_token="xoxb-1")
    check = await check_slack(settings)
    assert check is not None and check.status == "FAIL"
    assert check.detail == "SLACK_BOT_TOKEN is set, but Slack has no way to reach Quorum."
    assert "SLACK_SIGNING_SECRET" in check.fix


async def test_the_model_check_says_which_backend_answers_and_whether_it_takes_tools(
    served: Served,
) -> None:
    served.emu.default = Reply(text="pong")
    check = await check_llm(load_settings(**served.settings()))
    assert check.status == "ok" and check.detail.startswith(f"{served.kind}: ")
    assert "accepts tools" in check.detail
    (ping,) = served.emu.requests
    assert ping.body["max_tokens"] == 1 and tool_names(ping.body) == ["ping"]


async def test_a_server_without_tools_is_told_and_still_passes() -> None:
    async with OpenAIEmulator(api_key=None, supports_tools=False, default=Reply(text="p")) as emu:
        settings = load_settings(llm="openai", openai_base_url=emu.url, model="gemma2:2b")
        check = await check_llm(settings)
    assert check.status == "ok" and "does NOT accept tools: deep research is off" in check.detail
    async with OpenAIEmulator(models={"llama3.1:8b"}) as emu:
        settings = load_settings(openai_base_url=emu.url, openai_api_key="wrong", model="x")
        check = await check_llm(settings)
    assert check.status == "FAIL" and "QUORUM_OPENAI_API_KEY" in check.detail
    emu = OpenAIEmulator()
    await emu.start()
    url = emu.url
    await emu.stop()
    check = await check_llm(load_settings(openai_base_url=url, model="x"))
    assert check.status == "FAIL" and "Cannot reach openai" in check.detail
    assert "QUORUM_OPENAI_BASE_URL" in (check.fix or "")


async def test_a_model_chosen_off_is_no_warning_and_names_no_vendor() -> None:
    check = await check_llm(load_settings(llm="none", anthropic_api_key="sk-ant-unused"))
    said = f"{check.detail} {check.fix or ''}"
    assert check.status == "ok" and "QUORUM_LLM=none" in said
    assert not any(vendor in said for vendor in ("Claude", "ANTHROPIC", "OpenAI", "OPENAI"))
    unset = await check_llm(load_settings())
    assert unset.status == "warn" and "ANTHROPIC_API_KEY" in unset.fix
