"""Reading run summaries, comparing two runs side by side, the CI gate, report.md and the comparison plot.

A run summary is what ``doceval eval --output PATH`` writes: ``{"metrics": {...}, "config": {...},
"entries": [...]}`` (docs/design.md sections 4 and 8). Every summary metric is the mean of the non-null per-entry
values of the same name, so two runs are compared entry by entry, paired by entry id.

Nothing here imports mlflow: an MLflow run id is resolved through an optional ``mlflow_loader`` callable that
the caller (the CLI, via :mod:`doceval.tracking`) provides.
"""

from __future__ import annotations

from doceval.results.comparison import (
    CompareResult,
    MetricChange,
    Unanswerable,
    compare,
    format_compare,
)
from doceval.results.gating import GateFailure, GateResult, check_gate_config, gate, load_gate_config
from doceval.results.markdown import render_report
from doceval.results.plots import plot_compare
from doceval.results.summaries import MlflowLoader, Summary, check_summary, load_summary
from doceval.scoring.registry import LOWER_IS_BETTER, METRIC_NAMES

__all__ = [
    "CompareResult",
    "GateFailure",
    "GateResult",
    "LOWER_IS_BETTER",
    "METRIC_NAMES",
    "MetricChange",
    "MlflowLoader",
    "Summary",
    "Unanswerable",
    "check_gate_config",
    "check_summary",
    "compare",
    "format_compare",
    "gate",
    "load_gate_config",
    "load_summary",
    "plot_compare",
    "render_report",
]
