"""The Python API: what the CLI does, callable from a notebook or a pytest test (the same code, no subprocess).

from doceval.api import compose, evaluate, compare, gate, load_summary

cfg = compose(["retriever=bm25", "k=10"])        # conf/ + Hydra overrides, validated
summary = evaluate(cfg)                          # {"metrics", "config", "entries"}
gate(summary, cfg["gate"]).passed
"""

from __future__ import annotations

from doceval.config.compose import compose, load_params
from doceval.harness.evaluate import EvalOptions, evaluate
from doceval.results import compare, gate, load_summary

__all__ = ["EvalOptions", "compare", "compose", "evaluate", "gate", "load_params", "load_summary"]
