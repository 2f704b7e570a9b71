"""A recording's stages as a person watches them: transcribing, telling speakers apart,
writing. A Slack upload (Bolt against the Slack emulator) run by a real ``quorum worker``
process on the session Weaviate server says each stage in its one progress message, and
``quorum jobs --json`` shows the stage while the job runs; run here (no worker alive),
every stage reaches the upload's message and ``quorum ingest``'s progress bars."""

from __future__ import annotations

import asyncio
import io
import os
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from rich.console import Console

from adapters.chat.uploads import Upload, Uploads
from adapters.cli.ingest_progress import IngestProgress
from bot.jobs import JobQueue, JobTable
from bot.library import KbLibrary
from bot.models import Actor
from bot.sessions import SessionStore
from bot.wiring import open_core
from bot.write import Writer
from retrieval.encoding.embed import SentenceTransformerEmbedder
from retrieval.search.search import SearchService
from retrieval.speakers.diarize import Diarizer
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from retrieval.write.transcribe import Transcriber
from tests.emulators.slack import ALICE, BOT_USER, SlackEmulator
from tests.fakes import FakeCore
from tests.test_jobs import listed, recording, until, worker
from tests.test_slack import GENERAL, bot_replies, make_settings, running
from tests.test_uploads import Said

TELLING = re.compile(r"Telling speakers apart in standup\.wav(: \d+ %)?…")


@pytest.fixture
async def slack() -> AsyncIterator[SlackEmulator]:
    async with SlackEmulator() as emulator:
        yield emulator


@pytest.fixture
def env(weaviate_env: Endpoint, tmp_path: Path) -> dict[str, str]:
    """A worker process's environment: the session Weaviate server, this test's data dir."""
    return {
        **os.environ,
        "QUORUM_DATA_DIR": str(tmp_path / "data"),
        "QUORUM_WEAVIATE_MODE": "local",
        "QUORUM_WEAVIATE_URL": weaviate_env.url,
        "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate_env.grpc_port),
        "QUORUM_JOB_TIMEOUT_S": "30",  # a beat every 7.5 s: a stage is written when it starts
    }


async def test_a_slack_upload_run_by_a_worker_says_each_stage_and_quorum_jobs_shows_it(
    env: dict[str, str], slack: SlackEmulator, tmp_path: Path, kb: str
) -> None:
    wav = recording(tmp_path / "rec", "standup.wav", repeat=1).read_bytes()
    settings = make_settings(
        slack, data_dir=Path(env["QUORUM_DATA_DIR"]), slack_kb=kb, slack_admins=ALICE,
        upload_max_mb=20,
    )  # fmt: skip
    async with (
        worker(env, tmp_path / "worker.log"),  # outermost: the bot's upload ends, even on failure
        open_core(settings, inline_jobs=False) as services,
        running(FakeCore(library=services.engine.library), settings, slack) as bot,
    ):
        msg = slack.user_posts(GENERAL, f"<@{BOT_USER}> add this", user=ALICE)
        files = [slack.share_file("standup.wav", wav)]
        event = slack.event(msg, "app_mention", files=files)
        assert (await slack.deliver_event(event)).status == 200
        stages: list[tuple[str, str | None]] = []

        def seen() -> bool:
            jobs = listed(kb)
            if not jobs:  # the bot has not queued it yet
                return False
            [job] = jobs
            if (job["state"], job.get("stage")) not in stages:
                stages.append((job["state"], job.get("stage")))
            return bool(job["state"] == "done")

        await until(seen, 120, 0.1)
        await bot.settle()

    running_stages = [stage for state, stage in stages if state == "running"]
    assert "diarizing" in running_stages, stages
    assert stages[-1] == ("done", None)  # a finished job is in no stage
    [reply] = bot_replies(slack, GENERAL, msg.ts)
    shown = [v["text"] for v in reply.versions]
    assert shown[-1].startswith("Added *Standup* (`standup`): ")
    transcribing = max(i for i, t in enumerate(shown) if t.startswith("_Transcribing standup"))
    telling = [i for i, t in enumerate(shown) if TELLING.search(t)]
    assert telling and transcribing < telling[0] < len(shown) - 1, shown


async def test_run_here_every_stage_reaches_the_upload_message_and_ingest_progress(
    store: WeaviateStore,
    embedder: SentenceTransformerEmbedder,
    search: SearchService,
    tmp_path: Path,
    kb: str,
) -> None:
    writer = Writer(
        store=store,
        embedder=embedder,
        search=search,
        transcriber=Transcriber(cache_dir=tmp_path / "transcripts"),
        diarizer=Diarizer(),
        uploads_dir=tmp_path / "uploads",
    )
    wav = recording(tmp_path / "rec", "standup.wav", repeat=1)
    async with SessionStore.open(tmp_path / "sessions.sqlite3") as sessions:
        table = JobTable(sessions.driver)
        queue = JobQueue(table, writer=writer)
        library = KbLibrary(
            store=store, embedder=embedder, search=search, uploads_dir=tmp_path / "uploads",
            writer=writer, jobs=queue,
        )  # fmt: skip
        said = Said()
        data = wav.read_bytes()

        async def fetch(to: Path, limit: int) -> None:
            await asyncio.to_thread(to.write_bytes, data)

        added = await Uploads(library, 20).add(kb, Upload("standup.wav", len(data), fetch), said)
        assert added is not None and added.status == "added"
        [job] = await table.listing(kb)
        assert (job.state, job.stage, job.progress) == ("done", None, 1.0)

        # `quorum ingest` in the foreground: its recording's bar names each stage.
        bars = _Bars(Console(file=io.StringIO()))
        other = wav.with_name("standup-again.wav")
        other.write_bytes(data + b"\0\0")  # another file: transcribed, not skipped
        jobs, _ = await queue.add(kb, [other], Actor("cli"))
        with bars:
            [ended] = await queue.settle(jobs, bars)
        assert ended.state == "done", ended

    stages = [_stage_of(line) for line in said.lines]
    kept = [s for n, s in enumerate(stages) if s and (n == 0 or stages[n - 1] != s)]
    assert kept == ["transcribing", "diarizing", "writing"], said.lines
    assert "Writing standup.wav into the archive…" in said.lines
    assert said.lines[-1].startswith("Added *Standup* (`standup`): ")
    assert [b.split(" ")[0] for b in bars.shown] == ["transcribing", "diarizing", "writing"]
    assert bars.shown[-1] == "writing standup-again.wav"


def _stage_of(line: str) -> str | None:
    for stage, start in (
        ("transcribing", "Transcribing "),
        ("diarizing", "Telling speakers apart "),
        ("writing", "Writing "),
    ):
        if line.startswith(start):
            return stage
    return None


class _Bars(IngestProgress):
    """``quorum ingest``'s display, remembering each label its recording's bar took."""

    def __init__(self, console: Console) -> None:
        super().__init__(console)
        self.shown: list[str] = []

    def _keep(self) -> None:
        if self.audio is not None:
            label = str(self.progress.tasks[-1].description)
            if not self.shown or self.shown[-1] != label:
                self.shown.append(label)

    def transcribing(self, path: str, done_s: float, total_s: float) -> None:
        super().transcribing(path, done_s, total_s)
        self._keep()

    def diarizing(self, path: str, done_s: float, total_s: float) -> None:
        super().diarizing(path, done_s, total_s)
        self._keep()

    def writing(self, path: str) -> None:
        super().writing(path)
        self._keep()
