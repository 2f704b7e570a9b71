"""Opening the retrieval layer: open the store ``RetrievalConfig.store`` names (whichever
registered store its settings belong to, ``retrieval/store/registry.py``), and hand out the
store, the embedder and the search service. Callers pass a ``RetrievalConfig`` of plain
values and the chosen store's settings, and get Quorum types back."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from retrieval.encoding.embed import EmbedBackend, LazyEmbedder
from retrieval.encoding.rerank import CrossEncoderReranker
from retrieval.links.kept_media import MediaStore
from retrieval.links.share import LinkSigner, load_secret
from retrieval.search.search import SearchService
from retrieval.speakers.voiceprints import VOICEPRINTS, Voiceprints
from retrieval.store import Store, registry
from retrieval.store.registry import StoreSettings
from retrieval.write.chunking import ChunkConfig

if TYPE_CHECKING:
    from retrieval.speakers.diarize import Diarizer
    from retrieval.write.transcribe import Transcriber

TRANSCRIPTS = "transcripts"
MEDIA = "media"

DATA_PARTS: dict[str, tuple[str, ...]] = {
    "index": registry.kept(),
    "transcripts": (TRANSCRIPTS,),
    "voiceprints": (VOICEPRINTS,),
}
"""What the retrieval layer keeps under the data dir, by kind (``quorum doctor``)."""


@dataclass(frozen=True)
class RetrievalConfig:
    """What the retrieval layer needs to start, as plain values (the bot's settings
    fill it in; ``bot.wiring.retrieval_config``)."""

    data_dir: Path
    store: StoreSettings  # the chosen store's own settings (its class says which store)
    embed_model_path: Path | None = None
    embed_batch_size: int = 64
    embed_backend: EmbedBackend = "onnx"
    embed_onnx_path: Path | None = None
    rerank_model_path: Path | None = None
    hybrid_alpha: float = 0.5
    chunking: ChunkConfig = field(default_factory=ChunkConfig)
    whisper_model: str | None = None  # a model folder or name; None: the packaged tiny.en
    # Quorum's own pages (``retrieval.links.share``): where they are reached, the link secret
    # (None: one made in ``data_dir``), and how long a link lasts. No public URL: no links.
    public_url: str | None = None
    link_secret: str | None = None
    link_ttl_days: float = 30.0
    # A command that exits after one job: an embedded server it started is left to its
    # reaper (stopped within a second) instead of waited for (``EmbeddedServer.stop``).
    one_shot: bool = False
    # The media store's bounds (``retrieval.links.kept_media``): None keeps everything.
    media_max_bytes: int | None = None
    media_retain_days: float | None = None
    # Speakers (``retrieval.diarize``): found in recordings Quorum transcribes unless off;
    # their voiceprints kept only with ``voices`` (``retrieval.speakers.voiceprints``).
    diarize: bool = True
    speaker_onnx_path: Path | None = None
    voices: bool = False

    def voiceprints(self) -> Voiceprints:
        """Speakers' vectors per source under ``data_dir/voiceprints`` (kept only with
        ``voices``)."""
        return Voiceprints(self.data_dir / VOICEPRINTS, self.voices)

    def media(self) -> MediaStore:
        """The store of what pages serve, under ``data_dir/media``."""
        return MediaStore(self.data_dir / MEDIA, self.media_max_bytes, self.media_retain_days)

    def transcriber(self) -> Transcriber:
        """The Whisper transcriber for audio and video (its model loads on first use),
        keeping transcripts under ``data_dir/transcripts``."""
        from retrieval.write.transcribe import Transcriber  # NumPy and Whisper's runtime: when used

        return Transcriber(self.whisper_model, self.data_dir / TRANSCRIPTS)

    def diarizer(self) -> Diarizer | None:
        """Who spoke in recordings Quorum transcribes (CAM++ loads on first use); None
        with ``diarize`` off."""
        if not self.diarize:
            return None
        from retrieval.speakers.diarize import Diarizer

        return Diarizer(self.speaker_onnx_path)


@dataclass
class Retrieval:
    """Everything the retrieval layer hands out, built once."""

    config: RetrievalConfig
    store: Store
    embedder: LazyEmbedder
    search: SearchService
    transcriber: Transcriber
    diarizer: Diarizer | None = None

    @property
    def chunking(self) -> ChunkConfig:
        """How sources are cut into windows."""
        return self.config.chunking

    @property
    def media(self) -> MediaStore:
        """What pages serve, kept at ingest."""
        return self.config.media()

    @property
    def voiceprints(self) -> Voiceprints:
        """Speakers' vectors per source (kept only with ``QUORUM_VOICES=on``)."""
        return self.config.voiceprints()

    @property
    def signer(self) -> LinkSigner | None:
        """Signs and checks the links to Quorum's pages (None without a public URL)."""
        return self.search.signer


def boot(config: RetrievalConfig) -> None:
    """Start the store's server booting now (if it runs one), for a command that opens
    the retrieval layer soon (``open_retrieval`` with the same config takes it over)."""
    registry.kind_of(config.store).boot(config.store, config.data_dir)


@contextlib.asynccontextmanager
async def open_retrieval(
    config: RetrievalConfig, *, warm: bool = False
) -> AsyncIterator[Retrieval]:
    """Start or reach the store, connect, and hand out the retrieval services; with
    ``warm`` the embedding model loads while the store starts."""
    async with contextlib.AsyncExitStack() as stack:
        embedder = LazyEmbedder(
            config.embed_model_path,
            config.embed_batch_size,
            config.embed_backend,
            config.embed_onnx_path,
        )
        stack.push_async_callback(asyncio.to_thread, embedder.finish_loading)  # runs last
        if warm:
            embedder.warm()
        kind = registry.kind_of(config.store)
        store = await stack.enter_async_context(
            kind.open(config.store, config.data_dir, one_shot=config.one_shot)
        )
        reranker = None
        if config.rerank_model_path:
            reranker = await asyncio.to_thread(
                CrossEncoderReranker.from_path, config.rerank_model_path
            )
        signer = None
        if config.public_url:  # the secret is read (or made) when the first link is signed
            secret = partial(load_secret, config.data_dir, config.link_secret)
            signer = LinkSigner(secret, config.public_url, config.link_ttl_days)
        search = SearchService(
            store, embedder, alpha=config.hybrid_alpha, reranker=reranker, signer=signer
        )
        yield Retrieval(config, store, embedder, search, config.transcriber(), config.diarizer())
