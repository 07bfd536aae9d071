# Two commands: `make run` serves the app on the embedded stack, `make test` runs the suite.
# `make test-fast` is the edit loop; `make screenshots` rewrites docs/screenshots.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# Django 6 needs Python 3.12; find a working one (a pyenv shim may exist but not run).
PYTHON312 := $(shell for p in python3.12 $$HOME/.pyenv/versions/3.12*/bin/python3.12 /usr/local/bin/python3.12 /usr/bin/python3.12; do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1 && { echo $$p; break; }; done)

.PHONY: run test test-fast screenshots system-deps lint format typecheck local-llm

$(BIN)/.installed: pyproject.toml
	@test -n "$(PYTHON312)" || { echo "Python 3.12 not found: install python3.12 (e.g. apt-get install python3.12 python3.12-venv)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON312) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

run: $(BIN)/.installed
	$(BIN)/python -m openfable.runner

# OPENFABLE_LLM=local (docs/configuration.md): Gemma 3 270M served by llama-cpp-python, which pip
# builds from source (one job at a time: a shared 2-core machine). Once installed, `make test` runs
# the tests marked real_llm against it.
local-llm: $(BIN)/.installed
	CMAKE_BUILD_PARALLEL_LEVEL=$${CMAKE_BUILD_PARALLEL_LEVEL:-1} CMAKE_ARGS="$${CMAKE_ARGS:--DGGML_NATIVE=OFF}" \
		$(BIN)/pip install --quiet -e '.[dev,local-llm]'

system-deps:
	@scripts/system-deps.sh

# Tests run in WORKERS processes (pytest-xdist), each on a test database of its own (NAME_gw0, ...);
# WORKERS=0 runs them in this one process. Tests of one xdist_group run in the same worker (the
# real_llm tests: one local model server, not one per worker).
WORKERS ?= 2
FAULT_WORKERS ?= $(if $(filter 0,$(WORKERS)),0,2)
PYTEST := $(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup

# The fault tests start whole stacks (workers, brokers, a database of their own they stop) that
# beat into and watch the test database. They run in a pytest of their own, on a test database
# and a session broker of their own (NAME_faults_gw0, ...), beside the rest: they mostly wait on
# the processes they start (the 2-minute broker load test alone holds one worker for most of
# their time), so the machine has room for them. Their report is printed after the rest's.
# Exit status 5 is "no test selected" (a PYTEST_ARGS naming other tests).
FAULTS_DATABASE := $(or $(OPENFABLE_TEST_DATABASE_NAME),test_openfable)_faults
# Started in the background, a command ignores Ctrl-C (SIGINT) in a non-interactive shell: the
# fault run takes it back, so that Ctrl-C stops both runs and their teardown stops what they started.
FAULTS_PYTEST := $(BIN)/python -c 'import signal, sys, pytest; signal.signal(signal.SIGINT, signal.default_int_handler); sys.exit(pytest.main(sys.argv[1:]))'
test: $(BIN)/.installed system-deps
	@faults_log=$$(mktemp); \
	OPENFABLE_TEST_DATABASE_NAME=$(FAULTS_DATABASE) $(FAULTS_PYTEST) -n $(FAULT_WORKERS) --dist loadgroup \
		-m faults $(PYTEST_ARGS) >$$faults_log 2>&1 & faults=$$!; \
	$(BIN)/python -m pytest -n $(WORKERS) --dist loadgroup -m "not faults" $(PYTEST_ARGS); rest=$$?; \
	wait $$faults; faults_status=$$?; \
	echo "--- the fault tests (run beside the rest) ---"; cat $$faults_log; rm -f $$faults_log; \
	for status in $$rest $$faults_status; do [ $$status -eq 0 ] || [ $$status -eq 5 ] || exit $$status; done

# The edit loop: everything but the browser, fault and slow tests (real model loads, workers).
test-fast: $(BIN)/.installed
	$(PYTEST) -m "not slow and not browser and not faults" $(PYTEST_ARGS)

# The browser tests, writing their screenshots to docs/screenshots (elsewhere they go to
# var/test-screenshots, which git ignores).
screenshots: $(BIN)/.installed system-deps
	SCREENSHOTS_DIR=docs/screenshots $(PYTEST) -m browser tests/browser $(PYTEST_ARGS)

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	@# The query path, ingestion and the benchmarks stay in small stages: no function in retrieval/,
	@# documents/ingestion/ or fable_benchmarks/ at radon complexity C (11) or worse. The exceptions
	@# list, scripts/complexity_allowed.txt, is empty now, and nothing may join it.
	$(BIN)/python scripts/complexity_ratchet.py retrieval documents/ingestion fable_benchmarks

format: $(BIN)/.installed
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

typecheck: $(BIN)/.installed
	$(BIN)/mypy .
