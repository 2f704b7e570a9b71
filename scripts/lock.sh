#!/usr/bin/env bash
# Regenerate both lock files from pyproject.toml, with the uv that `make install` pins:
#   requirements.lock          everything: runtime, the torch extra (the ONNX export and the
#                              torch backend) and dev tools; what `make install` installs
#   requirements-runtime.lock  what `quorum serve`, `ingest`, `search`, `ask` need at run
#                              time: no torch, no sentence-transformers, no CUDA libraries;
#                              pinned to the same versions as requirements.lock
# Run: make locks
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
uv_version=0.13.9
uv=${UV:-}
if [ -z "$uv" ]; then
  cache=${QUORUM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quorum}
  for candidate in "$(cat .venv/.deps 2>/dev/null || true)/bin/uv" "$(command -v uv || true)" \
    "$cache"/deps-*/bin/uv; do
    if [ -x "$candidate" ] && "$candidate" --version | grep -q " $uv_version"; then
      uv=$candidate
      break
    fi
  done
fi
if [ -z "$uv" ]; then
  echo "No uv $uv_version: run \`make install\` first, or set UV=/path/to/uv." >&2
  exit 1
fi
platform=(--python-version 3.11 --python-platform x86_64-manylinux_2_28)
"$uv" pip compile pyproject.toml --extra torch --extra dev "${platform[@]}" -o requirements.lock
"$uv" pip compile pyproject.toml --excludes requirements-runtime.exclude \
  --constraints requirements.lock "${platform[@]}" -o requirements-runtime.lock
