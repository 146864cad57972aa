"""Tracking URIs: the default sqlite store under ./mlruns (absolute), normalisation, artifact roots, and the
checks made before any work: a supported scheme, an http(s) server that answers, a sqlite store that can be
written (its folder, its artifacts folder, the database file).
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from doceval.common.io import probe_folder
from doceval.common.redact import redact_url
from doceval.errors import UsageError

if TYPE_CHECKING:
    pass

EXPERIMENTS = {"calibration": "doceval-calibration", "test": "doceval-test"}
ALL_EXPERIMENT = "doceval-all"
STORE_DIR = "mlruns"
DB_NAME = "mlflow.db"
ARTIFACTS_DIR = "artifacts"
# URI schemes MLflow 3 stores can live behind (a `+driver` suffix is allowed on the databases). File stores are
# not among them: MLflow keeps them in maintenance mode and doceval's store is sqlite.
HTTP_SCHEMES = ("http", "https")
SERVER_DATABASES = ("postgresql", "mysql", "mssql")
DATABASE_SCHEMES = ("sqlite", *SERVER_DATABASES)
HOSTED_SCHEMES = ("databricks", "databricks-uc", "uc")
NO_TRACK = "run with --no-track (or tracking.enabled=false)"


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


def local_store(uri: str) -> Path | None:
    """The file a sqlite store keeps its runs in (its artifacts sit beside it): a path on this machine that
    processes on other hosts cannot open. None for a server or a database reached over the network."""
    return _sqlite_db(uri)


def _is_http(uri: str) -> bool:
    return urllib.parse.urlsplit(uri).scheme.lower() in ("http", "https")


def artifact_root(uri: str) -> str | None:
    """Where experiments created by doceval keep artifacts: ``<db dir>/artifacts`` for a sqlite store;
    None (the server's or MLflow's default) otherwise."""
    db = _sqlite_db(uri)
    return None if db is None else (db.parent / ARTIFACTS_DIR).as_uri()


def _display(uri: str) -> str:
    """The URI without credentials (userinfo, secret query values), for messages: the one scrubber's rule."""
    return redact_url(uri)


def _scheme(uri: str) -> str:
    """The URI's scheme without a `+driver` suffix (``postgresql+psycopg2`` -> ``postgresql``)."""
    return urllib.parse.urlsplit(uri).scheme.lower().split("+", 1)[0]


def check_scheme(uri: str) -> None:
    """Refuse a URI no MLflow store lives behind (``ftp://``, ``file://``, a typo) before any work."""
    scheme = _scheme(uri)
    if scheme in (*HTTP_SCHEMES, *DATABASE_SCHEMES, *HOSTED_SCHEMES):
        return
    why = (
        "file stores are not supported (MLflow 3 keeps them in maintenance mode)"
        if scheme == "file"
        else f"scheme {scheme + '://' if scheme else '(none)'} is not an MLflow tracking store"
    )
    raise UsageError(
        f"MLflow tracking URI {_display(uri)} cannot be opened: {why}; use sqlite:////ABS/PATH/mlflow.db, an "
        f"http(s)://HOST:PORT server or a database URI (postgresql://, mysql://, mssql://) in tracking.uri or "
        f"MLFLOW_TRACKING_URI, or {NO_TRACK}"
    )


def check_writable_store(uri: str) -> None:
    """For a run that will log: a sqlite store's folder (and its artifacts folder) must take new files, and the
    database file, when it exists, must open for writing and be an SQLite database. Other stores are checked
    by their server (:func:`check_reachable`)."""
    db = _sqlite_db(uri)
    if db is None:
        return
    where = f"MLflow tracking store {_display(uri)} cannot be written"
    fix = f"{NO_TRACK}, or set tracking.uri (or MLFLOW_TRACKING_URI) to a writable sqlite:////ABS/PATH/mlflow.db"
    if db.is_dir():
        raise UsageError(f"{where}: {db} is a directory, not a database file; {fix}")
    # The artifacts folder, when missing, is created with the store inside the folder checked first.
    artifacts = db.parent / ARTIFACTS_DIR
    for folder in (db.parent, *([artifacts] if artifacts.exists() else [])):
        try:
            probe_folder(folder)
        except OSError as exc:
            raise UsageError(f"{where}: cannot write in {folder} ({exc.strerror or exc}); {fix}") from None
    if db.is_file():
        try:
            with db.open("r+b") as fh:
                head = fh.read(16)
        except OSError as exc:
            raise UsageError(
                f"{where}: cannot open {db} for writing ({exc.strerror or exc}); {fix}"
            ) from None
        if head and head != b"SQLite format 3\x00":
            raise UsageError(f"{where}: {db} is not an SQLite database; {fix}")


def _in_thread(work: Callable[[], None], timeout_s: float, name: str) -> str | None:
    """Run ``work`` in a daemon thread for at most about ``timeout_s``: None when it returned, else why not
    (its error, or no answer in time: DNS and some drivers ignore socket timeouts)."""
    outcome: dict[str, str | None] = {}

    def target() -> None:
        try:
            work()
            outcome["error"] = None
        except Exception as exc:  # noqa: BLE001 - every failure means "cannot be used"
            reason = getattr(exc, "reason", None)
            outcome["error"] = (
                " ".join(str(reason if reason is not None else exc).split()) or type(exc).__name__
            )

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(timeout_s + 0.5)
    return outcome.get("error", f"no answer within {timeout_s:g} s")


