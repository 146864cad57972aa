"""The tracked history of one configuration family: every finished run of a split's experiment with the same
golden md5, system under test, retriever, k and split, in commit order (docs/design.md section 8.7). Read by
`doceval history` and the gate's drift rule; the commit time comes from git when the commit is known locally,
else the run's start time."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from doceval.common.naming import canonical_system
from doceval.common.redact import redact_url
from doceval.errors import UsageError
from doceval.scoring.agreement import JUDGED_METRICS
from doceval.tracking.store import _client
from doceval.tracking.uris import check_reachable, experiment_name

FAMILY_TAGS = ("golden_md5", "system", "retriever", "k", "split")


def _commit_time(commit: str | None, root: Path) -> float | None:
    if not commit:
        return None
    try:
        out = subprocess.run(
            ["git", "show", "-s", "--format=%ct", commit],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return float(text) if out.returncode == 0 and text.isdigit() else None


def uncommitted_runs(uri: str, split: str | None) -> int:
    """How many finished top-level runs of ``split``'s experiment record no git commit (run outside a git
    repository, or before its first commit) when none records one (0 otherwise): history cannot place any."""
    check_reachable(uri)
    client = _client(uri)
    experiment = client.get_experiment_by_name(experiment_name(split))
    if experiment is None:
        return 0
    runs = client.search_runs([experiment.experiment_id], "attributes.status = 'FINISHED'", max_results=5000)
    top_level = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    return 0 if any(r.data.tags.get("git_commit") for r in top_level) else len(top_level)


def _in_family(tags: Mapping[str, str], family: Mapping[str, str]) -> bool:
    """Whether a run's tags match ``family``; system labels compared as doceval.common.naming compares them (a
    loopback HTTP assistant's port left out, so runs tagged with the port before that rule match)."""
    return all(
        (canonical_system(tags.get(k, "")) == canonical_system(v)) if k == "system" else tags.get(k, "") == v
        for k, v in family.items()
    )


def load_history(
    uri: str,
    *,
    split: str | None,
    metrics: Sequence[str],
    family: Mapping[str, str] | None = None,
    root: Path | None = None,
    run_name: str | None = None,
    judge_hash: str | None = None,
) -> list[dict[str, Any]]:
    """Runs of ``split``'s experiment in one family: the tags given in ``family``, the rest taken from the newest
    run that has them and is named ``run_name`` when given (None: the newest run's family),
    oldest commit first: ``{"run_id", "run_name", "commit", "dirty", "time", "start", "family", "metrics":
    {name: {"value", "ci"}}}``. Runs of a sweep (children) and runs without a commit are left out
    (:func:`uncommitted_runs` counts those). A judged metric (answer_accuracy) splits the family by judge: its
    value is kept only for runs tagged with ``judge_hash`` (None: the newest run's), the others' read None
    with ``other_judge`` naming their judge."""
    # lazy: start-up (mlflow, seconds; only tracking loads it)
    from mlflow.exceptions import MlflowException

    root = root or Path.cwd()
    check_reachable(uri)
    client = _client(uri)
    try:
        experiment = client.get_experiment_by_name(experiment_name(split))
        if experiment is None:
            return []
        runs = client.search_runs(
            [experiment.experiment_id], "attributes.status = 'FINISHED'", max_results=5000
        )
    except MlflowException as exc:
        message = " ".join(exc.message.split("Response body")[0].split())  # not a page of HTML
        raise UsageError(f"reading the tracked runs in {redact_url(uri)} failed: {message}") from None
    usable = [r for r in runs if "mlflow.parentRunId" not in r.data.tags and r.data.tags.get("git_commit")]
    if not usable:
        return []
    # The family: the given tags, completed from the newest run that has them.
    matching = [r for r in usable if _in_family(r.data.tags, family or {})]
    if run_name is not None:
        matching = [r for r in matching if r.info.run_name == run_name]
    if not matching:
        return []
    newest = max(matching, key=lambda r: r.info.start_time)
    family = {k: newest.data.tags.get(k, "") for k in FAMILY_TAGS}
    chosen = [r for r in usable if _in_family(r.data.tags, family)]
    judge = judge_hash if judge_hash is not None else newest.data.tags.get("judge_hash")
    out = []
    for r in chosen:
        commit = r.data.tags.get("git_commit")
        start = r.info.start_time / 1000.0
        m = r.data.metrics
        out.append(
            {
                "run_id": r.info.run_id,
                "run_name": r.info.run_name,
                "commit": commit,
                "dirty": r.data.tags.get("git_dirty") == "true",
                "time": _commit_time(commit, root) or start,
                "start": start,
                "family": dict(family),
                "metrics": {
                    name: {
                        "value": m.get(name),
                        "ci": [m[f"{name}_ci_lo"], m[f"{name}_ci_hi"]]
                        if f"{name}_ci_lo" in m and f"{name}_ci_hi" in m
                        else None,
                    }
                    for name in metrics
                },
            }
        )
        other = r.data.tags.get("judge_hash")
        if other != judge and any(name in JUDGED_METRICS for name in metrics):
            out[-1]["other_judge"] = other
            for name in JUDGED_METRICS:
                if name in metrics:
                    out[-1]["metrics"][name] = {"value": None, "ci": None}
    out.sort(key=lambda h: (h["time"], h["start"]))
    return out
