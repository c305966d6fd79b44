# make test: set up .venv (torch first, then the project with every extra) and run all checks.
# make demo: set up, then run the main job (the probe on 4 ranks as 2 nodes).
PYTHON ?= python3
VENV ?= .venv
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.stamp-install
# vLLM for the integration tests: --no-deps, so pip never resolves vLLM's pins (they would
# replace the CPU torch); only the imports the tested code paths need, pinned.
VLLM_REQS := requirements/vllm-test.txt
VLLM_STAMP := $(VENV)/.stamp-vllm
PIP := $(BIN)/python -m pip install --quiet --disable-pip-version-check
SRC := obs comm
LINTED := obs comm tests benchmarks examples tools

.PHONY: setup lint typecheck pytest test demo bench quickstart docs clean

$(STAMP): pyproject.toml Makefile
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "setup: installing $(TORCH_SPEC) first (a CPU wheel here), then obs-comm[torch,flashinfer,dev]"
	@$(PIP) "$(TORCH_SPEC)" 2>&1 | grep -v "is ignored: it is neither" || true
	@$(BIN)/python -c "import torch" || { echo "setup: torch failed to install"; exit 1; }
	@$(PIP) -e ".[torch,flashinfer,dev]" 2>&1 | grep -v "is ignored: it is neither" || true
	@$(BIN)/python -c "import obs, comm, structlog, orjson, grpc, pytest, xdist, flashinfer" \
		|| { echo "setup: the project failed to install"; exit 1; }
	@touch $@

$(VLLM_STAMP): $(STAMP) $(VLLM_REQS)
	@echo "setup: installing vLLM's test dependencies with --no-deps ($(VLLM_REQS))"
	@$(PIP) --no-deps -r $(VLLM_REQS) 2>&1 | grep -v "is ignored: it is neither" || true
	@$(BIN)/python -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$(TORCH_SPEC)'.split('==')[-1] else 1)" \
		|| { echo "setup: torch changed while installing vLLM's test dependencies"; exit 1; }
	@$(BIN)/python -c "import vllm.logger, vllm.plugins, vllm.config.logging, vllm.distributed.device_communicators.flashinfer_all_reduce" \
		|| { echo "setup: vLLM's test dependencies failed to install"; exit 1; }
	@touch $@

# Grafana's LogQL grammar for tests/test_ops_kit_loki.py (every query of the ops kit must
# parse). Needs node/npm; without them that test is skipped, with them make requires it.
LOGQL_SPEC := @grafana/lezer-logql@0.3.0
LOGQL_STAMP := $(VENV)/.stamp-logql
$(LOGQL_STAMP): $(STAMP)
	@if command -v npm >/dev/null 2>&1; then \
		echo "setup: installing $(LOGQL_SPEC) under $(VENV)/node (Grafana's LogQL grammar)"; \
		npm install --silent --no-audit --no-fund --prefix $(VENV)/node $(LOGQL_SPEC) \
			|| { echo "setup: $(LOGQL_SPEC) failed to install"; exit 1; }; \
	else echo "setup: no npm: the LogQL grammar check will be skipped"; fi
	@touch $@

setup: $(STAMP) $(VLLM_STAMP) $(LOGQL_STAMP)

lint: setup
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)

typecheck: setup
	$(BIN)/mypy

# Branch coverage of obs and comm, subprocesses included, enforced (fail_under in pyproject).
# Two pytest-xdist workers (each measured like any child), a test file per worker at a time:
# a module's fixtures run once and its tests run in their order (PYTEST_WORKERS=0: in-process).
PYTEST_WORKERS ?= 2
pytest: setup
	@rm -f .coverage .coverage.*
	COVERAGE_PROCESS_START=$(CURDIR)/pyproject.toml OBS_REQUIRE_VLLM=1 \
		OBS_REQUIRE_LOGQL=$$(command -v npm >/dev/null 2>&1 && echo 1) \
		$(BIN)/python -m coverage run -m pytest -n $(PYTEST_WORKERS) --dist loadfile
	@$(BIN)/python -m coverage combine -q
	@rm -f .coverage.*  # left by a child killed while saving its data (combine skipped it)
	$(BIN)/python -m coverage report

test: lint typecheck pytest

demo: setup
	@rc=0; $(BIN)/python -m comm probe --world-size 4 --nodes 2 || rc=$$?; \
	if [ $$rc -eq 3 ]; then echo "demo: exit 3 = terminal failure reported on every rank (expected without a GPU)"; \
	elif [ $$rc -ne 0 ]; then exit $$rc; fi

quickstart: setup
	$(BIN)/python examples/quickstart.py

docs: setup
	$(BIN)/python -m tools.gendocs

bench: setup
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
