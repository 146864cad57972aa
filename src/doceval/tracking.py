"""MLflow tracking: the only module in doceval that imports mlflow (lazily, so other commands start fast).

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

import contextlib
import copy
import csv
import hashlib
import io
import json
import math
import os
import re
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from doceval import __version__
from doceval.config import flatten
from doceval.errors import UsageError

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

EXPERIMENTS = {"calibration": "doceval-calibration", "test": "doceval-test"}
ALL_EXPERIMENT = "doceval-all"
STORE_DIR = "mlruns"
DB_NAME = "mlflow.db"
ARTIFACTS_DIR = "artifacts"
REDACTED = "<redacted>"
# Always treated as secret sources, whether or not the config names them (defence in depth).
DEFAULT_SECRET_ENV = ("OPENAI_API_KEY", "QDRANT_API_KEY", "MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_PASSWORD")
MAX_PARAM_LEN = 6000  # mlflow.utils.validation.MAX_PARAM_VAL_LENGTH
MAX_TAG_LEN = 8000  # MAX_TAG_VAL_LENGTH
MAX_KEY_LEN = 250  # MAX_ENTITY_KEY_LENGTH
_BATCH = 100  # MAX_PARAMS_TAGS_PER_BATCH (metrics allow 1000, entities per batch 1000)
_MIN_SUBSTRING_SECRET = 8  # shorter secrets are only matched as whole values
_LOCK_TIMEOUT_S = 600.0
ENTRY_COLUMNS = ("id", "split", "library", "version", "kind", "out_of_scope", "refused")


# ============================================================================================== URIs


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


# ============================================================================================== locking


class _StoreLock:
    """An inter-process lock (flock on a file next to the db), re-entrant within a process and thread-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._rlock = threading.RLock()
        self._depth = 0
        self._fh: io.TextIOWrapper | None = None

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        with self._rlock:
            if self._depth == 0:
                self._fh = self._acquire()
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
                if self._depth == 0 and self._fh is not None:
                    self._release(self._fh)
                    self._fh = None

    def _acquire(self) -> io.TextIOWrapper:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")  # noqa: SIM115 - held open across the context
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: in-process lock only
            return fh
        deadline = time.monotonic() + _LOCK_TIMEOUT_S
        while True:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fh
            except BlockingIOError:
                if time.monotonic() > deadline:
                    fh.close()
                    raise UsageError(
                        f"{self.path}: another process has held the MLflow store lock for over "
                        f"{_LOCK_TIMEOUT_S:g} s; stop it or remove a stale lock holder"
                    ) from None
                time.sleep(0.05)

    @staticmethod
    def _release(fh: io.TextIOWrapper) -> None:
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        except ImportError:  # pragma: no cover
            pass
        finally:
            fh.close()


_LOCKS: dict[str, _StoreLock] = {}
_LOCKS_GUARD = threading.Lock()
_ENSURED: set[tuple[int, str]] = set()  # (pid, uri): stores this process has already created/checked


@contextlib.contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    db = _sqlite_db(uri)
    if db is None:
        yield
        return
    path = db.with_name(db.name + ".lock")
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(str(path), _StoreLock(path))
    with lock.hold():
        yield


# ============================================================================================== store


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


# ============================================================================================== secrets


def _secret_key(key: str) -> bool:
    """A key whose value must never be logged: contains api_key/password/secret, unless it only names a
    variable (``*_env``)."""
    low = key.lower()
    last = low.rsplit(".", 1)[-1]
    if last.endswith("_env"):
        return False
    return any(word in low for word in ("api_key", "apikey", "password", "secret"))


def _env_names(obj: Any, out: set[str]) -> None:
    if isinstance(obj, Mapping):
        for k, v in obj.items():
            if str(k).lower().endswith("_env") and isinstance(v, str) and v:
                out.add(v)
            _env_names(v, out)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _env_names(v, out)


