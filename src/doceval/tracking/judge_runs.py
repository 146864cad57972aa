"""Judge validations in their own MLflow experiment (``doceval-judge``): one run per `doceval judge validate`,
tagged with the judge hash and the label file's md5, so a judge's agreement can be looked up next to the
answer_accuracy figures it produced (tag ``judge_hash`` on evaluation runs)."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doceval import __version__
from doceval.common.io import json_text
from doceval.tracking.locking import _store_lock
from doceval.tracking.secrets import redact_text, scrub, secret_values
from doceval.tracking.shaping import MAX_TAG_LEN, sanitize_key
from doceval.tracking.store import _client, _experiment_id, check_artifact_location, ensure_store

JUDGE_EXPERIMENT = "doceval-judge"


def _metrics(report: Mapping[str, Any]) -> dict[str, float]:
    agree = report["agreement"]
    out: dict[str, Any] = {
        "accuracy": agree.get("accuracy"),
        "kappa": agree.get("kappa"),
        "kappa_ci_low": (agree.get("kappa_ci95") or [None, None])[0],
        "kappa_ci_high": (agree.get("kappa_ci95") or [None, None])[1],
        "n": agree.get("n"),
        "judge_errors": agree.get("judge_errors"),
        "version_strings_kappa": (report.get("version_strings_alone") or {}).get("kappa"),
    }
    for cat, block in (agree.get("by_category") or {}).items():
        out[f"agreement_{cat}"] = block.get("agreement")
    rep = report.get("repeats") or {}
    for key in ("flip_rate", "kappa_min", "kappa_max", "kappa_sd"):
        out[key] = rep.get(key)
    return {
        sanitize_key(k): float(v)
        for k, v in out.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def log_judge_validation(
    report: Mapping[str, Any], *, uri: str, root: Path | None = None, run_name: str | None = None
) -> str:
    """One finished run: the judge identity as params, the agreement figures as metrics, the report as an
    artifact (secrets redacted); returns the run id."""
    # lazy: start-up (mlflow, seconds; only tracking loads it)
    from mlflow.entities import Metric, Param

    secrets = secret_values(report.get("judge") or {})
    clean = scrub(dict(report), secrets)
    identity = (clean.get("judge") or {}).get("identity") or {}
    params = {
        sanitize_key(f"judge.{k}"): redact_text(
            json.dumps(v, default=str) if not isinstance(v, str) else v, secrets
        )[:6000]
        for k, v in identity.items()
        if v is not None
    }
    labels = clean.get("labels") or {}
    tags = {
        "judge_hash": (clean.get("judge") or {}).get("hash"),
        "labels_md5": labels.get("md5"),
        "labels_split": labels.get("split"),
        "doceval_version": __version__,
    }
    ensure_store(uri, root)
    with tempfile.TemporaryDirectory(prefix="doceval-mlflow-") as tmp, _store_lock(uri):
        staged = Path(tmp) / "judge_validation.json"
        staged.write_text(json_text(clean, indent=2, default=str) + "\n", encoding="utf-8")
        client = _client(uri)
        experiment_id = _experiment_id(client, JUDGE_EXPERIMENT, uri)
        check_artifact_location(client, experiment_id)
        run = client.create_run(
            experiment_id,
            run_name=run_name,
            tags={k: str(v)[:MAX_TAG_LEN] for k, v in tags.items() if v is not None},
        )
        run_id = str(run.info.run_id)
        try:
            now = int(time.time() * 1000)
            client.log_batch(
                run_id,
                params=[Param(k, v) for k, v in params.items()],
                metrics=[Metric(k, v, now, 0) for k, v in _metrics(clean).items()],
            )
            client.log_artifact(run_id, str(staged))
        except BaseException:
            client.set_terminated(run_id, "FAILED")
            raise
        client.set_terminated(run_id, "FINISHED")
    return run_id
