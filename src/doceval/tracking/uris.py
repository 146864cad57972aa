"""Tracking URIs: the default sqlite store under ./mlruns (absolute), normalisation, artifact roots, and the
reachability check made before any work.
"""

from __future__ import annotations

import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.errors import UsageError

if TYPE_CHECKING:
    pass

EXPERIMENTS = {"calibration": "doceval-calibration", "test": "doceval-test"}
ALL_EXPERIMENT = "doceval-all"
STORE_DIR = "mlruns"
DB_NAME = "mlflow.db"
ARTIFACTS_DIR = "artifacts"


def experiment_name(split: str | None) -> str:
    """``calibration`` -> doceval-calibration, ``test`` -> doceval-test, other -> doceval-<split>, None -> all."""
    if split is None or str(split) in ("", "all", "None"):
        return ALL_EXPERIMENT
    return EXPERIMENTS.get(str(split), f"doceval-{split}")


def _sqlite_uri(path: Path) -> str:
    # Same shape as mlflow.utils.uri.path_to_local_sqlite_uri: sqlite:////abs/path (spaces %-quoted).
    return "sqlite:///" + urllib.request.pathname2url(str(path.resolve()))


def default_uri(root: Path) -> str:
    return _sqlite_uri(Path(root) / STORE_DIR / DB_NAME)


def _normalize(uri: str, root: Path) -> str:
    """Make local stores absolute: a relative sqlite path or a bare path is resolved against ``root``."""
    uri = uri.strip()
    if uri.startswith("sqlite:///"):
        raw = uri[len("sqlite:///") :]
        path, _, query = raw.partition("?")
        if path and not path.startswith("/") and path != ":memory:":
            resolved = _sqlite_uri(Path(root) / urllib.parse.unquote(path))
            return resolved + (f"?{query}" if query else "")
        return uri
    if "://" not in uri and ":" not in uri.split("/", 1)[0]:
        # A bare path: a .db file, or a directory that holds mlflow.db (MLflow 3.17 refuses file stores).
        local = Path(uri).expanduser()
        local = local if local.is_absolute() else Path(root) / local
        return _sqlite_uri(local if local.suffix == ".db" else local / DB_NAME)
    return uri


def store_root(root: Path | None = None) -> Path:
    """The folder that holds ``mlruns/``: ``$DVC_ROOT`` when DVC runs us (DVC points it at the parent repo
    even inside a `dvc exp run --temp/--queue` workspace, so every experiment logs to one store), else
    ``root`` (default: the current directory)."""
    dvc_root = os.environ.get("DVC_ROOT", "").strip()
    if dvc_root:
        return Path(dvc_root).resolve()
    return (Path.cwd() if root is None else Path(root)).resolve()


def tracking_uri(cfg_uri: str | None, root: Path | None = None) -> str:
    """Explicit config value > ``MLFLOW_TRACKING_URI`` > ``sqlite:////<root>/mlruns/mlflow.db`` (absolute).

    ``root`` is replaced by ``$DVC_ROOT`` when set (see ``store_root``); relative sqlite paths and bare
    paths in the config/env value are resolved against it too."""
    root = store_root(root)
    if cfg_uri:
        return _normalize(str(cfg_uri), root)
    env = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if env:
        return _normalize(env, root)
    return default_uri(root)


def _sqlite_db(uri: str) -> Path | None:
    if not uri.startswith("sqlite:///"):
        return None
    path = urllib.parse.unquote(uri[len("sqlite:///") :].partition("?")[0])
    if not path or path == ":memory:":
        return None
    return Path(path).resolve()


def _is_http(uri: str) -> bool:
    return urllib.parse.urlsplit(uri).scheme.lower() in ("http", "https")


def artifact_root(uri: str) -> str | None:
    """Where experiments created by doceval keep artifacts: ``<db dir>/artifacts`` for a sqlite store;
    None (the server's or MLflow's default) otherwise."""
    db = _sqlite_db(uri)
    return None if db is None else (db.parent / ARTIFACTS_DIR).as_uri()


def _display(uri: str) -> str:
    """The URI without credentials, for messages."""
    parts = urllib.parse.urlsplit(uri)
    if parts.username or parts.password:
        host = parts.hostname or ""
        netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return uri


def check_reachable(uri: str, timeout_s: float = 5) -> None:
    """Raise UsageError within about ``timeout_s`` when an http(s) tracking server does not answer.

    Any HTTP answer (even 401/404) counts as reachable; only local stores and http(s) are probed."""
    if not _is_http(uri):
        return
    parts = urllib.parse.urlsplit(uri)
    netloc = parts.netloc.rpartition("@")[2]  # credentials are not needed: any HTTP answer will do
    url = (
        urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="", fragment="")).rstrip("/") + "/health"
    )
    outcome: dict[str, str | None] = {}

    def probe() -> None:
        try:
            with urllib.request.urlopen(url, timeout=timeout_s):
                outcome["error"] = None
        except urllib.error.HTTPError:
            outcome["error"] = None  # the server answered
        except Exception as exc:  # noqa: BLE001 - every failure means "not reachable"
            reason = getattr(exc, "reason", None)
            outcome["error"] = str(reason if reason is not None else exc) or type(exc).__name__

    thread = threading.Thread(target=probe, name="doceval-mlflow-probe", daemon=True)
    thread.start()
    thread.join(timeout_s + 0.5)  # DNS resolution is not covered by the socket timeout
    error = outcome.get("error", f"no answer within {timeout_s:g} s")
    if error is not None:
        raise UsageError(
            f"MLflow tracking URI {_display(uri)} cannot be reached ({error}); "
            "start the server or unset MLFLOW_TRACKING_URI (or set tracking.uri / tracking.enabled=false)"
        )
