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


def test_boto3_stays_in_the_s3_connector() -> None:
    importers = sorted(
        str(path.relative_to(REPO))
        for package in ("adapters", "bot", "retrieval")
        for path in (REPO / package).rglob("*.py")
        if imports(path) & {"boto3", "botocore"}
    )
    assert importers == ["bot/connectors/s3.py"]


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
    """The client and its classes live in ``retrieval/store/weaviate/``; every other module
    asks ``Store`` (and ``retrieval/service.py`` opens it through the store registry)."""
    wrong = []
    for package in ("adapters", "bot", "retrieval"):
        for path in sorted((REPO / package).rglob("*.py")):
            where = path.relative_to(REPO)
            if where.is_relative_to(WEAVIATE_STORE):
                continue
            for module in imported_modules(path):
                vendor = module.split(".")[0] == "weaviate"
                ours = module.startswith("retrieval.store.weaviate")
                if vendor or ours:
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


SEAM = {"__init__.py", "base.py", "registry.py"}


def stores_found(root: Path) -> list[str]:
    """Every store under ``root`` (``retrieval/store/``), by module name: each package,
    and each module that is not the seam's own (``base``, ``registry``)."""
    return sorted(
        f"retrieval.store.{p.stem}"
        for p in root.iterdir()
        if (p.is_dir() and (p / "__init__.py").exists())
        or (p.suffix == ".py" and p.name not in SEAM)
    )


def test_every_store_is_in_the_registry() -> None:
    """A store is its package under ``retrieval/store/`` plus its line in
    ``retrieval/store/registry.py``: one without its line would never be opened (nor run
    through ``tests/test_store.py``'s contract), and a line without its package fails."""
    from retrieval.store import registry

    assert stores_found(REPO / "retrieval" / "store") == sorted(registry.REGISTRY)
    for name in registry.names():
        kind = registry.kind(name)
        prefix = kind.settings.model_config.get("env_prefix")
        assert prefix == f"QUORUM_{name.upper()}_", f"{name}'s settings read {prefix}*"


def test_the_store_check_would_catch_an_unregistered_store(tmp_path: Path) -> None:
    for name in ("__init__.py", "base.py", "registry.py", "memory.py"):
        (tmp_path / name).write_text("")
    (tmp_path / "redis").mkdir()
    (tmp_path / "redis" / "__init__.py").write_text("")
    (tmp_path / "__pycache__").mkdir()
    assert stores_found(tmp_path) == ["retrieval.store.memory", "retrieval.store.redis"]


def test_a_store_is_opened_only_through_the_registry() -> None:
    """No module outside a store's own package imports it: ``retrieval/service.py`` opens
    whichever ``QUORUM_STORE`` names through ``retrieval/store/registry.py``, so choosing
    another store changes no code above ``retrieval/store/``."""
    from retrieval.store import registry

    wrong = []
    for package in ("adapters", "bot", "retrieval"):
        for path in sorted((REPO / package).rglob("*.py")):
            where = path.relative_to(REPO)
            for store in registry.REGISTRY:
                home = Path(*store.split("."))
                if where.is_relative_to(home) or where == home.with_suffix(".py"):
                    continue
                wrong += [f"{where}: {m}" for m in imported_modules(path) if m.startswith(store)]
    assert wrong == []


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


def calls_to(path: Path, method: str) -> int:
    """How many calls in ``path`` are to a ``method`` of something (``.method(...)``)."""
    return sum(
        1
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == method
    )


def source_deleters(path: Path) -> int:
    """How many calls in ``path`` delete a source from the store (``.delete_source(...)``)."""
    return calls_to(path, "delete_source")


def test_only_holdings_removes_a_source() -> None:
    """Every removal goes through ``Holdings.forget`` (kept transcript, uploads, media,
    answers scrubbed, the index's files purged, the audit trail), so no other module may
    delete a source from the store and skip them (``Writer.remove`` is ``forget``)."""
    callers = sorted(
        str(path.relative_to(REPO))
        for package in ("adapters", "bot", "retrieval")
        for path in (REPO / package).rglob("*.py")
        if source_deleters(path) and not path.is_relative_to(REPO / "retrieval" / "store")
    )
    assert callers == ["bot/holdings.py"]


def test_only_the_write_path_sets_a_source_path() -> None:
    """A source's stored path is written by ``Writer.show_origins`` alone (its search cache
    follows), never by a module calling the store's ``set_path`` itself."""
    callers = sorted(
        str(path.relative_to(REPO))
        for package in ("adapters", "bot", "retrieval")
        for path in (REPO / package).rglob("*.py")
        if calls_to(path, "set_path") and not path.is_relative_to(REPO / "retrieval" / "store")
    )
    assert callers == ["bot/write.py"]


def test_the_removal_check_would_catch_a_twin(tmp_path: Path) -> None:
    twin = tmp_path / "twin.py"
    twin.write_text("async def remove(store, kb, sid):\n    await store.delete_source(kb, sid)\n")
    assert source_deleters(twin) == 1


