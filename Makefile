# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Both create the virtual environment (.venv) on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-quick lint docs bench gate gate-update clean

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

# The suite runs in TEST_WORKERS processes, a test file at a time to each (--dist loadfile: a file's
# tests share their fixtures and never run side by side), in the order tests/conftest.py gives, the
# long files first (--no-loadscope-reorder: else xdist puts the files with the most tests first).
# Four on two cores: many tests wait on processes, sockets and timers rather than compute, and a
# worker that waits lends its core to another (measured on a shared two-core machine: 9 to 13 min
# with four workers, 15 min with two, under the same outside load). TEST_WORKERS=logical runs one
# per CPU; TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 4
PYTEST_WORKERS = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The suite includes the instruction gate (tests/test_instruction_gate.py): a delivery on an in-process
# core may not cost 3 % more instructions than bench/instructions_baseline.json. It is a test file,
# not a step of its own, so that it runs on one worker while the others go on (about a minute of two
# valgrind processes, started among the first slow files), adding nothing to the suite's wall time.
test: $(STAMP)
	sh scripts/install-test-deps.sh
	$(BIN)/python -m pytest $(PYTEST_WORKERS)

# The instruction gate alone, and the rewrite of its baseline for a change that must cost more (commit
# the new baseline with the change, and say why in its message).
gate: $(STAMP)
	$(BIN)/python bench/instruction_gate.py

gate-update: $(STAMP)
	$(BIN)/python bench/instruction_gate.py --update

# Everything but the files that take seconds (marked slow in tests/conftest.py): about a minute.
test-quick: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_WORKERS) -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy

# The documentation site, into site/: warnings are errors, and nothing is fetched from the network.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict
	@echo "The site is in site/: open site/index.html in a browser (every page works from the file system;"
	@echo "search needs it served), or serve it with: $(BIN)/python -m http.server --directory site 8000"

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
	$(BIN)/python bench/model_storm.py
	$(BIN)/python bench/postgres_driver.py
	$(BIN)/python bench/service_postgres.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
