"""The one store registry. A store is a package (or module) under ``retrieval/store/``
whose top defines ``STORE = StoreKind(...)``: its settings model (its own variables,
``QUORUM_<NAME>_*``), how to open it, how to start it early, and what it keeps under the
data dir. ``REGISTRY`` lists them, one line each; ``QUORUM_STORE`` names the one
``retrieval/service.py`` opens (the last part of its line), and nothing above
``retrieval/store/`` names a store.

Parts are named as ``"module:function"`` and imported only when used, so listing the
stores (settings, ``quorum doctor``) loads no store's client."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from pydantic_settings import BaseSettings, SettingsConfigDict

from retrieval.store.base import Store, StoreInfo

# The packages that define a STORE; the first is what Quorum opens unless QUORUM_STORE says.
REGISTRY: tuple[str, ...] = (
    "retrieval.store.weaviate",
    "retrieval.store.memory",
)


class StoreSettings(BaseSettings):
    """A store's own settings, defined in its package with its own ``env_prefix``
    (``QUORUM_<NAME>_``); loaded by ``bot.config.Settings.store_settings``."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    def where(self, info: StoreInfo) -> str:
        """Where ``quorum doctor`` says the store answered."""
        return info.url

    def fix(self) -> str:
        """What ``quorum doctor`` suggests when the store cannot be opened."""
        return "Check the store's settings and that it runs."


# open(settings, data_dir, one_shot): the store, closed (and a server started, stopped) on exit.
Opener = Callable[[Any, Path, bool], AbstractAsyncContextManager[Store]]
Booter = Callable[[Any, Path], None]  # boot(settings, data_dir): start a server early


@dataclass(frozen=True)
class StoreKind:
    """Everything the retrieval layer knows about one store."""

    settings: type[StoreSettings]  # its own settings, defined in its package
    opener: str  # "module:function", an ``Opener``
    booter: str | None = None  # "module:function", a ``Booter``: for a one-shot command
    keeps: tuple[str, ...] = ()  # what it keeps at the top of the data dir (``quorum doctor``)

    def open(
        self, settings: StoreSettings, data_dir: Path, *, one_shot: bool = False
    ) -> AbstractAsyncContextManager[Store]:
        """The store, opened as ``settings`` say; ``one_shot`` for a command that exits
        after one job (a server it started may be left to stop on its own)."""
        return cast(Opener, _load(self.opener))(settings, data_dir, one_shot)

    def boot(self, settings: StoreSettings, data_dir: Path) -> None:
        """Start what ``open`` will connect to now (nothing for most stores)."""
        if self.booter:
            cast(Booter, _load(self.booter))(settings, data_dir)


def _load(where: str) -> Any:
    module, attribute = where.split(":")
    return getattr(importlib.import_module(module), attribute)


def names() -> list[str]:
    """Every registered store's name (``QUORUM_STORE``), without importing any."""
    return [package.rsplit(".", 1)[1] for package in REGISTRY]


def kind(name: str) -> StoreKind:
    """The registered store called ``name`` (a name ``names`` lists)."""
    package = REGISTRY[names().index(name)]
    return cast(StoreKind, importlib.import_module(package).STORE)


def kind_of(settings: StoreSettings) -> StoreKind:
    """The registered store whose settings ``settings`` are."""
    for found in map(kind, names()):
        if isinstance(settings, found.settings):
            return found
    raise LookupError(f"{type(settings).__name__} is no registered store's settings.")


def kept() -> tuple[str, ...]:
    """What every registered store keeps at the top of the data dir."""
    return tuple(part for name in names() for part in kind(name).keeps)
