"""The arrows point one way: adapters -> bot -> retrieval. This walks every import
(module level or inside a function) and fails on a wrong one, and keeps environment
reads in the settings object."""

from __future__ import annotations

import ast
import inspect
import tokenize
import typing
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


MCP_SDK = {"mcp", "mcp_types"}


def test_the_mcp_sdk_stays_in_its_package() -> None:
    """The MCP SDK (``mcp``, and ``mcp_types`` under it) is imported in ``adapters/mcp/``
    and nowhere else: the tools there speak Quorum's types to the rest of the code."""
    importers = sorted(
        str(path.relative_to(REPO))
        for package in ("adapters", "bot", "retrieval")
        for path in (REPO / package).rglob("*.py")
        if imports(path) & MCP_SDK and not path.is_relative_to(REPO / "adapters" / "mcp")
    )
    assert importers == []
    assert any(imports(p) & MCP_SDK for p in (REPO / "adapters" / "mcp").glob("*.py"))


def modules_imported(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports (``from a.b import c`` gives ``a.b``)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def test_citations_know_nothing_of_the_answer_paths() -> None:
    """``bot/cite/`` (the ``[n]`` grammar, sentences and their seconds, alignment) is used
    by the quick path and deep research alike and imports neither, nor the engine."""
    above = ("bot.answer", "bot.research", "bot.engine", "bot.router", "bot.llm")
    wrong = {
        path.name: sorted(m for m in modules_imported(path) if m.startswith(above))
        for path in (REPO / "bot" / "cite").glob("*.py")
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


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, by its full dotted name (``from a import b`` names
    both ``a`` and ``a.b``: ``b`` may be a module)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


WEAVIATE_STORE = "retrieval/store/weaviate"


def test_only_the_weaviate_store_imports_weaviate() -> None:
    """The client and its classes live in ``retrieval/store/weaviate/``; above it, only
    ``retrieval/service.py`` opens that package (every other module asks ``Store``)."""
    wrong = []
    for package in ("adapters", "bot", "retrieval"):
        for path in sorted((REPO / package).rglob("*.py")):
            where = path.relative_to(REPO)
            if where.is_relative_to(WEAVIATE_STORE):
                continue
            for module in imported_modules(path):
                vendor = module.split(".")[0] == "weaviate"
                ours = module.startswith("retrieval.store.weaviate")
                if vendor or (ours and str(where) != "retrieval/service.py"):
                    wrong.append(f"{where}: {module}")
    assert wrong == []


def test_weaviate_is_only_a_word_above_retrieval() -> None:
    """In ``bot/`` and ``adapters/`` "weaviate" names a setting or is said in a message, a
    docstring or a comment; never a module, a client, a function or a variable of ours
    (what ``grep -rn weaviate bot adapters`` finds is settings wording)."""
    from bot.config import Settings

    settings = set(Settings.model_fields)
    found = []
    for package in ("adapters", "bot"):
        for path in sorted((REPO / package).rglob("*.py")):
            with path.open() as fh:
                for tok in tokenize.generate_tokens(fh.readline):
                    name = tok.string
                    if tok.type == tokenize.NAME and "weaviate" in name.lower():
                        if name not in settings:
                            found.append(f"{path.relative_to(REPO)}:{tok.start[0]}: {name}")
    assert found == []


def test_the_import_check_would_catch_the_store_package(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from retrieval.store import weaviate\nasync def f(s):\n    s.client\n")
    assert "retrieval.store.weaviate" in imported_modules(bad)


def _leaves(hint: object) -> list[object]:
    """The classes a type hint is made of (``dict[str, X] | None``: dict, str, X, None)."""
    if typing.get_origin(hint) is typing.Literal:
        return []
    args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    return [origin] + [t for a in args for t in _leaves(a)] if args else [hint]


def store_methods() -> list[str]:
    from retrieval.store.base import Store

    return sorted(n for n, _ in inspect.getmembers(Store, inspect.isfunction) if n[0] != "_")


def test_the_store_takes_and_returns_quorum_types() -> None:
    """Swapping the store means implementing ``Store`` (``retrieval/store/base.py``), whose
    every parameter and result is one of Quorum's types or a builtin: no ``Any``, nothing
    of Weaviate's."""
    from retrieval.store.base import Store

    allowed = {"builtins", "collections.abc", "types", "typing"}
    leaks = []
    for name in store_methods():
        for part, hint in typing.get_type_hints(getattr(Store, name)).items():
            for leaf in _leaves(hint):
                module = getattr(leaf, "__module__", "")
                if leaf is typing.Any or (
                    module not in allowed and not module.startswith("retrieval.")
                ):
                    leaks.append(f"{name} {part}: {leaf}")
                elif "weaviate" in module:
                    leaks.append(f"{name} {part}: {leaf}")
    assert len(store_methods()) >= 10 and leaks == []


STORES = {
    "WeaviateStore": "retrieval.store.weaviate",
    "MemoryStore": "retrieval.store.memory",
}


@pytest.mark.parametrize("implementation", sorted(STORES))
def test_each_store_offers_every_method_of_the_protocol(implementation: str) -> None:
    """Each implementation has each of ``Store``'s methods with the same parameters (names,
    kinds and defaults), so a caller written against the protocol runs on any of them."""
    import importlib

    from retrieval.store.base import Store

    cls = getattr(importlib.import_module(STORES[implementation]), implementation)
    differ = []
    for name in store_methods():
        want = inspect.signature(getattr(Store, name))
        have = inspect.signature(getattr(cls, name)) if hasattr(cls, name) else None
        shape = [(p.name, p.kind, p.default) for p in want.parameters.values()]
        if have is None or shape != [(p.name, p.kind, p.default) for p in have.parameters.values()]:
            differ.append(f"{name}: {have} is not {want}")
    assert differ == []


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


def indexer_callers(path: Path) -> set[str]:
    """What ``path`` takes from ``retrieval.write.indexer`` that writes (``ingest``, ``_Run``),
    or the module itself (``import retrieval.write.indexer``, whose ``ingest`` it could call)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module == "retrieval.write.indexer":
            found.update(a.name for a in node.names if a.name in {"ingest", "_Run", "*"})
        elif isinstance(node, ast.ImportFrom) and node.module == "retrieval.write":
            found.update(a.name for a in node.names if a.name == "indexer")
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name == "retrieval.write.indexer")
    return found


def test_only_the_write_path_calls_the_indexer() -> None:
    """Every add of a source goes through ``bot/write.py`` (audit, the model's summary,
    announcements, kept media), so no other door may call the indexer and skip them."""
    callers = sorted(
        str(path.relative_to(REPO))
        for package in ("adapters", "bot", "retrieval")
        for path in (REPO / package).rglob("*.py")
        if indexer_callers(path)
        and path.relative_to(REPO).as_posix() != "retrieval/write/indexer.py"
    )
    assert callers == ["bot/write.py"]


def test_only_the_write_path_rewrites_speakers() -> None:
    """Renaming a source's speakers writes the source again: only ``Writer.relabel`` may
    call ``retrieval.write.relabel.relabel`` (its audit entry and caches follow)."""
    callers = []
    for package in ("adapters", "bot", "retrieval"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == "retrieval.write.relabel":
                    if any(a.name == "relabel" for a in node.names):
                        callers.append(path.relative_to(REPO).as_posix())
    assert callers == ["bot/write.py"]


def test_the_indexer_check_would_catch_a_second_door(tmp_path: Path) -> None:
    bad = tmp_path / "door.py"
    bad.write_text("def f():\n    from retrieval.write.indexer import FileResult, ingest\n")
    assert indexer_callers(bad) == {"ingest"}
