"""What a chat platform registers to be served: its name, whether its credentials are
set, what to set when they are not, and how to run it. ``quorum serve`` runs whichever
are configured from ``adapters.serve.PLATFORMS``, with no per-platform code of its own;
adding a platform is one folder with a ``PLATFORM`` like these, its settings, and an
emulator test."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, cast

from bot.config import Settings
from bot.models import Core

# Answers until cancelled, calling ``on_ready`` once connected.
Runner = Callable[[Core, Settings, Callable[[], None]], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class Platform:
    """A chat platform ``quorum serve`` can run."""

    name: str
    configured: Callable[[Settings], bool]
    needs: str  # what to set, said when nothing is configured
    runner: str  # "module:function", imported only when served (SDKs load slowly)

    def run(
        self, core: Core, settings: Settings, on_ready: Callable[[], None]
    ) -> Coroutine[Any, Any, None]:
        """Connect and answer until cancelled; ``on_ready()`` once connected."""
        module, function = self.runner.split(":")
        runner = cast(Runner, getattr(importlib.import_module(module), function))
        return runner(core, settings, on_ready)
