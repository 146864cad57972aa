# The two commands a newcomer runs:  `make repro` (install + reproduce the headline numbers)  and  `make test`.
VENV := .venv/bin
export PATH := $(CURDIR)/.venv/bin:$(PATH)
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: setup repro test lint params bench mlflow-ui

setup:
	./scripts/setup.sh

repro: setup
	$(VENV)/dvc repro
	$(VENV)/dvc metrics show

test: setup
	$(VENV)/ruff check src tests benchmarks
	$(VENV)/mypy
	$(VENV)/python -m pytest -q

lint: setup
	$(VENV)/ruff check src tests benchmarks
	$(VENV)/ruff format --check src tests benchmarks
	$(VENV)/mypy

params: setup
	$(VENV)/doceval params

bench: setup
	$(VENV)/python benchmarks/run_all.py

mlflow-ui: setup
	$(VENV)/mlflow ui --backend-store-uri sqlite:///$(CURDIR)/mlruns/mlflow.db --port 5000
