"""The MLflow store: client construction, experiments created once under the lock, artifact locations that
follow the store (a copied or moved project re-rooted) and can be written.

A sqlite store keeps each experiment's artifact location as an absolute URI (``<db dir>/artifacts/<name>``).
Copy or move a project with its ``mlruns/`` and the copy's store still points at the ORIGINAL folder: its runs
would write their artifacts into the other project. ``ensure_store`` re-roots such experiments onto the
store's own ``artifacts/`` folder before anything is logged. The comparison is with the store's directory,
not the working directory, so a `dvc exp run` temp workspace (``$DVC_ROOT``: the parent project's store) keeps
logging to the project it came from.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import sqlite3
import sys
import tempfile
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.common.redact import redact_text, redact_url, secret_values
from doceval.errors import UsageError
from doceval.tracking.locking import _ENSURED, _store_lock
from doceval.tracking.uris import (
    ARTIFACTS_DIR,
    DATABASE_SCHEMES,
    EXPERIMENTS,
    _is_http,
    _sqlite_db,
    artifact_root,
    check_reachable,
)

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient


def import_mlflow(uri: str) -> None:
    """Import mlflow (and for a database store its SQLAlchemy store) with the cyclic garbage collector paused,
    then freeze what is alive, once per process.

    Those imports create ~1M long-lived objects, and every full collection while they load walks all of them
    again; the collections at interpreter exit walk them once more. That is ~1-1.5 s of the ~5 s MLflow adds
    to a 10-entry ``doceval eval`` (issue 26). Frozen objects are still freed by reference counting; they are
    only left out of cycle collection, and the module graph lives until exit anyway.
    """
    wanted = ["mlflow"]
    if urllib.parse.urlsplit(uri).scheme.lower().partition("+")[0] in DATABASE_SCHEMES:
        wanted.append("mlflow.store.tracking.sqlalchemy_store")  # MlflowClient would import it for this store
    if all(name in sys.modules for name in wanted):
        return
    first = "mlflow" not in sys.modules
    enabled = gc.isenabled()
    gc.disable()
    try:
        for name in wanted:
            importlib.import_module(name)
    finally:
        if enabled:
            gc.enable()
    if first:
        gc.freeze()


def _client(uri: str) -> MlflowClient:
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no tqdm bars in CLI output
    if _is_http(uri):
        # MLflow's defaults retry for minutes against a dead server; keep failures prompt unless overridden.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "2")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
    import_mlflow(uri)
    # lazy: start-up (mlflow, seconds; imported once import_mlflow has checked the URI)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)


def _experiment_id(client: MlflowClient, name: str, uri: str) -> str:
    """Get or create an experiment; race-safe (a concurrent creator wins, we re-read)."""
    # lazy: start-up (mlflow, seconds; only tracking loads it)
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


def _local_dir(location: str) -> Path | None:
    """The folder of a local artifact location (``file:`` URI or absolute path); None for a remote one."""
    parts = urllib.parse.urlsplit(location)
    if parts.scheme == "file" and parts.netloc in ("", "localhost"):
        return Path(urllib.request.url2pathname(parts.path))
    if not parts.scheme and location.startswith("/"):
        return Path(location)
    return None


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except OSError:
        return False


def _reroot(db: Path) -> list[str]:
    """Point the experiments of a copied (or moved) sqlite store at the store's own ``artifacts/`` folder.

    An experiment doceval created keeps its artifacts in ``<some db dir>/artifacts/<its name>``; one whose
    ``<some db dir>`` is not this store's directory came with a copy of the store. Experiment artifact
    locations are immutable in MLflow's API, so the row is rewritten in the store itself (under the store
    lock). Runs logged before the copy are re-pointed too when their artifacts were copied along (else they
    keep reading the original's). Returns one line per experiment moved."""
    expected = db.parent / ARTIFACTS_DIR
    moved: list[str] = []
    with contextlib.closing(sqlite3.connect(db, timeout=60)) as con, con:
        rows = con.execute("SELECT experiment_id, name, artifact_location FROM experiments").fetchall()
        for exp_id, name, location in rows:
            here = _local_dir(str(location or ""))
            if here is None or here.name != name or here.parent.name != ARTIFACTS_DIR:
                continue  # not laid out by doceval: left as it is
            if _same_dir(here.parent, expected):
                continue
            new = (expected / str(name)).as_uri()
            con.execute("UPDATE experiments SET artifact_location = ? WHERE experiment_id = ?", (new, exp_id))
            runs = con.execute(
                "SELECT run_uuid, artifact_uri FROM runs WHERE experiment_id = ?", (exp_id,)
            ).fetchall()
            n_runs = 0
            for run_uuid, artifact_uri in runs:
                old_dir = _local_dir(str(artifact_uri or ""))
                if old_dir is None or here not in old_dir.parents:
                    continue
                copied = expected / str(name) / old_dir.relative_to(here)
                if copied.is_dir():
                    con.execute(
                        "UPDATE runs SET artifact_uri = ? WHERE run_uuid = ?", (copied.as_uri(), run_uuid)
                    )
                    n_runs += 1
            moved.append(
                f"{name}: {here} -> {expected / str(name)} ({n_runs} of {len(runs)} earlier runs along)"
            )
    return moved


def check_artifact_location(client: MlflowClient, experiment_id: str) -> None:
    """Exit 2 (UsageError) when the experiment's artifact location is a local folder that cannot be written:
    found before a run is created, not as a FAILED run. Remote locations are left to MLflow."""
    location = str(client.get_experiment(experiment_id).artifact_location or "")
    folder = _local_dir(location)
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doceval-write-check-"):
            pass
    except OSError as exc:
        raise UsageError(
            f"MLflow artifact location {folder} cannot be written ({exc.strerror or exc}); make it writable, "
            "or set tracking.uri to a store whose folder you can write (or tracking.enabled=false)"
        ) from None


def ensure_store(uri: str, root: Path | None = None) -> None:
    """Create the store (sqlite db + migrations) and the calibration/test experiments once, re-root the
    experiments of a copied sqlite store onto its own ``artifacts/`` folder, and check their artifact folders
    can be written (UsageError, exit 2); idempotent and safe to call from several processes at once. Call it
    before starting parallel writers, and before any work."""
    key = (os.getpid(), uri)
    if key in _ENSURED:
        return
    check_reachable(uri)
    import_mlflow(uri)
    # lazy: start-up (mlflow, seconds; only tracking loads it)
    from mlflow.exceptions import MlflowException

    db = _sqlite_db(uri)
    try:
        if db is not None:
            (db.parent / ARTIFACTS_DIR).mkdir(parents=True, exist_ok=True)
        with _store_lock(uri):
            client = _client(uri)
            ids = [_experiment_id(client, EXPERIMENTS[split], uri) for split in EXPERIMENTS]
            moved = _reroot(db) if db is not None else []
            for experiment_id in ids:
                check_artifact_location(client, experiment_id)
    except (MlflowException, OSError, sqlite3.Error) as exc:
        message = exc.message if isinstance(exc, MlflowException) else str(exc)
        raise UsageError(
            f"MLflow tracking store {redact_url(uri)} cannot be opened: {redact_text(message, secret_values(uri))} "
            "(set tracking.uri / MLFLOW_TRACKING_URI to a sqlite:////abs/path.db or http(s) server)"
        ) from None
    for line in moved:
        print(
            f"mlflow: the store {db} was copied or moved; its artifacts now follow it: {line}",
            file=sys.stderr,
        )
    _ENSURED.add(key)
