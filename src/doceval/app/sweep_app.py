"""The Hydra application one sweep point runs in (`doceval sweep` launches it with `-m`).

Each job evaluates from the cached candidates only: it never opens the Qdrant store, so parallel joblib workers
do not fight over the embedded store's lock. A job that fails writes ``points/<job>.failed`` (its overrides and
the error) for `doceval sweep` to report, then fails as before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from doceval.common.hints import rerun
from doceval.common.io import write_json_atomic
from doceval.common.naming import is_function_retriever, is_own_agent
from doceval.common.redact import register_config, register_overrides, scrub_stdio
from doceval.config.compose import validate_config
from doceval.config.schema import Config
from doceval.errors import UsageError
from doceval.harness.candidate_cache import load_candidates
from doceval.harness.candidate_set import META
from doceval.harness.evaluate import EvalOptions, evaluate
from doceval.scoring.registry import names
from doceval.summary import Summary

ENV_PARENT = "DOCEVAL_SWEEP_PARENT"
ENV_DIR = "DOCEVAL_SWEEP_DIR"
ENV_ROOT = "DOCEVAL_PROJECT_ROOT"
# Every point's overrides as `doceval sweep` names them (JSON, by job): secret values as <redacted#n>.
ENV_SHOWN = "DOCEVAL_SWEEP_SHOWN"
ENV_SHARED = "DOCEVAL_SWEEP_SHARED"  # how many of a point's overrides are the project's, not the point's own
FAILED_SUFFIX = ".failed"  # points/<job>.failed: JSON {job, overrides, error, usage_error}


def run_point(
    cfg: Config, job_id: str, overrides: list[str], root: Path, out_dir: Path, tracked: tuple[str, str] | None
) -> dict[str, Any]:
    """Evaluate one point from the cached candidates, write its summary.json in ``out_dir`` and, when
    ``tracked`` (parent run id, tracking URI) is given, log it as a child run of that parent."""
    summary, point = evaluate_point(cfg, job_id, overrides, root, out_dir)
    if tracked is not None and cfg.tracking.enabled:
        point["run_id"] = log_point(summary, job_id, overrides, root, tracked)
    return point


def evaluate_point(
    cfg: Config, job_id: str, overrides: list[str], root: Path, out_dir: Path
) -> tuple[Summary, dict[str, Any]]:
    """One point's summary (written to ``out_dir/summary.json``) and its row of the points table."""
    runs = root / cfg.paths.runs
    cands = None
    # A user's retriever, or a user's assistant (it brings its own retrieval), runs live at every point.
    if not is_function_retriever(cfg.retriever.name) and is_own_agent(cfg.agent.name):
        if not (runs / "candidates" / META).is_file():
            raise UsageError(
                f"sweep: no cached candidates; run {rerun('retrieve')} (sweeps never open the index)"
            )
        cands = load_candidates(runs)
    summary = evaluate(cfg, EvalOptions(candidates=cands, progress=False, run_dir=out_dir / "agent"))
    write_json_atomic(out_dir / "summary.json", summary.to_dict())
    metrics = summary.metrics
    point = {
        "job": job_id,
        "overrides": overrides,
        "metrics": {k: v for k, v in metrics.recorded.items() if not isinstance(v, dict)},
        # each metric's 95% interval and n, for the sweep table, points.csv and the plot
        "ci95": dict(metrics.breakdown("ci95")),
        "counts": dict(metrics.counts),
    }
    point["by_library"] = dict(metrics.breakdown("by_library"))
    return summary, point


def log_point(
    summary: Summary, job_id: str, overrides: list[str], root: Path, tracked: tuple[str, str]
) -> str:
    """The point's child run under the sweep's parent (``tracked``: parent run id, tracking URI): its id."""
    # lazy: start-up (mlflow, ~2 s): an untracked point never loads it
    from doceval import tracking

    parent, uri = tracked
    run_id: str = tracking.log_run(
        summary,
        uri=uri,
        root=root,
        run_name=" ".join(overrides) or f"point-{job_id}",
        parent_run_id=parent,
        extra_tags={"sweep_overrides": " ".join(overrides)},
        golden_path=summary.settings.golden.file,
    )
    return run_id


def _tracked(cfg: Config, root: Path) -> tuple[str, str] | None:
    """(parent run id, tracking URI) when `doceval sweep` opened a parent run for this multirun."""
    parent = os.environ.get(ENV_PARENT)
    if not parent or not cfg.tracking.enabled:
        return None
    # lazy: start-up (mlflow, ~2 s): an untracked point never loads it
    from doceval import tracking

    return parent, tracking.tracking_uri(cfg.tracking.uri, root)


def _shown(overrides: list[str], job_id: str) -> list[str]:
    """The point's overrides with each one holding a secret replaced by the sweep's label for it
    (``key=<redacted#n>``, doceval.app.sweep.shown_points), so its run, row and point file tell it apart."""
    try:
        labels = json.loads(os.environ.get(ENV_SHOWN) or "[]")[int(job_id)]
    except (ValueError, IndexError, TypeError):
        return overrides
    by_key = {str(o).partition("=")[0].lstrip("+~"): str(o) for o in labels if "=<redacted#" in str(o)}
    return [by_key.get(o.partition("=")[0].lstrip("+~"), o) for o in overrides]


@hydra.main(config_path=None, config_name="config", version_base="1.3")
def main(dcfg: DictConfig) -> None:
    root = Path(os.environ.get(ENV_ROOT, os.getcwd()))
    os.chdir(root)  # paths in the config are relative to the project root
    composed = OmegaConf.to_container(dcfg, resolve=True)
    assert isinstance(composed, dict)
    data = {str(k): v for k, v in composed.items()}  # the composed mapping, typed just below
    hc = HydraConfig.get()
    job_id = str(hc.job.num)
    register_overrides(list(hc.overrides.task))  # a point is a process of its own: its writers scrub them all
    scrub_stdio()  # and what it prints: the user's code it runs may print a secret (its log is shown on failure)
    # The project's doceval.yaml overrides (and $DOCEVAL_ENGINE's) came first and are the same at every point:
    # the point's own, after them, are what name its run (Hydra rewrites an override's text, so by position).
    overrides = _shown(list(hc.overrides.task)[int(os.environ.get(ENV_SHARED, "0")) :], job_id)
    register_config(data)
    sweep_dir = Path(os.environ.get(ENV_DIR, hc.sweep.dir))
    out_dir = sweep_dir / "points" / job_id
    try:
        # `doceval sweep` checked every point before launching it: this builds the typed config (and checks again)
        cfg = validate_config(data)
        point = run_point(cfg, job_id, overrides, root, out_dir, _tracked(cfg, root))
    except Exception as exc:
        error = str(exc) if isinstance(exc, UsageError) else f"{type(exc).__name__}: {exc}"
        error += "".join(f" ({note})" for note in getattr(exc, "__notes__", []))  # e.g. which question raised
        failed = {
            "job": job_id,
            "overrides": overrides,
            "error": error,
            "usage_error": isinstance(exc, UsageError),
        }
        write_json_atomic(sweep_dir / "points" / f"{job_id}{FAILED_SUFFIX}", failed)
        raise
    write_json_atomic(sweep_dir / "points" / f"{job_id}.json", point)
    print(
        json.dumps(
            {"job": job_id, "overrides": overrides, **{m: point["metrics"].get(m) for m in names("short")}}
        )
    )


if __name__ == "__main__":
    main()
