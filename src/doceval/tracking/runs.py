"""Logging runs: one evaluation summary as a finished MLflow run (params, metrics, tags, artifacts, golden
dataset input), sweep parents, and reading a logged summary back.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from doceval import __version__
from doceval.common.io import (
    TEXT_ERRORS,
    escape_surrogates,
    finite_or_null,
    json_text,
    without_surrogates,
)
from doceval.errors import UsageError
from doceval.summary import Summary, settings_of
from doceval.tracking.datasets import register_golden
from doceval.tracking.locking import _store_lock
from doceval.tracking.secrets import (
    env_secret_values,
    leaks,
    redact_text,
    redact_url,
    scrub,
    secret_name,
    secret_values,
)
from doceval.tracking.shaping import (
    MAX_TAG_LEN,
    _golden_input,
    _redact_file,
    _split_of,
    build_metrics,
    build_params,
    build_tags,
    entries_csv,
    sanitize_key,
)
from doceval.tracking.store import (
    _client,
    _experiment_id,
    check_artifact_location,
    ensure_store,
    import_mlflow,
)
from doceval.tracking.trace_reader import with_trace_entries
from doceval.tracking.trace_store import log_traces
from doceval.tracking.traces import TRACES_TAG
from doceval.tracking.uris import check_reachable, experiment_name

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

_BATCH = 100  # MAX_PARAMS_TAGS_PER_BATCH (metrics allow 1000, entities per batch 1000)


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
    # lazy: start-up (mlflow, seconds; only a run that is logged loads it)
    from mlflow.exceptions import MlflowException

    try:
        return str(client.get_run(parent_run_id).info.experiment_id)
    except MlflowException as exc:
        raise UsageError(
            f"parent run {parent_run_id} not found in {redact_url(uri)}: {_safe(exc.message, uri)}"
        ) from None


def _safe(text: Any, uri: str) -> str:
    """An MLflow error message for ours: the URI's credentials (and any other URL's) masked."""
    return redact_text(str(text), secret_values(uri))


def _log_golden(client: MlflowClient, run_id: str, dataset_input: Any) -> None:
    """log_inputs, retried: two runs registering the same new dataset in one experiment at once (a parallel
    sweep against a server) race on its primary key; the loser finds it on the next try."""
    # lazy: start-up (mlflow, seconds; only a run that is logged loads it)
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


def _log_entry_traces(
    client: MlflowClient,
    run_id: str,
    experiment_id: str,
    summary: Mapping[str, Any],
    recorded: Mapping[str, Any],
    golden_path: Path | None,
    secrets: list[str],
    env_secrets: list[str],
    doc_texts: Mapping[str, str] | None,
) -> None:
    """The run's entries as traces (tag ``doceval.traces`` = how many) and its golden set as a dataset
    (``recorded``: the summary's ``config`` block)."""
    store = client._tracking_client.store  # batched trace writes need the store (see tracking.trace_store)
    n = log_traces(
        store,
        run_id=run_id,
        experiment_id=experiment_id,
        summary=summary,
        secrets=secrets,
        env_secrets=env_secrets,
        texts=doc_texts,
    )
    client.set_tag(run_id, TRACES_TAG, str(n))
    md5 = (recorded.get("golden") or {}).get("md5")
    if golden_path is not None:
        dataset_id = register_golden(store, experiment_id, Path(golden_path), md5, secrets)
        if dataset_id:
            client.set_tag(run_id, "doceval.golden_dataset_id", dataset_id)


def log_run(
    summary: Summary | Mapping[str, Any],
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
    traces: bool = True,
    doc_texts: Mapping[str, str] | None = None,
) -> str:
    """Log one evaluation summary as a finished MLflow run; returns the run id.

    The experiment follows ``config.split`` (a child of ``parent_run_id`` goes to its parent's experiment,
    which MLflow needs to nest it). Artifacts: summary.json, entries.csv, config.yaml and every file (or
    folder) in ``artifacts`` under its key's name. With ``traces``, every entry is also a trace of the run
    (:mod:`doceval.tracking.traces`; ``doc_texts`` fills the retrieved documents' content) and the golden
    set an evaluation dataset of the experiment."""
    import_mlflow(uri)
    # lazy: start-up (mlflow, seconds; imported once import_mlflow has checked the store's URI)
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    # An older summary (NaN, -Infinity: an assistant's floors) is logged with the null a current one holds.
    data: Mapping[str, Any] = finite_or_null(summary.to_dict() if isinstance(summary, Summary) else summary)
    raw_recorded = settings_of(data).recorded  # the summary's config block, as recorded
    # Values holding a key variable's content are dropped from params and tags; everything logged has URL
    # credentials masked, and those credentials are redacted wherever else they appear.
    env_secrets = env_secret_values(raw_recorded, flat_config or {})
    secrets = secret_values(raw_recorded, flat_config or {}, dict(extra_tags or {}))
    clean = Summary.from_mapping(scrub(data, secrets))  # summary.json: a lone surrogate stays a JSON escape
    # The store (sqlite) takes UTF-8 only: params, tags and traces hold a lone surrogate as the text \udXXX.
    data, raw_recorded, flat_config = without_surrogates([data, raw_recorded, flat_config])
    recorded: dict[str, Any] = without_surrogates(dict(clean.settings.recorded))
    split = _split_of(recorded)
    params = build_params(raw_recorded, flat_config, env_secrets)  # raw: leaking values are dropped
    usage_block = usage if usage is not None else (raw_recorded.get("usage") or None)
    metrics = build_metrics(clean.metrics.recorded, usage_block, clean.repeats)
    tags = build_tags(recorded, clean.metrics.recorded, extra_tags, env_secrets)
    run_name = None if run_name is None else redact_text(escape_surrogates(run_name), secrets)
    if parent_run_id:
        tags[MLFLOW_PARENT_RUN_ID] = parent_run_id

    ensure_store(uri, root)
    with tempfile.TemporaryDirectory(prefix="doceval-mlflow-") as tmp:
        files = _stage_files(Path(tmp), clean, recorded, artifacts, secrets)
        with _store_lock(uri):
            client = _client(uri)
            experiment_id = _run_experiment(client, parent_run_id, split, uri)
            check_artifact_location(client, experiment_id)  # before the run exists: no FAILED run left
            run = client.create_run(experiment_id, run_name=run_name, tags=tags)
            run_id = str(run.info.run_id)
            try:
                _log_params_metrics(client, run_id, params, metrics)
                if golden_path is not None:
                    md5 = (recorded.get("golden") or {}).get("md5")
                    _log_golden(client, run_id, _golden_input(Path(golden_path), md5, split))
                _log_files(client, run_id, files)
                if traces:
                    _log_entry_traces(
                        client,
                        run_id,
                        experiment_id,
                        data,
                        recorded,
                        golden_path,
                        secrets,
                        env_secrets,
                        doc_texts,
                    )
            except BaseException:
                client.set_terminated(run_id, "FAILED")
                raise
            client.set_terminated(run_id, "FINISHED")
    return run_id


def _run_experiment(client: MlflowClient, parent_run_id: str | None, split: str | None, uri: str) -> str:
    """The experiment a run goes to: its parent's (MLflow nests a child only there), else its split's."""
    if parent_run_id:
        return _parent_experiment(client, parent_run_id, uri)
    return _experiment_id(client, experiment_name(split), uri)


def _log_files(client: MlflowClient, run_id: str, files: list[tuple[Path, str | None]]) -> None:
    """The staged artifact files and folders, each under its artifact path."""
    for path, artifact_path in files:
        if path.is_dir():
            client.log_artifacts(run_id, str(path), artifact_path=artifact_path)
        else:
            client.log_artifact(run_id, str(path), artifact_path=artifact_path)


def _stage_files(
    staged: Path,
    clean: Summary,
    recorded: Mapping[str, Any],
    artifacts: Mapping[str, Path] | None,
    secrets: list[str],
) -> list[tuple[Path, str | None]]:
    """The run's artifacts written under ``staged`` (summary.json, entries.csv, config.yaml, then each extra
    artifact redacted), as (local path, artifact folder) pairs in logging order. ``recorded``: the summary's
    ``config`` block, written as config.yaml."""
    (staged / "summary.json").write_text(
        json_text(clean.recorded, indent=2, default=str) + "\n", encoding="utf-8"
    )
    # A lone surrogate in an answer is written as \udXXX, never a UnicodeEncodeError.
    (staged / "entries.csv").write_text(entries_csv(clean.rows), encoding="utf-8", errors=TEXT_ERRORS)
    (staged / "config.yaml").write_text(
        yaml.safe_dump(json.loads(json.dumps(recorded, default=str)), sort_keys=False, allow_unicode=True),
        encoding="utf-8",
    )
    files: list[tuple[Path, str | None]] = [
        (staged / n, None) for n in ("summary.json", "entries.csv", "config.yaml")
    ]
    for i, (name, src) in enumerate((artifacts or {}).items()):
        files.append(_stage_artifact(str(name), Path(src), staged / "extra" / str(i), secrets))
    return files


def _log_params_metrics(
    client: MlflowClient, run_id: str, params: Mapping[str, str], metrics: Mapping[str, float]
) -> None:
    """Params and metrics in batches of the store's limits (100 params, 1000 metrics per call)."""
    # lazy: start-up (mlflow takes seconds to import: only when a run is logged)
    from mlflow.entities import Metric, Param

    now = int(time.time() * 1000)
    for batch in _chunks([Param(k, v) for k, v in params.items()], _BATCH):
        client.log_batch(run_id, params=batch)
    for mbatch in _chunks([Metric(k, v, now, 0) for k, v in metrics.items()], 1000):
        client.log_batch(run_id, metrics=mbatch)


def start_parent(
    name: str, *, uri: str, root: Path | None = None, split: str | None, tags: Mapping[str, str] | None = None
) -> str:
    """Create a sweep's parent run (finished at once); children attach with ``log_run(parent_run_id=...)``."""
    ensure_store(uri, root)
    env_secrets = env_secret_values(tags or {})
    secrets = secret_values(tags or {}, name)
    all_tags = {
        "split": split or "all",
        "doceval_version": __version__,
        "doceval.harness.sweep": "parent",
        **(tags or {}),
    }
    clean = {
        sanitize_key(k): redact_text(str(v), secrets)[:MAX_TAG_LEN]
        for k, v in all_tags.items()
        if v is not None and not secret_name(str(k)) and not leaks(str(v), env_secrets)
    }
    with _store_lock(uri):
        client = _client(uri)
        experiment_id = _experiment_id(client, experiment_name(split), uri)
        check_artifact_location(client, experiment_id)
        run = client.create_run(experiment_id, run_name=redact_text(name, secrets), tags=clean)
        client.set_terminated(run.info.run_id, "FINISHED")
    return str(run.info.run_id)


def log_parent_artifacts(run_id: str, *, uri: str, root: Path | None = None, files: list[Path]) -> None:
    """Attach a finished sweep's points table and plot to its parent run (missing files are skipped; URL
    credentials and key variables' contents redacted)."""
    secrets = secret_values()
    with tempfile.TemporaryDirectory(prefix="doceval-mlflow-") as tmp, _store_lock(uri):
        client = _client(uri)
        for path in files:
            if path.is_file():
                staged = Path(tmp) / path.name
                _redact_file(path, staged, secrets)
                client.log_artifact(run_id, str(staged))


def load_summary_from_run(run_id: str, uri: str, root: Path | None = None) -> dict[str, Any]:
    """A logged run's summary (for ``doceval compare RUN_ID RUN_ID``): its summary.json artifact, with the
    entries read from the run's traces when it has them (checked against the artifact)."""
    # lazy: start-up (mlflow, seconds; only reading a logged run loads it)
    from mlflow.exceptions import MlflowException

    check_reachable(uri)
    client = _client(uri)
    try:
        client.get_run(run_id)
    except MlflowException as exc:
        raise UsageError(
            f"MLflow run {run_id} not found in {redact_url(uri)}: {_safe(exc.message, uri)}"
        ) from None
    with tempfile.TemporaryDirectory(prefix="doceval-mlflow-") as tmp:
        try:
            local = client.download_artifacts(run_id, "summary.json", dst_path=tmp)
        except (MlflowException, OSError) as exc:
            raise UsageError(
                f"MLflow run {run_id} has no summary.json artifact ({_safe(exc, uri)}); "
                "was it logged by doceval?"
            ) from None
        data: dict[str, Any] = json.loads(Path(local).read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("entries"), list):
        return data  # the caller's shape check names what is wrong
    return with_trace_entries(data, client, run_id)
