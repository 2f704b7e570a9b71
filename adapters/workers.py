"""The worker processes ``quorum serve`` runs (``QUORUM_SERVE_WORKERS``): each is
``quorum worker``, a process of its own, so a decoder that crashes or exhausts memory
takes that worker down, never the bot. A worker that exits is started again (waiting a
little longer after each quick death); the job it was running is taken up again once its
heartbeat is stale (``bot.jobs``). Stopping serve stops them (SIGTERM, then SIGKILL)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys

log = logging.getLogger("quorum.serve")

COMMAND = (sys.executable, "-c", "import sys; from adapters.cli import main; sys.exit(main())")
STOP_S = 10.0  # a worker's grace to stop before it is killed
QUICK_S = 30.0  # a worker that dies sooner than this is started again after a backoff


class Workers:
    """``count`` worker processes, kept running until ``stop``."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.procs: list[asyncio.subprocess.Process | None] = [None] * count
        self.restarts = 0
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        """Start every worker and its keeper."""
        self._tasks = [
            asyncio.create_task(self._keep(i), name=f"quorum-worker-{i}") for i in range(self.count)
        ]

    async def _keep(self, slot: int) -> None:
        wait = 1.0
        while True:
            # --parent: the worker stops when this process is gone, even killed (SIGKILL,
            # the OOM killer), rather than run on unsupervised beside the next serve's.
            proc = await asyncio.create_subprocess_exec(
                *COMMAND, "worker", "--parent", str(os.getpid())
            )
            self.procs[slot] = proc
            t0 = asyncio.get_running_loop().time()
            code = await proc.wait()
            self.restarts += 1
            quick = asyncio.get_running_loop().time() - t0 < QUICK_S
            wait = min(30.0, wait * 2) if quick else 1.0
            log.warning(
                "worker pid %s exited (%s); starting another in %.0f s", proc.pid, code, wait
            )
            await asyncio.sleep(wait)

    @property
    def pids(self) -> list[int]:
        """The running workers' pids."""
        return [p.pid for p in self.procs if p is not None and p.returncode is None]

    async def stop(self) -> None:
        """Stop every worker: SIGTERM, then SIGKILL after ``STOP_S``."""
        for task in self._tasks:
            task.cancel()
        for proc in self.procs:
            if proc is not None and proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.terminate()
        for proc in self.procs:
            if proc is None:
                continue
            try:
                await asyncio.wait_for(proc.wait(), STOP_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        await asyncio.gather(*self._tasks, return_exceptions=True)
