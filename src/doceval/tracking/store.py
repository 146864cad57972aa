"""The MLflow store: client construction, experiments created once under the lock."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.errors import UsageError
from doceval.tracking.locking import _ENSURED, _store_lock
from doceval.tracking.uris import (
    ARTIFACTS_DIR,
    EXPERIMENTS,
    _display,
    _is_http,
    _sqlite_db,
    artifact_root,
    check_reachable,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


def _client(uri: str) -> MlflowClient:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no tqdm bars in CLI output
    if _is_http(uri):
        # MLflow's defaults retry for minutes against a dead server; keep failures prompt unless overridden.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _experiment_id(client: MlflowClient, name: str, uri: str) -> str:
    """Get or create an experiment; race-safe (a concurrent creator wins, we re-read)."""
    from mlflow.exceptions import MlflowException

    exp = client.get_experiment_by_name(name)
    if exp is not None:
        if exp.lifecycle_stage == "deleted":
            client.restore_experiment(exp.experiment_id)
        return str(exp.experiment_id)
    root = artifact_root(uri)
    location = None if root is None else f"{root}/{name}"
    try:
        return str(client.create_experiment(name, artifact_location=location))
    except MlflowException:
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return str(exp.experiment_id)


def ensure_store(uri: str, root: Path | None = None) -> None:
    """Create the store (sqlite db + migrations) and the calibration/test experiments once; idempotent and
    safe to call from several processes at once. Call it before starting parallel writers."""
    key = (os.getpid(), uri)
    if key in _ENSURED:
        return
    check_reachable(uri)
    from mlflow.exceptions import MlflowException

    db = _sqlite_db(uri)
    try:
        if db is not None:
            (db.parent / ARTIFACTS_DIR).mkdir(parents=True, exist_ok=True)
        with _store_lock(uri):
            client = _client(uri)
            for split in EXPERIMENTS:
                _experiment_id(client, EXPERIMENTS[split], uri)
    except (MlflowException, OSError) as exc:
        message = exc.message if isinstance(exc, MlflowException) else str(exc)
        raise UsageError(
            f"MLflow tracking store {_display(uri)} cannot be opened: {message} "
            "(set tracking.uri / MLFLOW_TRACKING_URI to a sqlite:////abs/path.db or http(s) server)"
        ) from None
    _ENSURED.add(key)
