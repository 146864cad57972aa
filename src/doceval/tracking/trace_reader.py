"""Reading a run's entry traces back as summary entries (``doceval compare RUN_ID RUN_ID``): the same rows
the MLflow UI shows, checked against the run's summary.json so that a number is right or not printed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from doceval.errors import UsageError
from doceval.scoring.registry import METRIC_NAMES
from doceval.summary import as_summary
from doceval.tracking.traces import ENTRY_TAG, REFUSED, STAGE, TRACES_TAG, VERDICT

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Trace

_PAGE = 500
_SCORE_TOLERANCE = 1e-9


def _entry(trace: Trace, metric_names: frozenset[str]) -> dict[str, Any]:
    """One summary entry from one trace: labels from its tags and expectations, outcomes from its feedback,
    the retrieved documents from its RETRIEVER span."""
    # lazy: start-up (mlflow, seconds; only tracking loads it)
    from mlflow.entities import Expectation, Feedback

    info = trace.info
    tags = info.tags
    library, _, version = tags.get("doceval.pin", "@").partition("@")
    row: dict[str, Any] = {
        "id": tags.get(ENTRY_TAG),
        "split": tags.get("doceval.split"),
        "kind": tags.get("doceval.kind"),
        "library": library,
        "version": version,
        "scores": {},
    }
    for a in info.assessments:
        if isinstance(a, Expectation):
            row[a.name] = a.value
        elif isinstance(a, Feedback):
            value = None if a.error else a.value
            if a.name == REFUSED:
                row["refused"] = value
            elif a.name == STAGE:
                row["stage"] = value
            elif a.name == VERDICT:
                row["verdict"], row["verdict_reason"] = value, a.rationale
            else:  # every other feedback is one of the entry's scores
                row["scores"][a.name] = value
    row.setdefault("out_of_scope", tags.get("doceval.out_of_scope") == "true")
    for span in trace.data.spans:
        if span.parent_id is None:
            inputs = span.inputs or {}
            row["question"] = inputs.get("question")
            row["answer"] = (span.outputs or {}).get("answer")
        elif span.span_type == "RETRIEVER":
            docs = span.outputs or []
            row["retrieved"] = [[d.get("id"), (d.get("metadata") or {}).get("score")] for d in docs]
    for name in metric_names:
        row["scores"].setdefault(name, None)
    return row


def entries_from_traces(client: MlflowClient, run_id: str, experiment_id: str) -> list[dict[str, Any]]:
    """Every entry trace of ``run_id`` as a summary entry (unordered)."""
    names = frozenset(METRIC_NAMES)
    rows: list[dict[str, Any]] = []
    token: str | None = None
    while True:
        page = client.search_traces(
            locations=[experiment_id], run_id=run_id, max_results=_PAGE, page_token=token
        )
        rows += [_entry(t, names) for t in page]
        token = page.token
        if not token:
            return rows


def _same_scores(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    for key in set(a) | set(b):
        x, y = a.get(key), b.get(key)
        if x is None or y is None:
            if x is not y:
                return False
        elif abs(float(x) - float(y)) > _SCORE_TOLERANCE:
            return False
    return True


def with_trace_entries(summary: dict[str, Any], client: MlflowClient, run_id: str) -> dict[str, Any]:
    """``summary`` (the run's summary.json) with its entries read from the run's traces, when it has them.
    The traces must be exactly the summary's entries with the same scores: anything else is a UsageError
    (a run whose traces were deleted or never finished logging cannot be compared silently)."""
    run = client.get_run(run_id)
    expected = run.data.tags.get(TRACES_TAG)
    if expected is None:
        return summary  # logged without traces (tracking.traces=false, or before traces existed)
    rows = entries_from_traces(client, run_id, run.info.experiment_id)
    by_id = {r["id"]: r for r in rows}
    recorded = as_summary(summary).entries
    listed = [e.id for e in recorded]
    fix = f"re-log it (`doceval eval ...`), or compare its summary.json file instead of run {run_id}"
    if len(rows) != int(expected) or len(by_id) != len(rows) or set(by_id) != set(listed):
        raise UsageError(
            f"MLflow run {run_id} has {len(rows)} entry traces for the {len(listed)} entries of its summary "
            f"(tag {TRACES_TAG}={expected}): its traces are incomplete; {fix}"
        )
    for e in recorded:
        if not _same_scores(e.scores, by_id[e.id]["scores"]):
            raise UsageError(
                f"MLflow run {run_id}: the trace of entry {json.dumps(e.id)} disagrees with its summary.json "
                f"scores; {fix}"
            )
    return {**summary, "entries": [by_id[i] for i in listed], "entries_source": f"traces of run {run_id}"}
