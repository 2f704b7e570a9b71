"""Ingest jobs as a team runs them: real ``quorum worker`` processes on the session
Weaviate server and a SQLite file, killed with SIGKILL mid-transcription, cancelled, fed
broken files; ``quorum jobs --json`` read the way a user reads it."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sqlite3
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from typer.testing import CliRunner

from adapters.chat.uploads import Upload, Uploads
from adapters.cli.main import app
from adapters.doctor import check_jobs
from adapters.platform import Check
from bot.config import load_settings
from bot.jobs import JobQueue, JobTable
from bot.models import Actor
from bot.sessions import SessionStore
from bot.wiring import open_core
from retrieval.store.weaviate import WeaviateStore
from retrieval.store.weaviate.server import Endpoint
from tests.media_fixtures import speak
from tests.test_lifecycle import quorum_serve as serving
from tests.test_uploads import Said

QUORUM = Path(sys.executable).parent / "quorum"
TIMEOUT_S = 2.0  # a dead worker's job is taken up again this soon
SAID = [
    "Good morning everyone, this is the weekly planning meeting for the warehouse.",
    "The zanzibar shipment arrives on the fourth of June at the north dock.",
    "Marco owns the billing migration checklist and sends it to finance.",
    "Priya will review the loading schedule with the night shift on Thursday.",
    "The forklift batteries need replacing before the summer peak begins.",
    "We agreed to move the inventory count to the first Monday of July.",
    "Dana asked for a second scanner at the returns desk by next week.",
    "The new racking plan goes to the landlord for approval on Friday.",
]
runner = CliRunner()


def quorum(*args: str) -> tuple[int, str, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


async def aquorum(*args: str) -> tuple[int, str, str]:
    """``quorum`` from an async test: the command runs its own event loop, in a thread."""
    return await asyncio.to_thread(quorum, *args)


async def alisted(kb: str) -> list[dict[str, Any]]:
    """``listed`` from an async test."""
    return await asyncio.to_thread(listed, kb)


def listed(kb: str, limit: int = 50) -> list[dict[str, Any]]:
    """``quorum jobs --json --kb KB``, as a user reads it."""
    code, out, err = quorum("jobs", "--json", "--kb", kb, "--limit", str(limit))
    assert code == 0, err
    jobs: list[dict[str, Any]] = json.loads(out)
    return jobs


@pytest.fixture
def env(weaviate_env: Endpoint, tmp_path: Path) -> dict[str, str]:
    """What a worker process is started with: the session Weaviate server, this test's
    data dir (the commands run here see the same), a short heartbeat timeout."""
    return {
        **os.environ,
        "QUORUM_DATA_DIR": str(tmp_path / "data"),
        "QUORUM_WEAVIATE_MODE": "local",
        "QUORUM_WEAVIATE_URL": weaviate_env.url,
        "QUORUM_WEAVIATE_GRPC_PORT": str(weaviate_env.grpc_port),
        "QUORUM_JOB_TIMEOUT_S": str(TIMEOUT_S),
    }


@contextlib.asynccontextmanager
async def worker(env: dict[str, str], log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """A ``quorum worker`` process; killed if the test leaves it running."""
    out = open(log, "ab")  # noqa: SIM115, ASYNC230 (closed below)
    proc = await asyncio.create_subprocess_exec(
        str(QUORUM), "worker", env=env, stdout=out, stderr=out, stdin=asyncio.subprocess.DEVNULL
    )
    try:
        yield proc
    except BaseException:
        # What the worker said is the first thing to read when a test around it fails.
        out.flush()
        print(f"--- {log.name}:\n{log.read_text(errors='replace')[-6000:]}")  # noqa: ASYNC240
        raise
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        out.close()


async def until(check: Callable[[], Any], within_s: float = 120.0, every_s: float = 0.2) -> Any:
    """Poll ``check`` until it returns something truthy; that value."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if found := await asyncio.to_thread(check):
            return found
        await asyncio.sleep(every_s)
    raise AssertionError("timed out")


