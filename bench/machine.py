"""How busy the machine was while a benchmark measured: CPU used by everything else.

On a shared box the numbers mean little without this. ``Contention`` reads
``/proc/stat`` and the CPU times of our own process and the Weaviate server around a
measurement; whatever CPU the machine spent beyond those was other processes' work.
Linux only; elsewhere it reports nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) used so far by a process; 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # the fields after the command name
    return (int(fields[11]) + int(fields[12])) / _TICK


def machine_busy() -> float | None:
    """Non-idle CPU seconds of all cores since boot, or None without ``/proc/stat``."""
    try:
        first = Path("/proc/stat").read_text().splitlines()[0].split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in first[1:9])
    return (user + nice + system + irq + softirq + steal) / _TICK


def server_pid(data_dir: Path) -> int | None:
    """The pid of the embedded Weaviate server serving ``data_dir`` (its server.json)."""
    try:
        return int(json.loads((data_dir / "server.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None


class Contention:
    """Started at construction; ``others()`` says how many cores other processes kept busy."""

    def __init__(self, server: int | None) -> None:
        self.server = server
        self.wall = time.perf_counter()
        self.busy = machine_busy()
        self.ours = time.process_time() + process_cpu(server)

    def others(self) -> float | None:
        """Mean number of cores busy with other processes' work since construction."""
        busy = machine_busy()
        if busy is None or self.busy is None:
            return None
        ours = time.process_time() + process_cpu(self.server) - self.ours
        wall = time.perf_counter() - self.wall
        return max(0.0, (busy - self.busy - ours) / wall) if wall > 0 else None


def describe(others: list[float | None]) -> str:
    """One sentence on the machine, saying plainly when it was loaded."""
    cores = os.cpu_count() or 1
    seen = [x for x in others if x is not None]
    if not seen:
        return f"Machine: {cores} cores (other load not measurable here)."
    worst, mean = max(seen), sum(seen) / len(seen)
    text = (
        f"Machine: {cores} cores; other processes kept {mean:.1f} cores busy on average "
        f"during the measurements (at worst {worst:.1f})"
    )
    if worst >= 0.25 * cores:
        return text + f" - these numbers were taken on a loaded {cores}-core machine."
    return text + "."
