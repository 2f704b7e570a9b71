# Quorum. `make install` is idempotent and cached (see scripts/install.sh);
# `make test` installs, then runs ruff, mypy, pytest and the runtime check;
# `make runtime-check` runs Quorum from the torch-free runtime dependency set alone
# (what the image's runtime stage holds; see scripts/runtime_check.sh);
# `make locks` regenerates requirements.lock and requirements-runtime.lock from pyproject.toml;
# `make demo` opens the sample chat.
.PHONY: install test lint runtime-check locks demo bench clean

install:
	@bash scripts/install.sh

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/python -m mypy

test: lint
	.venv/bin/python -m pytest
	@bash scripts/runtime_check.sh

runtime-check: install
	@bash scripts/runtime_check.sh

locks:
	@bash scripts/lock.sh

demo: install
	.venv/bin/quorum demo

bench: install
	.venv/bin/python bench/ingest.py
	.venv/bin/python bench/transcribe.py
	.venv/bin/python bench/search.py
	.venv/bin/python bench/range_index.py
	.venv/bin/python bench/quality.py
	.venv/bin/python bench/qmsum.py
	.venv/bin/python bench/answer.py
	.venv/bin/python bench/citations.py
	.venv/bin/python bench/research.py
	.venv/bin/python bench/slack_load.py
	.venv/bin/python bench/soak.py
	.venv/bin/python bench/serve_start.py
	.venv/bin/python bench/cluster.py
	.venv/bin/python bench/pages.py
	.venv/bin/python bench/mcp.py

clean:
	rm -rf .venv .venv-runtime .mypy_cache .ruff_cache .pytest_cache