def recording(folder: Path, name: str = "warehouse-planning.wav", repeat: int = 2) -> Path:
    """About a minute and a half of speech: a few seconds of transcription on a 2-core box."""
    folder.mkdir(parents=True, exist_ok=True)
    return speak(folder / name, SAID * repeat, gap_s=1.5).path


async def test_the_same_recording_queued_twice_is_one_job(tmp_path: Path, kb: str) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "standup.txt").write_text("[00:00:05] Ana: The flumox cache evicts entries.\n")
    async with SessionStore.open(tmp_path / "sessions.sqlite3") as sessions:
        queue = JobQueue(JobTable(sessions.driver))
        first, _ = await queue.add(kb, [notes / "standup.txt"], Actor("cli", "ana"))
        again, _ = await queue.add(kb, [notes], Actor("slack", "U2"))  # the folder holding it
        other = tmp_path / "other.txt"
        other.write_text("[00:00:05] Bo: Something else entirely.\n")
        third, missing = await queue.add(kb, [other, tmp_path / "gone.txt"], Actor("cli"))
        assert [j.id for j in again] == [j.id for j in first]  # one job, not two
        assert third[0].id != first[0].id and missing == [tmp_path / "gone.txt"]
        assert (await queue.table.counts())["queued"] == 2


async def test_a_recording_named_beside_its_transcript_is_no_job_of_its_own(
    tmp_path: Path, kb: str
) -> None:
    # `quorum ingest call.vtt call.wav`: one source, the transcript, the recording its media.
    (tmp_path / "call.vtt").write_text("WEBVTT\n\n00:00.000 --> 00:04.000\nHello.\n")
    recorded = recording(tmp_path, "call.wav", repeat=1)
    async with SessionStore.open(tmp_path / "sessions.sqlite3") as sessions:
        queue = JobQueue(JobTable(sessions.driver))
        jobs, _ = await queue.add(kb, [tmp_path / "call.vtt", recorded], Actor("cli"))
        assert [Path(j.file).name for j in jobs] == ["call.vtt"]
        alone, _ = await queue.add(kb, [recorded], Actor("cli"))  # named alone: transcribed
        assert [Path(j.file).name for j in alone] == ["call.wav"]
        assert alone[0].lane == "transcribe"


def test_a_broken_file_fails_with_its_sentence_and_the_others_go_on(
    weaviate_env: Endpoint, tmp_path: Path, kb: str
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "2024-05-02-standup.txt").write_text(
        "[00:00:05] Ana Ruiz: The flumox cache evicts entries after ninety seconds.\n"
    )
    (notes / "broken.json").write_text("{ this is not json")
    (notes / "handbook.md").write_text("# On call\n\nAcknowledge a page within five minutes.\n")

    code, _, err = quorum("ingest", str(notes), "--kb", kb)

    assert code == 1 and "broken.json" in err and "Traceback" not in err
    jobs = {j["file"]: j for j in listed(kb)}
    assert jobs["broken.json"]["state"] == "failed"
    assert jobs["broken.json"]["error"].startswith("invalid JSON at line 1")
    assert {jobs[f]["state"] for f in ("2024-05-02-standup.txt", "handbook.md")} == {"done"}
    assert set(jobs["handbook.md"]) >= {
        "id", "kind", "kb", "file", "state", "progress", "attempts", "worker", "error",
        "created_at",
    }  # fmt: skip
    code, out, _ = quorum("search", "flumox cache", "--kb", kb, "--json")
    assert code == 0 and json.loads(out)[0]["source"]["id"] == "2024-05-02-standup"
    # Mended, the failed file is tried again; a job that is done is not.
    (notes / "broken.json").write_text('{"id": "fixed", "segments": []}')
    code, out, _ = quorum("jobs", "retry", str(jobs["broken.json"]["id"]))
    assert code == 0 and "is queued again" in out
    code, _, err = quorum("jobs", "retry", str(jobs["handbook.md"]["id"]))
    assert code == 1 and "only a failed or cancelled job is retried" in err
    code, _, err = quorum("jobs", "retry", "99999")
    assert code == 1 and "There is no job 99999" in err and "Traceback" not in err
    # A removal is a job too, run here while no worker is alive.
    code, out, _ = quorum("remove", "handbook", "--kb", kb)
    assert code == 0 and "Removed handbook (" in out
    removal = listed(kb)[0]
    assert (removal["kind"], removal["file"], removal["state"]) == ("remove", "handbook", "done")
    code, _, err = quorum("remove", "handbook", "--kb", kb)
    assert code == 1 and "No source 'handbook' in that knowledge base" in err