def secret_values(*configs: Any) -> list[str]:
    """Contents of the environment variables named by ``*_env`` keys (and the usual key variables)."""
    names: set[str] = set(DEFAULT_SECRET_ENV)
    for cfg in configs:
        _env_names(cfg, names)
    values = {os.environ.get(n, "") for n in names}
    return sorted((v for v in values if v.strip()), key=len, reverse=True)


def _leaks(value: str, secrets: list[str]) -> bool:
    return any(value == s or (len(s) >= _MIN_SUBSTRING_SECRET and s in value) for s in secrets)


def _redact_str(value: str, secrets: list[str]) -> str:
    for s in secrets:
        if value == s:
            return REDACTED
        if len(s) >= _MIN_SUBSTRING_SECRET:
            value = value.replace(s, REDACTED)
    return value


def scrub(obj: Any, secrets: list[str]) -> Any:
    """A deep copy without secret-named keys and with secret values redacted."""
    if isinstance(obj, Mapping):
        return {k: scrub(v, secrets) for k, v in obj.items() if not _secret_key(str(k))}
    if isinstance(obj, list | tuple):
        return [scrub(v, secrets) for v in obj]
    if isinstance(obj, str):
        return _redact_str(obj, secrets)
    return copy.deepcopy(obj)


# ============================================================================================== shaping


def sanitize_key(key: str) -> str:
    """A valid MLflow param/metric/tag name: [\\w./ -] only (no colon: Windows), no path tricks, <= 250."""
    name = re.sub(r"[^\w.\-/ ]", "_", str(key))
    name = re.sub(r"/{2,}", "/", name).strip("/")
    name = "/".join(p if p not in (".", "..") else p.replace(".", "_") for p in name.split("/"))
    name = name.lstrip(".") or "_"
    return name[:MAX_KEY_LEN]


def _param_value(value: Any) -> str:
    if isinstance(value, str):
        text = value
    elif isinstance(value, Mapping | list | tuple):
        text = json.dumps(value, default=str, sort_keys=True)
    else:
        text = str(value)
    return text if len(text) <= MAX_PARAM_LEN else text[: MAX_PARAM_LEN - 3] + "..."


