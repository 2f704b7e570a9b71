"""What every route of the HTTP port needs of the server it is mounted on (``Served``):
the settings, and the running core once it is up; and whether it is ready
(``Readiness``). Routes ask this protocol, never the server module, so the server
imports its routes and nothing imports the server back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from bot.config import Settings
from bot.models import Core
from bot.wiring import CoreServices


@dataclass
class Readiness:
    """Each part that must be ready, with what is wrong with it (None: ready)."""

    parts: dict[str, str | None] = field(
        default_factory=lambda: {
            "weaviate": "starting",
            "database": "opening",
            "model": "loading",
        }
    )
    stopping: bool = False

    def set(self, part: str, problem: str | None) -> None:
        """Record a part's state (None: ready)."""
        self.parts[part] = problem

    @property
    def ready(self) -> bool:
        """True when every part is ready and the process is not shutting down."""
        return not self.stopping and all(p is None for p in self.parts.values())


class Served(Protocol):
    """The server a route is mounted on: its settings, its readiness, and the running
    core (None while Quorum starts)."""

    @property
    def settings(self) -> Settings:
        """The settings the server runs with."""
        ...

    @property
    def readiness(self) -> Readiness:
        """What is still starting, and whether the process is stopping."""
        ...

    @property
    def services(self) -> CoreServices | None:
        """The core's services (None while starting)."""
        ...

    @property
    def core(self) -> Core | None:
        """The core every question goes to (None while starting)."""
        ...
