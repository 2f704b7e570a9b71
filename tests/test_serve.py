"""`quorum serve` says what to configure for a platform it cannot serve."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from adapters.cli.main import app
from bot.config import load_settings

runner = CliRunner()


def test_serving_an_unconfigured_platform_names_its_variable() -> None:
    for platform, variable in (("slack", "SLACK_BOT_TOKEN"), ("discord", "DISCORD_TOKEN")):
        result = runner.invoke(app, ["serve", platform])
        assert result.exit_code == 1
        said = " ".join(result.stderr.split())
        assert f"Set {variable}" in said and f"to serve {platform}." in said
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