def _num(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    f = float(value)
    return f if math.isfinite(f) else None


def build_params(
    config: Mapping[str, Any], flat_config: Mapping[str, Any] | None, secrets: list[str]
) -> dict[str, str]:
    source = (
        flat_config
        if flat_config is not None
        else {k: v for k, v in config.items() if k not in ("usage", "provenance")}
    )
    params: dict[str, str] = {}
    for key, value in flatten(source).items():
        if not key or _secret_key(key):
            continue
        text = _param_value(value)
        if _leaks(text, secrets) or (isinstance(value, str) and _leaks(value, secrets)):
            continue
        params.setdefault(sanitize_key(key), text)
    return params


def build_metrics(metrics: Mapping[str, Any], usage: Mapping[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}

    def put(name: str, value: Any) -> None:
        v = _num(value)
        if v is not None:
            out.setdefault(sanitize_key(name), v)

    for name, value in metrics.items():
        put(name, value)
    for name, value in (metrics.get("counts") or {}).items():
        put(name, value)
    for name, ci in (metrics.get("ci95") or {}).items():
        if isinstance(ci, list | tuple) and len(ci) == 2:
            put(f"{name}_ci_lo", ci[0])
            put(f"{name}_ci_hi", ci[1])
    for lib, block in (metrics.get("by_library") or {}).items():
        if isinstance(block, Mapping):
            for name, value in block.items():
                put(f"{lib}.{name}", value)
    if usage:
        by_role = usage.get("by_role", usage) if isinstance(usage, Mapping) else {}
        totals: dict[str, float] = {}
        for role, fields in (by_role or {}).items():
            if not isinstance(fields, Mapping):
                continue
            for field, value in fields.items():
                v = _num(value)
                if v is not None:
                    put(f"usage.{role}.{field}", v)
                    totals[field] = totals.get(field, 0.0) + v
        if len([r for r in (by_role or {}).values() if isinstance(r, Mapping)]) > 1:
            for field, value in totals.items():
                put(f"usage.total.{field}", value)
        cache = usage.get("cache") if isinstance(usage, Mapping) else None
        for field, value in (cache or {}).items() if isinstance(cache, Mapping) else ():
            put(f"usage.cache.{field}", value)
    return out


def _split_of(config: Mapping[str, Any]) -> str | None:
    split = config.get("split")
    if isinstance(split, Mapping):
        split = split.get("name")
    return None if split is None else str(split)


def build_tags(config: Mapping[str, Any], metrics: Mapping[str, Any], extra: Mapping[str, Any] | None,
               secrets: list[str]) -> dict[str, str]:  # fmt: skip
    prov = config.get("provenance") or {}
    retriever = config.get("retriever")
    dirty = prov.get("git_dirty")
    tags: dict[str, Any] = {
        "split": _split_of(config) or "all",
        "retriever": retriever.get("name") if isinstance(retriever, Mapping) else retriever,
        "k": config.get("k"),
        "git_commit": prov.get("git_commit"),
        "git_dirty": None if dirty is None else str(bool(dirty)).lower(),
        "golden_md5": (config.get("golden") or {}).get("md5"),
        "index_hash": (config.get("candidates") or {}).get("index_hash"),
        "floors_source": (config.get("floors") or {}).get("source"),
        "run_key": config.get("run_key"),
        "doceval_version": __version__,
    }
    if isinstance(metrics.get("not_judged"), bool):
        tags["not_judged"] = str(metrics["not_judged"]).lower()
    if prov.get("git_commit"):
        tags["mlflow.source.git.commit"] = prov["git_commit"]
    tags.update(extra or {})
    out: dict[str, str] = {}
    for key, value in tags.items():
        if value is None or _secret_key(str(key)):
            continue
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        if _leaks(text, secrets):
            continue
        out[sanitize_key(key)] = text[:MAX_TAG_LEN]
    return out


def entries_csv(entries: list[Mapping[str, Any]]) -> str:
    score_keys: list[str] = []
    for e in entries:
        for k in e.get("scores") or {}:
            if k not in score_keys:
                score_keys.append(k)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow([*ENTRY_COLUMNS, *score_keys])

    def cell(v: Any) -> Any:
        return "" if v is None else v

    for e in entries:
        scores = e.get("scores") or {}
        writer.writerow([cell(e.get(c)) for c in ENTRY_COLUMNS] + [cell(scores.get(k)) for k in score_keys])
    return buf.getvalue()


def _golden_input(golden_path: Path, md5: str | None, split: str | None) -> Any:
    from mlflow.entities import Dataset, DatasetInput, InputTag
    from mlflow.utils.mlflow_tags import MLFLOW_DATASET_CONTEXT

    path = Path(golden_path)
    rows: int | None = None
    if path.is_file():
        data = path.read_bytes()
        md5 = md5 or hashlib.md5(data).hexdigest()
        rows = sum(1 for line in data.splitlines() if line.strip())
    digest = (md5 or "unknown")[:36]
    profile = json.dumps({"num_rows": rows}) if rows is not None else None
    dataset = Dataset(name="golden", digest=digest, source_type="local",
                      source=json.dumps({"uri": path.resolve().as_uri()}), profile=profile)  # fmt: skip
    tags = [InputTag(key=MLFLOW_DATASET_CONTEXT, value="evaluation")]
    if split:
        tags.append(InputTag(key="split", value=split))
    return DatasetInput(dataset=dataset, tags=tags)


def _redact_file(src: Path, dst: Path, secrets: list[str]) -> None:
    data = src.read_bytes()
    for s in secrets:
        if len(s) >= _MIN_SUBSTRING_SECRET:
            data = data.replace(s.encode(), REDACTED.encode())
    dst.write_bytes(data)


# ============================================================================================== runs


def _stage_artifact(name: str, src: Path, into: Path, secrets: list[str]) -> tuple[Path, str | None]:
    """Copy a caller's artifact (file or folder) into the staging area, secrets redacted; returns the local
    path to log and its artifact folder (``plots/pr.png`` -> logged as pr.png under plots/)."""
    parts = [p for p in Path(name).parts if p not in ("", ".", "..", "/")]
    rel = Path(*parts) if parts else Path(src.name)
    folder = None if str(rel.parent) in ("", ".") else rel.parent.as_posix()
    if src.is_file():
        dst = into / rel.name
        dst.parent.mkdir(parents=True, exist_ok=True)
        _redact_file(src, dst, secrets)
        return dst, folder
    if src.is_dir():
        dst = into / rel.name
        for file in sorted(p for p in src.rglob("*") if p.is_file()):
            target = dst / file.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            _redact_file(file, target, secrets)
        dst.mkdir(parents=True, exist_ok=True)
        return dst, rel.as_posix()
    raise UsageError(f"artifact {name}: {src} does not exist")


def _parent_experiment(client: MlflowClient, parent_run_id: str, uri: str) -> str:
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_run(parent_run_id).info.experiment_id)
    except MlflowException as exc:
        raise UsageError(f"parent run {parent_run_id} not found in {_display(uri)}: {exc.message}") from None


def _log_golden(client: MlflowClient, run_id: str, dataset_input: Any) -> None:
    """log_inputs, retried: two runs registering the same new dataset in one experiment at once (a parallel
    sweep against a server) race on its primary key; the loser finds it on the next try."""
    from mlflow.exceptions import MlflowException

    for attempt in range(3):
        try:
            client.log_inputs(run_id, datasets=[dataset_input])
            return
        except MlflowException:
            if attempt == 2:
                raise
            time.sleep(0.2 * (attempt + 1))


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def log_run(
    summary: Mapping[str, Any],
    *,
    uri: str,
    root: Path | None = None,
    run_name: str | None = None,
    parent_run_id: str | None = None,
    artifacts: Mapping[str, Path] | None = None,
    extra_tags: Mapping[str, str] | None = None,
    flat_config: Mapping[str, Any] | None = None,
    usage: Mapping[str, Any] | None = None,
    golden_path: Path | None = None,
) -> str:
    """Log one evaluation summary as a finished MLflow run; returns the run id.

    The experiment follows ``config.split`` (a child of ``parent_run_id`` goes to its parent's experiment,
    which MLflow needs to nest it). Artifacts: summary.json, entries.csv, config.yaml and every file (or
    folder) in ``artifacts`` under its key's name."""
    from mlflow.entities import Metric, Param
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    config_raw = summary.get("config") or {}
    secrets = secret_values(config_raw, flat_config or {})
    clean = scrub(summary, secrets)
    config: dict[str, Any] = clean.get("config") or {}
    split = _split_of(config)
    params = build_params(config_raw, flat_config, secrets)  # raw: leaking values are dropped, not redacted
    usage_block = usage if usage is not None else (config_raw.get("usage") or None)
    metrics = build_metrics(clean.get("metrics") or {}, usage_block)
    tags = build_tags(config, clean.get("metrics") or {}, extra_tags, secrets)
    if parent_run_id:
        tags[MLFLOW_PARENT_RUN_ID] = parent_run_id

    ensure_store(uri, root)
    with tempfile.TemporaryDirectory(prefix="doceval-mlflow-") as tmp:
        staged = Path(tmp)
        files: list[tuple[Path, str | None]] = []
        (staged / "summary.json").write_text(
            json.dumps(clean, indent=2, default=str) + "\n", encoding="utf-8"
        )
        (staged / "entries.csv").write_text(entries_csv(clean.get("entries") or []), encoding="utf-8")
        (staged / "config.yaml").write_text(
            yaml.safe_dump(json.loads(json.dumps(config, default=str)), sort_keys=False, allow_unicode=True),
            encoding="utf-8",
        )
        files += [(staged / n, None) for n in ("summary.json", "entries.csv", "config.yaml")]
        for i, (name, src) in enumerate((artifacts or {}).items()):
            files.append(_stage_artifact(str(name), Path(src), staged / "extra" / str(i), secrets))

        with _store_lock(uri):
            client = _client(uri)
            if parent_run_id:
                experiment_id = _parent_experiment(client, parent_run_id, uri)
            else:
                experiment_id = _experiment_id(client, experiment_name(split), uri)
            run = client.create_run(experiment_id, run_name=run_name, tags=tags)
            run_id = str(run.info.run_id)
            try:
                now = int(time.time() * 1000)
                for batch in _chunks([Param(k, v) for k, v in params.items()], _BATCH):
                    client.log_batch(run_id, params=batch)
                for mbatch in _chunks([Metric(k, v, now, 0) for k, v in metrics.items()], 1000):
                    client.log_batch(run_id, metrics=mbatch)
                if golden_path is not None:
                    md5 = (config.get("golden") or {}).get("md5")
                    _log_golden(client, run_id, _golden_input(Path(golden_path), md5, split))
                for path, artifact_path in files:
                    if path.is_dir():
                        client.log_artifacts(run_id, str(path), artifact_path=artifact_path)
                    else:
                        client.log_artifact(run_id, str(path), artifact_path=artifact_path)
            except BaseException:
                client.set_terminated(run_id, "FAILED")
                raise
            client.set_terminated(run_id, "FINISHED")
    return run_id


def start_parent(name: str, *, uri: str, root: Path | None = None, split: str | None,
                 tags: Mapping[str, str] | None = None) -> str:  # fmt: skip
    """Create a sweep's parent run (finished at once); children attach with ``log_run(parent_run_id=...)``."""
    ensure_store(uri, root)
    secrets = secret_values(tags or {})
    all_tags = {
        "split": split or "all",
        "doceval_version": __version__,
        "doceval.sweep": "parent",
        **(tags or {}),
    }
    clean = {sanitize_key(k): str(v)[:MAX_TAG_LEN] for k, v in all_tags.items()
             if v is not None and not _secret_key(str(k)) and not _leaks(str(v), secrets)}  # fmt: skip
    with _store_lock(uri):
        client = _client(uri)
        experiment_id = _experiment_id(client, experiment_name(split), uri)
        run = client.create_run(experiment_id, run_name=name, tags=clean)
        client.set_terminated(run.info.run_id, "FINISHED")
    return str(run.info.run_id)


def log_parent_artifacts(run_id: str, *, uri: str, root: Path | None = None, files: list[Path]) -> None:
    """Attach a finished sweep's points table and plot to its parent run (missing files are skipped)."""
    with _store_lock(uri):
        client = _client(uri)
        for path in files:
            if path.is_file():
                client.log_artifact(run_id, str(path))


def load_summary_from_run(run_id: str, uri: str, root: Path | None = None) -> dict[str, Any]:
    """The summary.json artifact of a logged run (for ``doceval compare RUN_ID RUN_ID``)."""
    from mlflow.exceptions import MlflowException

    check_reachable(uri)
    client = _client(uri)
    try:
        client.get_run(run_id)
    except MlflowException as exc:
        raise UsageError(f"MLflow run {run_id} not found in {_display(uri)}: {exc.message}") from None
    with tempfile.TemporaryDirectory(prefix="doceval-mlflow-") as tmp:
        try:
            local = client.download_artifacts(run_id, "summary.json", dst_path=tmp)
        except (MlflowException, OSError) as exc:
            raise UsageError(f"MLflow run {run_id} has no summary.json artifact ({exc}); "
                             "was it logged by doceval?") from None  # fmt: skip
        data: dict[str, Any] = json.loads(Path(local).read_text(encoding="utf-8"))
    return data
