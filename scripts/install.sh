#!/usr/bin/env bash
# Idempotent install: dependencies in a virtualenv cached by the lock file's hash,
# a thin per-checkout .venv that points at it, and the Weaviate server binary.
# A second run on the same machine installs nothing; a fresh machine gets everything.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
python=${PYTHON:-python3}
weaviate_version=${WEAVIATE_VERSION:-v1.39.0}
uv_version=0.13.9
cache=${QUORUM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/quorum}
pyver=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
if [ "$pyver" != "3.11" ]; then
  echo "Quorum needs Python 3.11; '$python' is $pyver. Set PYTHON=/path/to/python3.11." >&2
  exit 1
fi
lock_hash=$( (cat requirements.lock; echo "$pyver $uv_version") | sha256sum | cut -c1-16)
deps="$cache/deps-$lock_hash"
mkdir -p "$cache"

# 1. Dependencies, once per lock file (flock: two checkouts may install at once).
exec 9>"$cache/.install.lock"
flock 9
if [ ! -f "$deps/.complete" ]; then
  echo "Installing dependencies into $deps (first run on this machine; torch is large)..."
  rm -rf "$deps"
  "$python" -m venv "$deps"
  "$deps/bin/python" -m pip install --quiet --disable-pip-version-check "uv==$uv_version"
  "$deps/bin/uv" pip install --python "$deps/bin/python" --no-deps --link-mode copy -r requirements.lock
  touch "$deps/.complete"
fi

# 1b. espeak-ng: the tests speak known sentences into WAV files to transcribe them.
if ! command -v espeak-ng >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "Installing espeak-ng (Debian package; the media tests speak with it)..."
    (apt-get install -y -qq espeak-ng >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq espeak-ng >/dev/null 2>&1; }) \
      || echo "Could not install espeak-ng; the media transcription tests will fail without it." >&2
  else
    echo "espeak-ng is missing and there is no apt-get; install it for the media tests." >&2
  fi
fi

# 1b'. flite: the speaker tests speak a conversation in its distinct voices (kal, awb,
#      rms, slt) to check who said what.
if ! command -v flite >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "Installing flite (Debian package; the speaker tests speak with its voices)..."
    (apt-get install -y -qq flite >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq flite >/dev/null 2>&1; }) \
      || echo "Could not install flite; the speaker tests will fail without it." >&2
  else
    echo "flite is missing and there is no apt-get; install it for the speaker tests." >&2
  fi
fi

# 1c. PostgreSQL: the tests start their own server (initdb + pg_ctl in a temp dir) to
#     test the shared session store. Debian keeps the binaries off PATH.
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "Installing postgresql (Debian package; the session-store tests start a server)..."
    (apt-get install -y -qq postgresql >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq postgresql >/dev/null 2>&1; }) \
      || echo "Could not install postgresql; the PostgreSQL tests will fail without it." >&2
  else
    echo "PostgreSQL's initdb is missing and there is no apt-get; install it for the tests." >&2
  fi
fi

# 1d. Chromium: the page tests open Quorum's pages in Debian's headless browser, driven by
#     Playwright (pointed at /usr/bin/chromium; Playwright never downloads a browser).
if [ ! -x /usr/bin/chromium ]; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "Installing chromium (Debian package; the page tests open pages in it)..."
    (apt-get install -y -qq chromium >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1; }) \
      || echo "Could not install chromium; the page tests will fail without it." >&2
  else
    echo "/usr/bin/chromium is missing and there is no apt-get; install it for the page tests." >&2
  fi
fi

