"""Tracking driven by a composed configuration: the `tracking` block decides whether and where runs are logged."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from doceval.common.redact import redact_url
from doceval.config.compose import flatten
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.inputs.corpus import load_corpus
from doceval.summary import Summary, as_summary
from doceval.tracking.judge_runs import JUDGE_EXPERIMENT, log_judge_validation
from doceval.tracking.locking import _store_lock
from doceval.tracking.runs import log_run
from doceval.tracking.shaping import MAX_TAG_LEN, run_title
from doceval.tracking.store import _client
from doceval.tracking.uris import check_reachable, tracking_uri

if TYPE_CHECKING:
    from doceval.config.schema import Config


def enabled(cfg: Config) -> bool:
    return cfg.tracking.enabled


def check_configured(cfg: Config, root: Path | None = None) -> None:
    """Fail fast (exit 2) on a tracking store the run could not log to, before any work is done: an unsupported
    scheme, an http(s) server that does not answer, a sqlite store that cannot be written (read-only, /proc)."""
    if enabled(cfg):
        check_reachable(tracking_uri(cfg.tracking.uri, root or Path.cwd()), write=True)


def log_configured_run(
    cfg: Config,
    summary: Summary | Mapping[str, Any],
    artifacts: Mapping[str, Path],
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    doc_texts: Mapping[str, str] | None = None,
) -> str | None:
    """Log a run when tracking is enabled (log_run creates the store once); returns the run id. ``doc_texts``:
    the traces' document texts when the caller holds the corpus already (else read from ``paths.docs``)."""
    if not enabled(cfg):
        return None
    root = Path.cwd()
    uri = tracking_uri(cfg.tracking.uri, root)
    typed = as_summary(summary)
    flat = effective_params(cfg, typed.settings.recorded)
    title = run_title(typed.settings.recorded)
    run_id = log_run(
        typed,
        uri=uri,
        root=root,
        # What the run is (split · system · k · floors · golden), then the caller's label (an output name).
        run_name=title if not run_name else f"{title} · {run_name}",
        artifacts=dict(artifacts),
        extra_tags={**(tags or {}), **({} if typed.complete else {"complete": "false"})},
        flat_config=flat,
        golden_path=typed.settings.golden.file,
        traces=_traces_on(cfg),
        doc_texts=(_doc_texts(cfg) if doc_texts is None else doc_texts) if _traces_on(cfg) else None,
    )
    n = len(typed.entries)
    traced = f", {n} entry traces" if _traces_on(cfg) else ""
    print(f"mlflow: logged run {run_id}{traced} ({redact_url(uri)})")
    return run_id


# The blocks of a summary's config that record what ran (flags such as --warm-memory, --split or --score-floor,
# an assistant in place of the retriever and answerer, the floors actually used): they replace the composed
# ones in the params, so a run's params never say what the run did not do.
_RAN = ("k", "limit", "retriever", "floors", "answerer", "judge", "memory", "run")


def effective_params(cfg: Config, recorded: Mapping[str, Any]) -> dict[str, Any]:
    """The MLflow params, flat: the composed config as recorded (config_dict), less where its files are, with
    every block the summary's ``recorded`` config holds (:data:`_RAN`) as the run recorded it."""
    params = {k: v for k, v in config_dict(cfg).items() if k not in ("docs", "paths")}
    params.update({block: recorded[block] for block in _RAN if recorded.get(block) is not None})
    if "split" in recorded:  # --split: the composed block is {"name": ...}; None is every split
        params["split"] = {"name": recorded["split"] or "all"}
    ran = ((recorded.get("system") or {}).get("agent") or {}).get("name")
    if ran is not None and ran != cfg.agent.name:  # an assistant object given to the Python API
        params["agent"] = {"name": ran}
    flat: dict[str, Any] = flatten(params)
    return flat


def _traces_on(cfg: Config) -> bool:
    return cfg.tracking.traces


def _doc_texts(cfg: Config) -> dict[str, str] | None:
    """doc id -> the passage an answerer sees, for the traces' retrieved documents (the corpus is memoised:
    the run that just scored it already loaded it). None when there is no built corpus to read."""
    docs = cfg.paths.docs
    if not (Path(docs) / "manifest.json").is_file():
        return None
    try:
        return load_corpus(Path(docs)).first_chunks
    except UsageError:
        return None  # the run itself read the corpus fine; a file changed since only loses the texts


def fail_parent(run_id: str, uri: str, failed_point: str | None = None) -> None:
    """Mark a sweep's parent run FAILED (it is created finished), tagging the point that failed (its overrides,
    already logged in the parent's ``sweep`` tag); the sweep's caller says why."""
    with _store_lock(uri):
        client = _client(uri)
        if failed_point:
            client.set_tag(run_id, "sweep_failed_point", failed_point[:MAX_TAG_LEN])
        client.set_terminated(run_id, "FAILED")


def log_configured_judge_validation(cfg: Config, report: Mapping[str, Any]) -> str | None:
    """Log a judge validation to the ``doceval-judge`` experiment when tracking is enabled; returns the run id."""
    if not enabled(cfg):
        return None
    root = Path.cwd()
    uri = tracking_uri(cfg.tracking.uri, root)
    run_id = log_judge_validation(
        report, uri=uri, root=root, run_name=(report.get("judge") or {}).get("hash")
    )
    print(f"mlflow: logged judge validation {run_id} to experiment {JUDGE_EXPERIMENT} ({redact_url(uri)})")
    return run_id
