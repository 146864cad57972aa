"""DVC stage `evaluate`: the held-out split with the calibrated floors -> eval/summary.json + eval/metrics.json."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval.common.io import check_writable, write_json_atomic
from doceval.harness.evaluate import EvalOptions, evaluate
from doceval.scoring.registry import METRIC_NAMES


def headline_metrics(summary: Mapping[str, Any]) -> dict[str, Any]:
    """The DVC metrics file: headline values and counts, flat enough for `dvc metrics diff`."""
    m = summary["metrics"]
    return {
        **{k: m[k] for k in METRIC_NAMES},
        **m["counts"],
        "split": summary["config"]["split"],
        "k": summary["config"]["k"],
    }


def run(params: Mapping[str, Any], progress: bool = True) -> dict[str, Any]:
    from doceval import tracking

    out = Path(params["paths"]["eval"])
    # Outputs and the tracking store are checked before any work: a run must not be lost at the end.
    fix = f"make {out} writable, or set paths.eval to a writable folder (conf/, then `doceval params`)"
    for name in ("summary.json", "metrics.json"):
        check_writable(out / name, str(out / name), fix)
    tracking.check_configured(params)
    summary = evaluate(params, EvalOptions(progress=progress))
    write_json_atomic(out / "summary.json", summary)
    write_json_atomic(out / "metrics.json", headline_metrics(summary))
    return summary


def track(params: Mapping[str, Any], summary: Mapping[str, Any]) -> str | None:
    from doceval import tracking

    return tracking.log_configured_run(params, summary, {}, run_name="evaluate", tags={"stage": "evaluate"})
