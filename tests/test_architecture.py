"""The arrows point one way: adapters -> bot -> retrieval. This walks every import
(module level or inside a function) and fails on a wrong one, and keeps environment
reads in the settings object."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
VENDORS = {"slack_bolt", "slack_sdk", "discord", "weaviate"}
FORBIDDEN = {
    "retrieval": {"bot", "adapters", "slack_bolt", "slack_sdk", "discord", "anthropic"},
    "bot": {"adapters", "typer", "rich"} | VENDORS,
    "adapters": {"weaviate"},
    # The conversation every platform shares imports no platform and no CLI.
    "adapters/chat": {"typer", "rich", "aiohttp"} | VENDORS,
}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_imports_point_one_way(package: str) -> None:
    wrong = {
        str(path.relative_to(REPO)): sorted(imports(path) & FORBIDDEN[package])
        for path in (REPO / package).rglob("*.py")
    }
    assert {k: v for k, v in wrong.items() if v} == {}


# A model vendor's SDK is imported by its own module of the model seam, and nowhere else.
MODEL_SDKS = {"anthropic": "bot/llm/claude.py", "openai": "bot/llm/openai_compat.py"}


@pytest.mark.parametrize("sdk", sorted(MODEL_SDKS))
def test_a_model_sdk_stays_behind_its_seam(sdk: str) -> None:
    importers = sorted(
        str(path.relative_to(REPO))
        for package in ("adapters", "bot", "retrieval")
        for path in (REPO / package).rglob("*.py")
        if sdk in imports(path)
    )
    assert importers == [MODEL_SDKS[sdk]]


def test_environment_is_read_only_by_settings() -> None:
    readers = [
        str(path.relative_to(REPO))
        for package in ("bot", "adapters")
        for path in (REPO / package).rglob("*.py")
        if path.name != "config.py"
        and ("os.environ" in path.read_text() or "os.getenv" in path.read_text())
    ]
    assert readers == []


def test_the_check_would_catch_a_wrong_arrow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from adapters.slack.app import run_slack\n    import discord\n")
    assert imports(bad) >= {"adapters", "discord"}


def test_the_map_names_every_module() -> None:
    """docs/architecture.md lists every module of the three packages (its path below the
    package, e.g. ``chat/view.py`` or ``research/loop.py``), so the map cannot go stale."""
    text = (REPO / "docs" / "architecture.md").read_text()
    missing = [
        str(path.relative_to(REPO))
        for package in ("adapters", "bot", "retrieval")
        for path in sorted((REPO / package).rglob("*.py"))
        if path.name != "__init__.py"
        and f"`{path.relative_to(REPO / package)}`" not in text
        and f"`{path.name}`" not in text
    ]
    assert missing == []


def test_the_store_takes_and_returns_quorum_types() -> None:
    """Swapping the store means re-implementing its methods, not learning Weaviate's
    filter classes from their signatures (``connect`` alone takes the vendor's client)."""
    import inspect

    from retrieval.store import Store

    leaks = []
    for name, fn in inspect.getmembers(Store, inspect.isfunction):
        if name.startswith("_") or name == "connect":
            continue
        sig = inspect.signature(fn)
        shown = [str(p.annotation) for p in sig.parameters.values()] + [str(sig.return_annotation)]
        leaks += [f"{name}: {a}" for a in shown if "_Filter" in a or "weaviate" in a.lower()]
    assert not leaks