async def test_no_wait_prints_job_ids_and_a_worker_runs_them(
    env: dict[str, str], store: WeaviateStore, tmp_path: Path, kb: str
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for n in range(3):
        (notes / f"note-{n}.txt").write_text(f"[00:00:05] Ana: Item {n} is the zorblax{n}.\n")

    code, out, err = await aquorum("ingest", str(notes), "--kb", kb, "--no-wait")
    assert code == 0 and "No worker is running" in err
    ids = [int(line.split("\t")[0]) for line in out.splitlines()]
    assert len(ids) == 3 and all(j["state"] == "queued" for j in (await alisted(kb)))

    async with worker(env, tmp_path / "worker.log"):
        await until(lambda: all(j["state"] == "done" for j in listed(kb)), 120)
    assert sorted(j["id"] for j in (await alisted(kb))) == sorted(ids)
    assert len(await store.list_sources(kb)) == 3


async def test_a_database_locked_a_while_costs_no_worker_and_no_reader(
    env: dict[str, str], store: WeaviateStore, tmp_path: Path, kb: str
) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "standup.txt").write_text("[00:00:05] Ana: The quillet rota starts on Monday.\n")
    database = load_settings(data_dir=Path(env["QUORUM_DATA_DIR"])).sessions_path
    async with worker(env, tmp_path / "worker.log") as proc:
        await until(lambda: "is running jobs" in (tmp_path / "worker.log").read_text(), 60)
        # Another process (a backup, a long removal) holds the write lock past SQLite's
        # busy timeout: the worker's look for jobs fails meanwhile.
        other = sqlite3.connect(database, isolation_level=None, timeout=30)
        other.execute("BEGIN IMMEDIATE")
        try:
            # Reading the jobs needs no write lock, however long it is held.
            code, out, err = await aquorum("jobs", "--json", "--kb", kb)
            assert code == 0 and json.loads(out) == [], err
            await until(
                lambda: "could not look for jobs" in (tmp_path / "worker.log").read_text(), 30
            )
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert proc.returncode is None  # the worker lives on, and runs what comes next
        code, _, err = await aquorum("ingest", str(notes), "--kb", kb, "--no-wait")
        assert code == 0, err
        job = await until(lambda: (j := listed(kb)[0])["state"] == "done" and j, 60)
    assert job["source_id"] == "standup"
    assert "Traceback" not in (tmp_path / "worker.log").read_text()


