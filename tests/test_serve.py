"""`quorum serve` says what to configure instead of starting nothing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from bot.config import load_settings

runner = CliRunner()


def test_serve_with_nothing_configured_names_the_variables() -> None:
    result = runner.invoke(app, ["serve"])
    assert result.exit_code == 1
    text = " ".join(result.stderr.split())
    assert "SLACK_BOT_TOKEN" in text and "DISCORD_TOKEN" in text
    assert "Traceback" not in result.output


def test_serve_rejects_an_unknown_platform() -> None:
    result = runner.invoke(app, ["serve", "teams"])
    assert result.exit_code == 1
    assert "Unknown platform 'teams'" in result.stderr


def test_configured_platforms_follow_the_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    from adapters.serve import configured

    assert configured(load_settings()) == []
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("DISCORD_TOKEN", "d")
    assert configured(load_settings()) == ["slack", "discord"]
