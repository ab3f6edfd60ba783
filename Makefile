# Two commands do all the set-up on a fresh machine (Python 3.11, package registries only):
#   make lab    sets up .venv and opens JupyterLab on notebooks/ (the rules lab) with the sample data ready
#   make test   sets up .venv and runs the whole test suite (lint, types, tests, notebooks headless)
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The TypeScript compiler, only to check the generated client types (tests/contract/test_contract_artefacts.py).
TSC := clients/typescript/node_modules/.bin/tsc
# Spectral, only to lint the exported OpenAPI document with the spectral:oas ruleset (tests/contract/test_contract_artefacts.py).
SPECTRAL := tools/spectral/node_modules/.bin/spectral

.PHONY: setup lab lab-services report notebooks demo test lint typecheck pytest bench bench-http bench-tenants bench-replay clean contract

setup: $(STAMP) $(TSC) $(SPECTRAL)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,lab,spark]'
	@command -v java >/dev/null || (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless) \
		|| echo "java not found and apt-get failed: the replay's Spark engine cannot run"
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null || ( \
		mkdir -p /etc/postgresql-common/createcluster.d && \
		echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/rewards-lab.conf && \
		apt-get update -qq && apt-get install -y -qq postgresql) \
		|| echo "postgresql not found and apt-get failed: the PostgreSQL store's tests cannot run (they fail under CI)"
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium) \
		|| echo "chromium not found and apt-get failed: tests/notebooks/test_browser_notebooks.py cannot run"
	touch $(STAMP)

$(TSC): clients/typescript/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix clients/typescript --no-audit --no-fund --silent && touch $(TSC); \
	else echo "npm not found: the TypeScript compile check of clients/ cannot run"; fi

# --ignore-scripts: spectral needs no install script, and one of its dependencies (@scarf/scarf) would phone home.
$(SPECTRAL): tools/spectral/package-lock.json
	@if command -v npm >/dev/null; then \
		npm ci --prefix tools/spectral --ignore-scripts --no-audit --no-fund --silent && touch $(SPECTRAL); \
	else echo "npm not found: the spectral check of the OpenAPI document cannot run"; fi

contract: setup
	$(BIN)/rewards-lab contract export --out clients

LAB_ARGS ?=
# Containers often run as root, which JupyterLab refuses without --allow-root.
ROOT_ARGS := $(if $(filter 0,$(shell id -u)),--allow-root,)
SAMPLE := data/sample_events.parquet

# JupyterLab on notebooks/ (Ctrl-C stops it). Never part of `make test`: CI has no display (the notebooks are
# opened in headless Chromium there: tests/notebooks/test_browser_notebooks.py). The repository's notebooks are trusted
# first, so JupyterLab draws their saved widgets before they run (it draws none in a notebook it does not trust).
lab: setup lab-services $(SAMPLE)
	$(BIN)/jupyter trust notebooks/[0-9]*.ipynb
	$(BIN)/jupyter lab --notebook-dir=notebooks $(ROOT_ARGS) $(LAB_ARGS)

# The sample history the notebooks read (committed; regenerated only when missing).
$(SAMPLE):
	$(BIN)/python data/generate_events.py --events 20000 --customers 2000 --seed 1 --out $(SAMPLE) \
		--types order.completed customer.signed_up review.posted referral.converted booking.completed

# Hook for what the notebooks need beside JupyterLab (the push notebook's local /v1 server on 127.0.0.1).
lab-services: setup

# Every notebook headless with papermill into reports/ (.ipynb and .html with the plots).
report: setup $(SAMPLE)
	$(BIN)/python -m rewards_lab.lab.report

# Re-execute the committed notebooks in place: their stored outputs are what nbval checks in `make test`.
notebooks: setup $(SAMPLE)
	$(BIN)/python -m rewards_lab.lab.report --refresh

# The engine's in-process demo of the standard integration loop.
demo: setup
	$(BIN)/rewards-lab demo --db data/demo.duckdb

lint: setup
	$(BIN)/ruff check rewards_lab tests benchmarks tools
	$(BIN)/ruff format --check rewards_lab tests benchmarks tools
	$(BIN)/lint-imports
	$(BIN)/vulture rewards_lab tools/vulture_whitelist.py --min-confidence 60

typecheck: setup
	$(BIN)/mypy

# Every core, one test file per worker at a time (a file's module fixtures, e.g. its live server, stay together).
pytest: setup
	$(BIN)/pytest -n auto --dist loadfile

test: lint typecheck pytest

bench: setup
	$(BIN)/python benchmarks/ledger_batch.py --floor
	$(BIN)/python benchmarks/service_calls.py
	$(BIN)/python benchmarks/event_worker.py

bench-http: setup bench-tenants
	$(BIN)/python benchmarks/events_http.py --intake-only

# A tenant at every limit beside a normal one on one server (issue 27): about two minutes, niced (shared machines).
bench-tenants: setup
	nice -n 10 $(BIN)/python benchmarks/tenant_isolation.py --seconds 30

bench-replay: setup
	$(BIN)/python benchmarks/replay.py --spark
	$(BIN)/python benchmarks/replay_cli_features.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache clients/typescript/node_modules tools/spectral/node_modules
