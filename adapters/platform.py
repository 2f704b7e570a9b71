"""The one platform registry. A chat platform is a folder, ``adapters/<name>/``, whose
``__init__.py`` defines ``PLATFORM = Platform(...)``: its name, its settings model, and
where its parts live: how to run it (``quorum serve``), its ``quorum doctor`` check, how
it posts a summary (``QUORUM_POST_SUMMARIES``) and any commands it adds to ``quorum``.
A platform whose events arrive over HTTP names their path (``webhook``): ``quorum serve``
mounts it on its own port. ``REGISTRY`` lists those folders, one line each; nothing else
in Quorum names a platform.

Parts are named as ``"module:attribute"`` and imported only when used, so a one-shot
``quorum search`` loads no chat SDK (they take seconds to import)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

from bot.config import PlatformSettings, Settings
from bot.models import Core

if TYPE_CHECKING:
    import typer

    from adapters.http.webhooks import Webhook

# The packages that define a PLATFORM, in the order they are served, checked and listed.
REGISTRY: tuple[str, ...] = (
    "adapters.slack",
    "adapters.discord",
)

P = TypeVar("P", bound=PlatformSettings)
Status = Literal["ok", "warn", "FAIL"]


@dataclass(frozen=True)
class Check:
    """One row of ``quorum doctor``'s report (a platform's own row among them)."""

    name: str
    status: Status
    detail: str
    fix: str = ""


# Answers until cancelled, calling ``on_ready`` once connected.
Runner = Callable[[Core, Settings, Callable[[], None]], Coroutine[Any, Any, None]]
# The same, for a platform whose events arrive on quorum serve's port: it answers them there.
HookedRunner = Callable[
    [Core, Settings, Callable[[], None], "Webhook | None"], Coroutine[Any, Any, None]
]
Doctor = Callable[[Settings], Coroutine[Any, Any, Check | None]]
Poster = Callable[[Settings, str, str], Coroutine[Any, Any, None]]  # channel, markdown


def _load(where: str) -> Any:
    module, attribute = where.split(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class Platform(Generic[P]):
    """Everything Quorum knows about one chat platform."""

    name: str
    settings: type[P]  # its own settings, defined in its folder (``Settings.platform``)
    configured: Callable[[P], bool]  # its credentials are set: serve it, check it
    needs: str  # what to set, said when it is not configured
    runner: str  # "module:function", a ``Runner``
    doctor: str  # "module:function", a ``Doctor``: its row of ``quorum doctor``
    poster: str  # "module:function", a ``Poster``: one message to one of its channels
    channel: str = "CHANNEL"  # how QUORUM_POST_SUMMARIES writes a channel after "name:"
    cli: str | None = None  # "module:attribute", a typer app of commands it adds
    # The path its HTTP events arrive at on quorum serve's port, given its settings (None:
    # not there). Its runner is then a ``HookedRunner``, handed the ``Webhook`` to answer.
    webhook: Callable[[P], str | None] | None = None

    def own(self, settings: Settings) -> P:
        """Its settings within ``settings`` (a ConfigError names a bad variable)."""
        return settings.platform(self.settings)

    def is_configured(self, settings: Settings) -> bool:
        """Its credentials are set."""
        return self.configured(self.own(settings))

    def webhook_path(self, settings: Settings) -> str | None:
        """Where its events arrive on quorum serve's port (None: not there)."""
        return self.webhook(self.own(settings)) if self.webhook else None

    def run(
        self,
        core: Core,
        settings: Settings,
        on_ready: Callable[[], None],
        webhook: Webhook | None = None,
    ) -> Coroutine[Any, Any, None]:
        """Connect and answer until cancelled; ``on_ready()`` once connected. A platform
        with a ``webhook`` answers its events at ``webhook``."""
        if self.webhook is None:
            return cast(Runner, _load(self.runner))(core, settings, on_ready)
        return cast(HookedRunner, _load(self.runner))(core, settings, on_ready, webhook)

    def check(self, settings: Settings) -> Coroutine[Any, Any, Check | None]:
        """Its ``quorum doctor`` row (None when it is not configured)."""
        return cast(Doctor, _load(self.doctor))(settings)

    def post(self, settings: Settings, channel: str, markdown: str) -> Coroutine[Any, Any, None]:
        """Post ``markdown`` to ``channel`` as the bot."""
        return cast(Poster, _load(self.poster))(settings, channel, markdown)

    def commands(self) -> typer.Typer | None:
        """The commands it adds to ``quorum`` (a group named for it), if any."""
        return cast("typer.Typer", _load(self.cli)) if self.cli else None


def platforms() -> list[Platform[Any]]:
    """Every registered platform."""
    return [importlib.import_module(package).PLATFORM for package in REGISTRY]


def by_name() -> dict[str, Platform[Any]]:
    """Every registered platform by its name."""
    return {p.name: p for p in platforms()}


def configured(settings: Settings) -> list[Platform[Any]]:
    """The platforms whose credentials are set."""
    return [p for p in platforms() if p.is_configured(settings)]