# ---------------------------------------------------------------- private names, circles

PACKAGES = ("adapters", "bot", "retrieval")


def module_name(path: Path) -> str:
    """``adapters/http/api.py`` -> ``adapters.http.api`` (a package's ``__init__``: the package)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def our_modules() -> dict[str, Path]:
    """Every module of the three packages, by dotted name."""
    return {module_name(p): p for pkg in PACKAGES for p in sorted((REPO / pkg).rglob("*.py"))}


def _absolute(node: ast.ImportFrom, name: str, path: Path) -> str:
    """The module an ``ImportFrom`` reads from, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
    return ".".join(parts + ([node.module] if node.module else []))


def private_imports(path: Path, modules: set[str]) -> list[str]:
    """Where ``path`` takes another of our modules' private names: ``from x import _y``
    (``_y`` not a module itself), or ``x._y`` with ``x`` a module it imported. What a
    module does with a vendor's private names is between it and the vendor."""
    name = module_name(path) if path.is_relative_to(REPO) else path.stem
    tree = ast.parse(path.read_text(), str(path))
    found: list[str] = []
    aliases: dict[str, str] = {}  # a local name bound to one of our modules -> that module
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(node, name, path)
            for alias in node.names:
                full = f"{source}.{alias.name}"
                if full in modules:
                    aliases[alias.asname or alias.name] = full
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                ours = source in modules and full not in modules
                if private and ours and source != name:
                    found.append(f"{node.lineno}: from {source} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            if node.attr.startswith("__"):
                continue
            owner = ast.unparse(node.value)
            module = aliases.get(owner, owner)
            if module in modules and module != name:
                found.append(f"{node.lineno}: {owner}.{node.attr}")
    return found


def test_no_module_takes_another_modules_private_names() -> None:
    """A name that starts with ``_`` is its module's own: another module that needs it
    needs a public name (tests may reach in; the three packages may not)."""
    modules = set(our_modules())
    found = [
        f"{module_name(path)}:{where}"
        for path in our_modules().values()
        for where in private_imports(path, modules)
    ]
    assert found == []


def test_the_private_check_would_catch_both_forms(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from adapters.http import pages\n"
        "from adapters.http.api import _field\n"
        "def f():\n    return pages._passages([])\n"
    )
    found = private_imports(bad, set(our_modules()))
    assert found == ["2: from adapters.http.api import _field", "4: pages._passages"]


def _explained(lines: list[str], lineno: int) -> bool:
    """A comment on the import's line, or on the line above, says why it is there (a
    ``noqa`` or ``type:`` pragma says nothing)."""

    def says(line: str) -> bool:
        comment = line.partition("#")[2].strip()
        return bool(comment) and not comment.startswith(("noqa", "type:"))

    above = lines[lineno - 2] if lineno >= 2 else ""
    return says(lines[lineno - 1]) or (above.strip().startswith("#") and says(above))


def import_edges(path: Path, modules: set[str]) -> set[str]:
    """The modules of ours that ``path`` imports: every import at module level (those under
    ``if TYPE_CHECKING:`` too), and those inside a function unless a comment says why."""
    name = module_name(path) if path.is_relative_to(REPO) else path.stem
    lines = path.read_text().splitlines()
    edges: set[str] = set()

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                if not (in_function and _explained(lines, child.lineno)):
                    if isinstance(child, ast.Import):
                        targets = [a.name for a in child.names]
                    else:
                        source = _absolute(child, name, path)
                        targets = [
                            f"{source}.{a.name}" if f"{source}.{a.name}" in modules else source
                            for a in child.names
                        ]
                    edges.update(t for t in targets if t in modules and t != name)
            inner = isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(child, in_function or inner)

    visit(ast.parse("\n".join(lines), str(path)), False)
    return edges


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import graph's circles: each set of modules that reach one another (Tarjan's
    strongly connected components of more than one module), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while (w := stack.pop()) != v:
                component.append(w)
            component.append(v)
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return sorted(found)


def test_no_import_circles() -> None:
    """No set of modules imports one another round in a circle, at module level (a
    function-level import counts too unless a comment beside it says why it is there)."""
    modules = our_modules()
    graph = {name: import_edges(path, set(modules)) for name, path in modules.items()}
    assert circles(graph) == []


def test_the_circle_check_would_catch_one(tmp_path: Path) -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    said = tmp_path / "said.py"
    said.write_text("def f():\n    # slow to import\n    import adapters.platform\n")
    quiet = tmp_path / "quiet.py"
    quiet.write_text("def f():\n    import adapters.platform  # noqa: PLC0415\n")
    typed = tmp_path / "typed.py"
    typed.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from adapters.platform import Check\n"
    )
    modules = {"adapters.platform"}
    assert import_edges(said, modules) == set()
    assert import_edges(quiet, modules) == import_edges(typed, modules) == {"adapters.platform"}