# 2. A thin .venv for this checkout: its own interpreter, the cached packages and
#    this source tree on sys.path, and the `quorum` command.
site=".venv/lib/python$pyver/site-packages"
if [ "$(cat .venv/.deps 2>/dev/null || true)" != "$deps" ]; then
  rm -rf .venv
  "$python" -m venv --without-pip .venv
  echo "import site; site.addsitedir('$deps/lib/python$pyver/site-packages')" > "$site/_quorum_deps.pth"
  echo "$repo" > "$site/_quorum_src.pth"
  for tool in ruff; do ln -sf "$deps/bin/$tool" ".venv/bin/$tool"; done
  for mod in pytest mypy; do
    printf '#!/bin/sh\nexec "%s/.venv/bin/python" -m %s "$@"\n' "$repo" "$mod" > ".venv/bin/$mod"
    chmod +x ".venv/bin/$mod"
  done
  printf '#!%s/.venv/bin/python\nimport sys\nfrom adapters.cli import main\nsys.exit(main())\n' "$repo" > .venv/bin/quorum
  chmod +x .venv/bin/quorum
  echo "$deps" > .venv/.deps
fi

# 2b. Fast start, once per dependency set: bytecode for the cached packages (a shell
#     with PYTHONDONTWRITEBYTECODE=1 would otherwise compile weaviate-client and the
#     rest from source at every command), and the packaged MiniLM exported to ONNX so
#     queries and ingest run on ONNX Runtime without importing torch. Without the
#     export Quorum embeds with torch and says so.
if [ ! -f "$deps/.bytecode" ]; then
  echo "Compiling the cached packages to bytecode (once per dependency set)..."
  "$deps/bin/python" -m compileall -q -j 0 "$deps/lib/python$pyver/site-packages" >/dev/null 2>&1 || true
  touch "$deps/.bytecode"
fi
onnx_file="$deps/share/quorum/all-minilm-l6-v2.onnx"
if [ ! -f "$onnx_file" ]; then
  echo "Exporting the embedding model to ONNX (once per dependency set, about a minute)..."
  "$deps/bin/python" -m retrieval.encoding.onnx_export "$onnx_file" \
    || echo "The ONNX export failed; Quorum will embed with torch (slower start)." >&2
fi
speaker_file="$deps/share/quorum/campplus-sv-zh-en-16k.onnx"
if [ ! -f "$speaker_file" ]; then
  echo "Exporting the speaker model (CAM++) to ONNX (once per dependency set, about a minute)..."
  "$deps/bin/python" -m retrieval.speakers.export "$speaker_file" \
    || echo "The speaker model's export failed; recordings will be transcribed without speakers." >&2
fi
if [ "$(readlink .venv/share/quorum 2>/dev/null || true)" != "$deps/share/quorum" ]; then
  mkdir -p .venv/share
  ln -sfn "$deps/share/quorum" .venv/share/quorum
fi

# 3. The Weaviate server: QUORUM_WEAVIATE_BINARY, else weaviate-server on PATH,
#    else a cached build of the pinned official release (Go module proxy).
wv_dir="$cache/weaviate-$weaviate_version"
if [ -n "${QUORUM_WEAVIATE_BINARY:-}" ]; then
  wv_bin=$QUORUM_WEAVIATE_BINARY
elif command -v weaviate-server >/dev/null 2>&1; then
  wv_bin=$(command -v weaviate-server)
elif [ -x "$wv_dir/weaviate-server" ]; then
  wv_bin="$wv_dir/weaviate-server"
elif command -v go >/dev/null 2>&1; then
  echo "Building weaviate-server $weaviate_version with Go (once per machine, a few minutes)..."
  rm -rf "$wv_dir.tmp"
  mkdir -p "$wv_dir.tmp"
  GOBIN="$wv_dir.tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod \
    go install -tags netgo "github.com/weaviate/weaviate/cmd/weaviate-server@$weaviate_version"
  rm -rf "$wv_dir"
  mv "$wv_dir.tmp" "$wv_dir"
  wv_bin="$wv_dir/weaviate-server"
else
  wv_bin=""
  echo "No Go toolchain: Quorum's embedded mode will download weaviate-server $weaviate_version on first use."
fi
if [ -n "$wv_bin" ]; then
  ln -sf "$wv_bin" .venv/bin/weaviate-server
fi
echo "Quorum is installed: .venv/bin/quorum"
