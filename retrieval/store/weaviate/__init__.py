"""Everything Weaviate: the client and its server, the schema, writes, reads and filters,
and its settings (``settings.py``); ``STORE`` is its line in ``retrieval/store/registry.py``.

Nothing outside this package imports ``weaviate`` or touches a Weaviate client. The client
library is imported on first use of ``WeaviateStore`` (a second on two cores): opening
the store starts the embedded server first, so the server boots while it is imported."""

from __future__ import annotations

from typing import TYPE_CHECKING

from retrieval.store.registry import StoreKind
from retrieval.store.weaviate.settings import DATA_DIR_NAMES, WeaviateSettings

if TYPE_CHECKING:
    from retrieval.store.weaviate.store import WeaviateStore

__all__ = ["STORE", "WeaviateSettings", "WeaviateStore"]

STORE = StoreKind(
    settings=WeaviateSettings,
    opener="retrieval.store.weaviate.open:open_weaviate",
    booter="retrieval.store.weaviate.open:boot",
    keeps=DATA_DIR_NAMES,
)


def __getattr__(name: str) -> object:
    if name == "WeaviateStore":
        # the client library: on first use (see above)
        from retrieval.store.weaviate.store import WeaviateStore

        return WeaviateStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
