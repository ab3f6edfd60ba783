# Two commands do all the set-up on a fresh machine (Python 3.11, package registries only):
#   make lab    sets up .venv and runs the main job
#   make test   sets up .venv and runs the whole test suite (lint, types, tests)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The TypeScript compiler, only to check the generated client types (tests/test_contract_artefacts.py).
TSC := clients/typescript/node_modules/.bin/tsc

.PHONY: setup lab demo test lint typecheck pytest bench bench-replay clean contract

setup: $(STAMP) $(TSC)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,lab]'
	touch $(STAMP)

$(TSC): clients/typescript/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix clients/typescript --no-audit --no-fund --silent && touch $(TSC); \
	else echo "npm not found: the TypeScript compile check of clients/ cannot run"; fi

contract: setup
	$(BIN)/rewards-lab contract export --out clients

lab: setup demo

demo: setup
	$(BIN)/rewards-lab demo --db data/demo.duckdb

lint: setup
	$(BIN)/ruff check rewards_lab tests benchmarks
	$(BIN)/ruff format --check rewards_lab tests benchmarks

typecheck: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest

test: lint typecheck pytest

bench: setup
	$(BIN)/python benchmarks/ledger_batch.py
	$(BIN)/python benchmarks/service_calls.py

bench-replay: setup
	$(BIN)/python benchmarks/replay.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache clients/typescript/node_modules
