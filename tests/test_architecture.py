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


def test_platforms_are_named_only_in_their_folders_and_the_registry() -> None:
    """A chat platform lives in ``adapters/<name>/`` plus its line in
    ``adapters/platform.py``: nothing else in the three packages names one (in code,
    settings or docstrings), so adding one touches nothing else."""
    import re

    from adapters.platform import platforms

    names = [p.name for p in platforms()]
    named = re.compile(rf"(?<![a-z])({'|'.join(names)})(?![a-z])", re.IGNORECASE)
    homes = [REPO / "adapters" / name for name in names]
    found = [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for package in ("adapters", "bot", "retrieval")
        for path in sorted((REPO / package).rglob("*.py"))
        if path != REPO / "adapters" / "platform.py"
        and not any(home in path.parents for home in homes)
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if named.search(line)
    ]
    assert names and found == []
