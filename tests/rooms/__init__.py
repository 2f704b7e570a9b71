"""A third chat platform, "rooms", living only in this folder: what a newcomer writes to
add one (docs/architecture.md). It is served, checked by doctor and announced to once
``tests/test_third_platform.py`` adds this package to ``adapters.platform.REGISTRY``."""

from adapters.platform import Platform
from tests.rooms.settings import RoomsSettings

PLATFORM = Platform(
    name="rooms",
    settings=RoomsSettings,
    configured=lambda s: s.token is not None,
    needs="ROOMS_TOKEN",
    runner="tests.rooms.adapter:run_rooms",
    doctor="tests.rooms.adapter:check_rooms",
    poster="tests.rooms.adapter:post_to_rooms",
    channel="ROOM",
    cli="tests.rooms.adapter:rooms_app",
)
