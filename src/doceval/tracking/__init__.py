"""MLflow tracking: the only package in doceval that imports mlflow (lazily, so other commands start fast).

Store layout (default): ``<root>/mlruns/mlflow.db`` (sqlite, addressed by an ABSOLUTE URI so that `dvc exp`
temp workspaces log to the same store) with artifacts under ``<root>/mlruns/artifacts/<experiment>/``.
Calibration and test runs go to separate experiments; a sweep is a parent run with one child per point.

Concurrency: creating a sqlite store from several processes at once crashes MLflow's migrations, so
``ensure_store`` creates it (and the experiments) once under a file lock next to the db; ``log_run`` also
holds that lock while it writes to a sqlite store, so parallel sweep jobs never race on it.

Secrets: config keys containing ``api_key`` are never logged (except the ``*_env`` keys that only name a
variable), and any value equal to (or containing) the content of a variable named by a ``*_env`` key is
dropped from params/tags and redacted from the logged artifacts.
"""

from __future__ import annotations

from doceval.tracking.configured import check_configured, log_configured_judge_validation, log_configured_run
from doceval.tracking.locking import _ENSURED
from doceval.tracking.runs import load_summary_from_run, log_parent_artifacts, log_run, start_parent
from doceval.tracking.secrets import DEFAULT_SECRET_ENV, REDACTED, scrub, secret_values
from doceval.tracking.shaping import (
    ENTRY_COLUMNS,
    MAX_KEY_LEN,
    MAX_PARAM_LEN,
    MAX_TAG_LEN,
    build_metrics,
    build_params,
    build_tags,
    entries_csv,
    sanitize_key,
)
from doceval.tracking.store import ensure_store
from doceval.tracking.uris import (
    ALL_EXPERIMENT,
    ARTIFACTS_DIR,
    DB_NAME,
    EXPERIMENTS,
    STORE_DIR,
    artifact_root,
    check_reachable,
    default_uri,
    experiment_name,
    local_store,
    store_root,
    tracking_uri,
)

__all__ = [
    "check_configured",
    "log_configured_run",
    "log_configured_judge_validation",
    "ALL_EXPERIMENT",
    "ARTIFACTS_DIR",
    "DB_NAME",
    "DEFAULT_SECRET_ENV",
    "ENTRY_COLUMNS",
    "EXPERIMENTS",
    "MAX_KEY_LEN",
    "MAX_PARAM_LEN",
    "MAX_TAG_LEN",
    "REDACTED",
    "STORE_DIR",
    "_ENSURED",
    "artifact_root",
    "build_metrics",
    "build_params",
    "build_tags",
    "check_reachable",
    "default_uri",
    "ensure_store",
    "entries_csv",
    "experiment_name",
    "local_store",
    "load_summary_from_run",
    "log_parent_artifacts",
    "log_run",
    "sanitize_key",
    "scrub",
    "secret_values",
    "start_parent",
    "store_root",
    "tracking_uri",
]
