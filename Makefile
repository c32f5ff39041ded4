# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both create the virtual environment (.venv) on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/aun-runtime demo

test: $(STAMP)
	sh scripts/install-test-deps.sh
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/runtime_throughput.py
	$(BIN)/python bench/idle_agents.py
	$(BIN)/python bench/flood_memory.py
	$(BIN)/python bench/gateway_relay.py
	$(BIN)/python bench/grpc_workers.py
	$(BIN)/python bench/bridge_roundtrip.py
	$(BIN)/python bench/model_cost.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
