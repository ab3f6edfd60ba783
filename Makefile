# Two commands do all the set-up on a fresh machine (Python 3.11, package registries only):
#   make lab    sets up .venv and runs the main job
#   make test   sets up .venv and runs the whole test suite (lint, types, tests)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup lab demo test lint typecheck pytest bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,lab]'
	touch $(STAMP)

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

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
