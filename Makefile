# The two commands a newcomer runs:  `make repro` (install + reproduce the headline numbers)  and  `make test`.
VENV := .venv/bin
export PATH := $(CURDIR)/.venv/bin:$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: help setup repro test test-full lint format params bench mlflow-ui

help:  ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup:  ## create .venv with the pinned dependencies (idempotent)
	./scripts/setup.sh

repro: setup  ## reproduce the headline numbers (dvc repro) and show them
	$(VENV)/dvc repro
	$(VENV)/doceval show  # the headline table of eval/summary.json and the conversations line

test: setup  ## ruff, mypy and the unit tests (no tests marked slow): the unit-test loop
	$(VENV)/ruff check src tests benchmarks
	$(VENV)/mypy
	$(VENV)/python -m pytest -q -n auto -m "not slow"  # every core: pytest-xdist

test-full: setup  ## everything CI runs (.ci/run): lint, format check, mypy and the whole test suite
	$(VENV)/ruff check src tests benchmarks
	$(VENV)/ruff format --check src tests benchmarks
	$(VENV)/mypy
	$(VENV)/python -m pytest -q

lint: setup  ## ruff (check + format check) and mypy
	$(VENV)/ruff check src tests benchmarks
	$(VENV)/ruff format --check src tests benchmarks
	$(VENV)/mypy

format: setup  ## apply ruff's fixes and formatting
	$(VENV)/ruff check --fix src tests benchmarks
	$(VENV)/ruff format src tests benchmarks

params: setup  ## recompose params.yaml from conf/
	$(VENV)/doceval params

bench: setup  ## run benchmarks/ and write the figures into docs/benchmarks.md (add ARGS=--scifact PATH)
	$(VENV)/python benchmarks/run_all.py $(ARGS)

mlflow-ui: setup  ## the MLflow UI on http://127.0.0.1:5000 over ./mlruns
	$(VENV)/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlruns/mlflow.db --port 5000
