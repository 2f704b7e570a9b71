"""The runtime dependency set, alone, runs Quorum: `make runtime-check`'s smoke test.

Run by the runtime virtualenv's interpreter (``scripts/runtime_check.sh`` builds it from
``requirements-runtime.lock``), with the standard library only, as an operator would use
the container: no torch importable; ``quorum serve`` with the JSON API open;
``/readyz``; ``quorum ingest examples/`` and ``quorum search`` beside it; ``POST /api/ask`` answered
with citations; a torch-only setting refused in one line; SIGTERM -> exit 0, and the
embedded Weaviate it started stopped. Exits 1 with one line saying what failed.

Run: ``python scripts/runtime_smoke.py QUORUM_COMMAND REPO``.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

KB = "smoke"
TOKEN = "runtime-smoke-token"
QUESTION = "Why did we leave Auth0?"
TORCH_PACKAGES = ("torch", "sentence_transformers", "transformers", "triton")
START_TIMEOUT_S = 180.0


class SmokeFailed(Exception):
    """One check failed; the message says which and what was seen."""


def check(ok: bool, what: str) -> None:
    """Fail the smoke test with ``what`` unless ``ok``."""
    if not ok:
        raise SmokeFailed(what)


def step(name: str, started: float) -> None:
    """One line per passed step, with the seconds since the test began."""
    print(f"  ok  {name} ({time.monotonic() - started:.1f} s)", flush=True)


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(
    method: str, url: str, body: dict[str, Any] | None = None, token: str | None = None
) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of one request (errors are statuses, not exceptions)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            return exc.code, json.loads(raw or b"{}")
        except ValueError:
            return exc.code, {"raw": raw[:200].decode(errors="replace")}


def quorum(command: str, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One CLI command to its end."""
    return subprocess.run(
        [command, *args], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def no_torch() -> None:
    """The runtime cannot import torch or anything of the torch path."""
    for name in TORCH_PACKAGES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        raise SmokeFailed(f"{name} is importable in the runtime environment")


def wait_ready(base: str, proc: subprocess.Popen[bytes], log: Path) -> dict[str, Any]:
    """/readyz's body once it is 200 (fails if the server exits or never gets there)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace")[-1500:]
            raise SmokeFailed(f"quorum serve exited with {proc.returncode} while starting:\n{tail}")
        try:
            status, body = http("GET", f"{base}/readyz")
        except OSError:
            status = 0
        if status == 200:
            return body
        time.sleep(0.5)
    raise SmokeFailed(f"/readyz never turned 200 within {START_TIMEOUT_S:.0f} s: {body}")


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid still exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def serve_and_ask(
    command: str, env: dict[str, str], examples: Path, data: Path, started: float
) -> None:
    """`quorum serve`: ready; the examples ingested and searched beside it (sharing its
    embedded Weaviate, as one-shot commands do); asked over the API; stopped by SIGTERM."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = env | {
        "QUORUM_HTTP_PORT": str(port),
        "QUORUM_HTTP_HOST": "127.0.0.1",
        "QUORUM_API_TOKENS": f"{TOKEN}:{KB}",
    }
    log = data.parent / "serve.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [command, "serve"], env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL
        )
    try:
        ready = wait_ready(base, proc, log)
        checks = ready.get("checks", {})
        check(
            all(v == "ok" for v in checks.values()) and {"weaviate", "model"} <= set(checks),
            f"/readyz checks: {checks}",
        )
        step(f"quorum serve: /readyz 200 {checks}", started)

        ingested = quorum(command, ["ingest", str(examples), "--kb", KB], env)
        check(
            ingested.returncode == 0,
            f"quorum ingest examples/ failed: {ingested.stderr.strip()[-800:]}",
        )
        # the summary table's row: added, updated, skipped, failed, segments, seconds
        row = [c.strip() for c in (ingested.stdout.strip().splitlines() or [""])[-1].split("│")]
        check(len(row) == 6 and int(row[0]) > 0, f"quorum ingest added nothing: {row}")
        step(f"quorum ingest examples/: {row[0]} sources, {row[4]} segments", started)

        found = quorum(command, ["search", "Auth0 Cognito cost", "--kb", KB, "--json"], env)
        check(found.returncode == 0, f"quorum search failed: {found.stderr.strip()[-500:]}")
        hits = json.loads(found.stdout)
        check(bool(hits), "quorum search found nothing in the ingested examples")
        step(f"quorum search beside serve: {len(hits)} hits", started)

        torch_env = env | {"QUORUM_EMBED_BACKEND": "torch"}
        refused = quorum(command, ["search", "Auth0", "--kb", KB], torch_env)
        said = " ".join(refused.stderr.split())  # one sentence, wrapped at the terminal width
        check(
            refused.returncode == 1
            and said.count("Error:") == 1
            and "no torch" in said
            and "Traceback" not in said,
            f"QUORUM_EMBED_BACKEND=torch without torch: exit {refused.returncode}, said {said}",
        )
        step(f"QUORUM_EMBED_BACKEND=torch refused: {said}", started)

        status, _ = http("POST", f"{base}/api/ask", {"question": QUESTION})
        check(status == 401, f"/api/ask without a token answered {status}, not 401")
        status, answer = http("POST", f"{base}/api/ask", {"question": QUESTION}, TOKEN)
        check(status == 200, f"/api/ask answered {status}: {answer}")
        citations = answer.get("citations") or []
        link = str(citations[0].get("link", "")) if citations else ""
        check(  # no Claude key here: the quoted passages, each linked at its second
            answer.get("kind") == "extractive" and "t=" in link,
            f"/api/ask gave no cited answer: {json.dumps(answer)[:500]}",
        )
        step(f"POST /api/ask: {len(citations)} citations, first {link}", started)

        state = json.loads((data / "weaviate-server" / "server.json").read_text())
        weaviate_pid = int(state["pid"])
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=90)
        check(code == 0, f"quorum serve exited {code} after SIGTERM, not 0")
        deadline = time.monotonic() + 20
        while pid_alive(weaviate_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        check(not pid_alive(weaviate_pid), "the embedded weaviate-server outlived quorum serve")
        step("SIGTERM: quorum serve exited 0 and stopped its weaviate-server", started)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def main(argv: list[str]) -> int:
    """Run every check in order; the first failure ends the test with one line."""
    command, repo = argv[1], Path(argv[2])
    started = time.monotonic()
    try:
        no_torch()
        step(f"no {', '.join(TORCH_PACKAGES)} importable", started)
        with tempfile.TemporaryDirectory(prefix="quorum-runtime-") as tmp:
            data = Path(tmp) / "data"
            env = {k: v for k, v in os.environ.items() if not k.startswith("QUORUM_")}
            for secret in ("ANTHROPIC_API_KEY", "SLACK_BOT_TOKEN", "DISCORD_TOKEN"):
                env.pop(secret, None)
            env |= {"QUORUM_DATA_DIR": str(data), "HF_HUB_OFFLINE": "1"}
            serve_and_ask(command, env, repo / "examples", data, started)
    except SmokeFailed as exc:
        print(f"runtime-check FAILED: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError, subprocess.SubprocessError) as exc:
        print(f"runtime-check FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(f"runtime-check passed in {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
