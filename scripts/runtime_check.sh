#!/usr/bin/env bash
# `make runtime-check`: what the container's runtime stage installs, proved without Docker.
# Builds the runtime dependency set (requirements-runtime.lock: no torch, no
# sentence-transformers, no CUDA libraries) into a fresh virtualenv cached by the lock's
# hash (a second run installs nothing; packages come from uv's cache), gives a thin
# .venv-runtime this source tree and a copy of the ONNX export `make install` made, then
# runs scripts/runtime_smoke.py with it: no torch importable, ingest, serve, search, the
# API, SIGTERM. Finally prints the runtime's installed size beside the full set's.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
python=${PYTHON:-python3}
uv_version=0.13.9
cache=${QUORUM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quorum}
pyver=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
full=$(cat .venv/.deps 2>/dev/null || true)
export_file="$full/share/quorum/all-minilm-l6-v2.onnx"
if [ -z "$full" ] || [ ! -x "$full/bin/uv" ] || [ ! -f "$export_file" ]; then
  echo "runtime-check needs \`make install\` first (its uv and its ONNX export)." >&2
  exit 1
fi

# 1. The runtime dependency set, once per runtime lock (flock: checkouts may run at once).
lock_hash=$( (cat requirements-runtime.lock; echo "$pyver $uv_version") | sha256sum | cut -c1-16)
runtime="$cache/runtime-$lock_hash"
mkdir -p "$cache"
exec 8>"$cache/.runtime.lock"
flock 8
if [ ! -f "$runtime/.complete" ]; then
  echo "Installing the runtime dependency set into $runtime (once per runtime lock)..."
  rm -rf "$runtime"
  "$python" -m venv --without-pip "$runtime"
  "$full/bin/uv" pip install --quiet --python "$runtime/bin/python" --no-deps \
    --link-mode copy -r requirements-runtime.lock
  "$runtime/bin/python" -m compileall -q -j 0 "$runtime/lib/python$pyver/site-packages" \
    >/dev/null 2>&1 || true
  touch "$runtime/.complete"
else
  echo "Runtime dependency set: $runtime (cached; nothing to install)"
fi
flock -u 8

# 2. A thin virtualenv over it, as the image's runtime stage is: the packages, this source
#    tree, the `quorum` command, and the export copied in (the image copies it from its
#    build stage). weaviate-server is the one `make install` found or built.
venv=.venv-runtime
site="$venv/lib/python$pyver/site-packages"
if [ "$(cat "$venv/.runtime" 2>/dev/null || true)" != "$runtime" ]; then
  rm -rf "$venv"
  "$python" -m venv --without-pip "$venv"
  echo "import site; site.addsitedir('$runtime/lib/python$pyver/site-packages')" \
    > "$site/_quorum_deps.pth"
  echo "$repo" > "$site/_quorum_src.pth"
  printf '#!%s/%s/bin/python\nimport sys\nfrom adapters.cli import main\nsys.exit(main())\n' \
    "$repo" "$venv" > "$venv/bin/quorum"
  chmod +x "$venv/bin/quorum"
  echo "$runtime" > "$venv/.runtime"
fi
mkdir -p "$venv/share/quorum"
if ! cmp -s "$export_file" "$venv/share/quorum/all-minilm-l6-v2.onnx"; then
  cp "$export_file" "$venv/share/quorum/all-minilm-l6-v2.onnx"
fi
speaker_file="$full/share/quorum/campplus-sv-zh-en-16k.onnx"  # speakers: CAM++ export
if [ -f "$speaker_file" ] && ! cmp -s "$speaker_file" "$venv/share/quorum/${speaker_file##*/}"; then
  cp "$speaker_file" "$venv/share/quorum/${speaker_file##*/}"
fi
if [ -e .venv/bin/weaviate-server ]; then
  ln -sfn "$(readlink -f .venv/bin/weaviate-server)" "$venv/bin/weaviate-server"
fi

# 3. The smoke test, run by the runtime's own interpreter.
echo "Smoke test in $venv (the runtime dependency set alone):"
PATH="$repo/$venv/bin:$PATH" "$venv/bin/python" scripts/runtime_smoke.py \
  "$repo/$venv/bin/quorum" "$repo"

# 4. Sizes: the runtime (what the image's runtime stage holds) beside the full set.
runtime_size=$(du -sh "$runtime" | cut -f1)
full_size=$(du -sh "$full" | cut -f1)
export_size=$(du -sh "$export_file" | cut -f1)
echo "Installed size: runtime $runtime_size + ONNX export $export_size; full set $full_size."