def check_database(uri: str, timeout_s: float = 5) -> None:
    """A database store (postgresql, mysql, mssql): its SQLAlchemy driver must import and the server must
    accept a connection, so a missing driver or a dead server fails before the work, not after it."""
    # lazy: start-up (sqlalchemy comes with mlflow; only a database tracking store needs it)
    from sqlalchemy.engine import make_url

    where = f"MLflow tracking URI {_display(uri)}"
    fix = f"set tracking.uri (or MLFLOW_TRACKING_URI) to a store that works, or {NO_TRACK}"
    try:
        url = make_url(uri)
        url.get_dialect().import_dbapi()
    except Exception as exc:  # noqa: BLE001 - an unknown dialect, a driver not installed
        raise UsageError(
            f"{where} cannot be opened: its database driver is not available ({type(exc).__name__}: {exc}); "
            f"install the driver (e.g. `pip install psycopg[binary]` for postgresql), or {fix}"
        ) from None

    def connect() -> None:
        # lazy: start-up (sqlalchemy comes with mlflow; only a database tracking store needs it)
        from sqlalchemy import create_engine
        from sqlalchemy.pool import NullPool

        engine = create_engine(url, poolclass=NullPool)
        try:
            with engine.connect():
                pass
        finally:
            engine.dispose()

    error = _in_thread(connect, timeout_s, "doceval-mlflow-db-probe")
    if error is not None:
        if url.password:
            error = error.replace(str(url.password), "***")
        raise UsageError(f"{where} cannot be reached ({error}); start the database, or {fix}")


def check_reachable(uri: str, timeout_s: float = 5, *, write: bool = False) -> None:
    """Raise UsageError (naming the URI, credentials redacted, and the fix) when the tracking store cannot be
    used: a scheme no MLflow store lives behind, an http(s) server that does not answer within about
    ``timeout_s``, a database whose driver is missing or that refuses a connection, or (``write``: a run will
    be logged) a sqlite store that cannot be written.

    Any HTTP answer (even 401/404) counts as reachable."""
    check_scheme(uri)
    if write:
        check_writable_store(uri)
    if _scheme(uri) in SERVER_DATABASES:
        check_database(uri, timeout_s)
        return
    if not _is_http(uri):
        return
    parts = urllib.parse.urlsplit(uri)
    netloc = parts.netloc.rpartition("@")[2]  # credentials are not needed: any HTTP answer will do
    base = urllib.parse.urlunsplit(parts._replace(netloc=netloc, query="", fragment="")).rstrip("/")

    def probe() -> None:
        try:
            with urllib.request.urlopen(base + "/health", timeout=timeout_s):
                pass
        except urllib.error.HTTPError:
            pass  # the server answered

    error = _in_thread(probe, timeout_s, "doceval-mlflow-probe")  # DNS is not covered by the socket timeout
    if error is not None:
        raise UsageError(
            f"MLflow tracking URI {_display(uri)} cannot be reached ({error}); start the server, {NO_TRACK}, "
            "or unset MLFLOW_TRACKING_URI (or set tracking.uri)"
        )
    answered: list[str] = []
    _in_thread(lambda: answered.append(_not_mlflow(base, timeout_s)), timeout_s, "doceval-mlflow-api-probe")
    if answered and answered[0]:
        raise UsageError(
            f"MLflow tracking URI {_display(uri)} answers, but not as an MLflow tracking server ({answered[0]}); "
            f"check its host, port and path (the URL `mlflow server` prints), {NO_TRACK}, or unset "
            "MLFLOW_TRACKING_URI (or set tracking.uri)"
        )


# An MLflow server answers this with JSON (the experiment, or error_code RESOURCE_DOES_NOT_EXIST).
_MLFLOW_API_PROBE = "/api/2.0/mlflow/experiments/get-by-name?experiment_name=Default"


def _not_mlflow(base: str, timeout_s: float) -> str:
    """What answered at ``base`` instead of MLflow's REST API ("" when it is MLflow, or cannot be told: a
    server asking for credentials may be MLflow behind authentication)."""
    try:
        with urllib.request.urlopen(base + _MLFLOW_API_PROBE, timeout=timeout_s) as reply:
            status, body, kind = reply.status, reply.read(65536), reply.headers.get_content_type()
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return ""
        status, body, kind = exc.code, exc.read(65536), exc.headers.get_content_type()
    except (OSError, ValueError):
        return ""  # a failure after /health answered: MLflow's own client reports it
    try:
        is_json = isinstance(json.loads(body), dict)
    except ValueError:
        is_json = False
    return (
        ""
        if is_json
        else f"HTTP {status} with {kind or 'no content type'} on {_MLFLOW_API_PROBE.split('?')[0]}"
    )
