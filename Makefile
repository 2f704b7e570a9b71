# Quorum. `make install` is idempotent and cached (see scripts/install.sh);
# `make test` installs, then runs ruff, mypy and pytest; `make demo` opens the sample chat.
.PHONY: install test lint demo bench clean

install:
	@bash scripts/install.sh

lint: install
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/python -m mypy

test: lint
	.venv/bin/python -m pytest

demo: install
	.venv/bin/quorum demo

bench: install
	.venv/bin/python bench/ingest.py
	.venv/bin/python bench/transcribe.py
	.venv/bin/python bench/search.py
	.venv/bin/python bench/quality.py
	.venv/bin/python bench/qmsum.py
	.venv/bin/python bench/answer.py
	.venv/bin/python bench/citations.py
	.venv/bin/python bench/research.py
	.venv/bin/python bench/slack_load.py
	.venv/bin/python bench/soak.py
	.venv/bin/python bench/serve_start.py
	.venv/bin/python bench/cluster.py

clean:
	rm -rf .venv .mypy_cache .ruff_cache .pytest_cache
