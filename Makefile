# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both create the virtual environment (.venv) on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo needs only the runtime itself (its base dependencies cover the reflection team's code
# executor): its own stamp installs the package without the dev tool chain that `make test` adds.
DEMO_STAMP := $(VENV)/.installed-demo

$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/aun-runtime demo

test: $(STAMP)
	sh scripts/install-test-deps.sh
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

# The documentation site, into site/: warnings are errors, and nothing is fetched from the network.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

bench: $(STAMP)
	$(BIN)/python bench/runtime_throughput.py
	$(BIN)/python bench/idle_agents.py
	$(BIN)/python bench/flood_memory.py
	$(BIN)/python bench/gateway_relay.py
	$(BIN)/python bench/grpc_workers.py
	$(BIN)/python bench/grpc_scale.py
	$(BIN)/python bench/bridge_roundtrip.py
	$(BIN)/python bench/frame_read.py
	$(BIN)/python bench/exposed_aids.py
	$(BIN)/python bench/model_cost.py
	$(BIN)/python bench/postgres_driver.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