@pytest.mark.timeout(480)
@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
async def test_a_worker_killed_mid_transcription_leaves_it_to_another(
    env: dict[str, str],
    store: WeaviateStore,
    tmp_path: Path,
    kb: str,
    database: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if database == "postgresql":  # PgQueuer notices the stale heartbeat and redelivers
        url = await request.getfixturevalue("postgres").create_database()
        monkeypatch.setenv("QUORUM_DATABASE_URL", url)
        env = {**env, "QUORUM_DATABASE_URL": url}
    # Who spoke is not what this test is about: the recording is transcribed, no more,
    # so a busy machine (a niced worker) still finishes it well within the wait.
    env = {**env, "QUORUM_DIARIZE": "off"}
    wav = recording(tmp_path / "rec")
    code, _, err = await aquorum("ingest", str(wav), "--kb", kb, "--no-wait")
    assert code == 0, err

    async with worker(env, tmp_path / "first.log") as first:
        # Mid-transcription: the worker has reported progress on the recording.
        await until(lambda: listed(kb)[0]["progress"] > 0, 180, 0.1)
        first.send_signal(signal.SIGKILL)
        await first.wait()
    # Nobody has told the record: the heartbeat going stale will.
    assert (await alisted(kb))[0]["state"] == "running"

    async with worker(env, tmp_path / "second.log"):
        job = await until(lambda: (j := listed(kb)[0])["state"] == "done" and j, 240, 1.0)
    assert job["attempts"] == 2
    infos = await store.list_sources(kb)
    assert [i.source.id for i in infos] == ["warehouse-planning"]  # exactly one source
    code, out, _ = await aquorum("search", "zanzibar shipment north dock", "--kb", kb, "--json")
    assert code == 0 and json.loads(out)[0]["source"]["id"] == "warehouse-planning"


async def test_cancel_of_a_running_transcription_leaves_nothing(
    env: dict[str, str], store: WeaviateStore, tmp_path: Path, kb: str
) -> None:
    data = Path(env["QUORUM_DATA_DIR"])
    # An upload kept under the data dir, as a chat upload is.
    upload = recording(data / "uploads" / kb / "by-slack-U1", "standup.wav")
    async with SessionStore.open(load_settings(data_dir=data).sessions_path) as sessions:
        queue = JobQueue(JobTable(sessions.driver))
        [job], _ = await queue.add(kb, [upload], Actor("slack", "U1"))

    async with worker(env, tmp_path / "worker.log") as proc:
        await until(lambda: listed(kb)[0]["progress"] > 0, 180, 0.1)
        code, out, err = await aquorum("jobs", "cancel", str(job.id))
        assert code == 0 and f"Cancelled job {job.id}" in out, err
        await until(lambda: not upload.exists(), 30)
        await asyncio.sleep(TIMEOUT_S)  # the worker carries on with nothing left of it
        assert proc.returncode is None

    [after] = await alisted(kb)
    assert after["state"] == "cancelled"
    assert await store.list_sources(kb) == []
    transcripts = data / "transcripts"
    assert not transcripts.exists() or list(transcripts.iterdir()) == []
    code, _, err = await aquorum("jobs", "cancel", str(job.id))
    assert code == 1 and "already ended (cancelled)" in err


async def test_a_hundred_files_two_workers_and_a_bot_on_one_postgres(
    env: dict[str, str],
    postgres_url: str,
    store: WeaviateStore,
    tmp_path: Path,
    kb: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("QUORUM_DATABASE_URL", postgres_url)
    shared = {**env, "QUORUM_DATABASE_URL": postgres_url}
    notes = tmp_path / "notes"
    notes.mkdir()
    for n in range(100):
        (notes / f"note-{n:03d}.md").write_text(f"# Note {n}\n\nThe code word is qx{n}zz.\n")

    code, out, err = await aquorum("ingest", str(notes), "--kb", kb, "--no-wait")
    assert code == 0, err
    ids = [int(line.split("\t")[0]) for line in out.splitlines()]
    _, again, _ = await aquorum("ingest", str(notes / "note-007.md"), "--kb", kb, "--no-wait")
    assert len(ids) == 100 and again.split("\t")[0] == str(ids[7])  # queued twice: one job

    async with (
        worker(shared, tmp_path / "w1.log"),
        worker(shared, tmp_path / "w2.log"),
        serving({**shared, "QUORUM_SERVE_WORKERS": "0"}, tmp_path) as bot,
    ):
        await bot.ready()
        jobs = await until(
            lambda: (js := listed(kb, 200)) and all(j["state"] == "done" for j in js) and js, 240
        )
    assert sorted(j["id"] for j in jobs) == sorted(ids)  # none lost
    assert {j["attempts"] for j in jobs} == {1}  # none run twice
    assert len({j["worker"] for j in jobs}) == 2  # both workers took a share
    assert len(await store.list_sources(kb)) == 100
    code, out, _ = await aquorum("audit", "--kb", kb, "--json", "--limit", "500")
    assert code == 0
    assert sorted(e["action"] for e in json.loads(out)) == ["added"] * 100


async def test_doctor_shows_the_workers_alive_and_the_oldest_queued_job(
    tmp_path: Path, kb: str
) -> None:
    settings = load_settings(data_dir=tmp_path / "data")
    note = tmp_path / "standup.txt"
    note.write_text("[00:00:05] Ana: The flumox cache evicts entries.\n")
    assert (await check_jobs(settings)) == Check(
        "jobs", "ok", "0 worker(s) alive; nothing queued (0 failed in all)"
    )
    async with SessionStore.open(settings.sessions_path) as sessions:
        table = JobTable(sessions.driver)
        await JobQueue(table).add(kb, [note], Actor("cli"))
        idle = await check_jobs(settings)
        await table.seen("box-2:41:ab", "box-2", 41, time.time())
        busy = await check_jobs(settings)
    assert idle is not None and idle.status == "warn"
    assert "1 queued, the oldest (standup.txt) for" in idle.detail
    assert "`quorum worker`" in idle.fix
    assert busy is not None and busy.status == "ok"
    assert busy.detail.startswith("1 worker(s) alive on box-2; 1 queued")


async def test_a_chat_upload_shows_queued_then_transcribing_then_done_with_its_link(
    env: dict[str, str], tmp_path: Path, kb: str
) -> None:
    """The bot (``quorum serve``'s core, jobs left to workers) waits while a worker
    process transcribes; the thread hears each step."""
    env = {**env, "QUORUM_CHUNK_SECONDS": "20"}  # a short recording with a summary
    settings = load_settings(data_dir=Path(env["QUORUM_DATA_DIR"]), chunk_seconds=20)
    wav = recording(tmp_path / "rec", "standup.wav").read_bytes()

    async def fetch(to: Path, limit: int) -> None:
        await asyncio.to_thread(to.write_bytes, wav)

    async def broken(to: Path, limit: int) -> None:
        await asyncio.to_thread(to.write_bytes, b"%PDF-1.7 this is no PDF at all")

    said, bad = Said(), Said()
    async with open_core(settings, inline_jobs=False) as services:
        assert services.engine.library is not None
        uploads = Uploads(services.engine.library, 20)
        by = Actor("slack", "U1")
        adding = asyncio.create_task(
            uploads.add(kb, Upload("standup.wav", len(wav), fetch), said, by)
        )
        await until(lambda: any(line.startswith("Queued") for line in said.lines), 60)
        async with worker(env, tmp_path / "worker.log"):
            added = await asyncio.wait_for(adding, 240)
            failed = await uploads.add(kb, Upload("notes.pdf", 30, broken), bad, by)

    assert added is not None and added.status == "added"
    assert said.lines[2] == "Queued: standup.wav…"
    assert any(re.match(r"Transcribing standup\.wav: \d+ %, ", line) for line in said.lines)
    assert said.lines[-1].startswith("Added *Standup* (`standup`): ")
    assert " Open it: http://localhost:8088/v/" in said.lines[-1]
    # A broken file: its sentence in the thread and in `quorum jobs`, alike.
    assert failed is not None and failed.status == "failed"
    job = next(j for j in await alisted(kb) if j["file"] == "notes.pdf")
    assert job["state"] == "failed" and job["error"]
    assert bad.lines[-1] == f"I couldn't add notes.pdf: {job['error']}"


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (procfs)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """``pid`` runs (a zombie does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


async def test_a_serve_killed_outright_takes_its_workers_with_it(
    env: dict[str, str], tmp_path: Path
) -> None:
    # SIGKILL (the OOM killer) runs no clean-up: the worker must notice on its own, not run
    # on unsupervised beside the workers of the next serve.
    async with serving({**env, "QUORUM_SERVE_WORKERS": "1"}, tmp_path) as served:
        await served.ready()
        [worker_pid] = await until(lambda: children(served.proc.pid), 60)
        served.proc.kill()
        await served.proc.wait()
        await until(lambda: not alive(worker_pid), 30)
    assert "quorum serve (pid" in (tmp_path / "serve.log").read_text()


async def test_a_restart_of_serve_finishes_the_uploads_queued_and_the_one_running(
    env: dict[str, str], store: WeaviateStore, tmp_path: Path, kb: str
) -> None:
    rec = tmp_path / "rec"
    first = recording(rec, "first-meeting.wav")
    second = recording(rec, "second-meeting.wav", repeat=1)
    (rec / "notes.md").write_text("# Notes\n\nThe quokka budget is approved.\n")
    served_env = {**env, "QUORUM_SERVE_WORKERS": "1"}

    async with serving(served_env, tmp_path) as served:
        await served.ready()
        code, _, err = await aquorum("ingest", str(first), str(second), str(rec / "notes.md"),
                                     "--kb", kb, "--no-wait")  # fmt: skip
        assert code == 0, err
        running = await until(
            lambda: [j for j in listed(kb) if j["state"] == "running" and j["progress"] > 0], 180
        )
        served.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(served.proc.wait(), 60) == 0
    before = {j["file"]: j for j in await alisted(kb)}
    assert before[running[0]["file"]]["state"] == "queued"  # handed back, not lost
    assert any(j["state"] == "queued" for f, j in before.items() if f != running[0]["file"])

    async with serving(served_env, tmp_path) as served:
        await served.ready()
        after = await until(
            lambda: (js := listed(kb)) and all(j["state"] == "done" for j in js) and js, 240
        )
        served.proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(served.proc.wait(), 60)
    assert len(after) == 3
    assert {i.source.id for i in await store.list_sources(kb)} == {
        "first-meeting",
        "second-meeting",
        "notes",
    }


def vm_mb(pid: int) -> float:
    """A process's address space (VmSize), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmSize for {pid}")


async def test_a_decoder_out_of_memory_costs_its_worker_and_the_bot_keeps_answering(
    env: dict[str, str], tmp_path: Path, kb: str
) -> None:
    """QUORUM_WORKER_MEMORY_MB bounds serve's worker a little above what an idle one uses
    here: transcribing a recording exhausts it. The worker fails the job or dies (and is
    started again); the bot, another process, answers throughout."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "handbook.md").write_text("# On call\n\nThe quokka pager rotates weekly.\n")
    code, _, err = await aquorum("ingest", str(notes), "--kb", kb)
    assert code == 0, err
    async with worker(env, tmp_path / "probe.log") as probe:  # an idle worker's size here
        await asyncio.sleep(6)  # connected, waiting for work
        idle = vm_mb(probe.pid)
    wav = recording(tmp_path / "rec", "long-meeting.wav", repeat=1)
    code, _, err = await aquorum("ingest", str(wav), "--kb", kb, "--no-wait")
    assert code == 0, err
    bot_env = {
        **env,
        "QUORUM_SERVE_WORKERS": "1",
        "QUORUM_WORKER_MEMORY_MB": str(int(idle + 300)),
        "QUORUM_API_TOKENS": f"tok:{kb}",
    }
    auth = {"Authorization": "Bearer tok"}
    async with serving(bot_env, tmp_path) as bot, aiohttp.ClientSession() as http:
        await bot.ready()

        async def answers() -> None:
            query = {"query": "quokka pager", "k": 1}
            async with http.post(f"{bot.http}/api/search", json=query, headers=auth) as r:
                assert r.status == 200
                assert (await r.json())["hits"][0]["source"]["id"] == "handbook"

        deadline = time.monotonic() + 240
        while (job := next(j for j in await alisted(kb) if j["file"] == wav.name))["state"] not in (
            "done",
            "failed",
        ):
            assert time.monotonic() < deadline, job
            await answers()  # the bot answers while its worker runs out of memory
            await asyncio.sleep(0.5)
        await answers()
        assert bot.proc.returncode is None
    assert job["state"] == "failed"
    assert re.search(r"memory|Memory|alloc|stopped", job["error"]), job["error"]
