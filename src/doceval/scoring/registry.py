"""The metric registry: every metric doceval reports, its declaration (:mod:`doceval.common.metric_names`, numpy-
free) paired with its per-entry function of the same name in :mod:`doceval.scoring.metrics`.

evaluate, aggregation, compare, gate, the report, the headline, the sweep table and MLflow iterate over
:data:`METRICS` or :func:`names`; adding a metric is one entry in doceval.common.metric_names plus its per-entry
function (docs/design.md section 4 holds the definitions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from doceval.common import metric_names as names_module
from doceval.common.metric_names import (
    ANSWER_NAMES,
    AT_K_NAMES,
    LOWER_IS_BETTER,
    METRIC_NAMES,
    RETRIEVAL_NAMES,
    TAGS,
    Family,
    MetricInfo,
    Population,
    names,
)
from doceval.scoring import metrics as m

__all__ = [
    "ANSWER_NAMES",
    "AT_K_NAMES",
    "BY_NAME",
    "LOWER_IS_BETTER",
    "METRICS",
    "METRIC_NAMES",
    "RETRIEVAL_NAMES",
    "TAGS",
    "Family",
    "Metric",
    "Population",
    "answer_scores",
    "get",
    "names",
    "retrieval_scores",
]


@dataclass(frozen=True)
class Metric(MetricInfo):
    """A metric's declaration with its per-entry function: a RetrievalView or AnswerView -> float (n,), NaN = not
    applicable."""

    per_entry: Callable[[Any], np.ndarray] = field(kw_only=True, compare=False)


def _with_function(info: MetricInfo) -> Metric:
    per_entry = getattr(m, info.name, None)
    if not callable(per_entry):  # a declaration without its function: fail at import, not mid-run
        raise ImportError(
            f"metric {info.name!r} is declared in doceval.common.metric_names but "
            f"doceval.scoring.metrics has no function {info.name}()"
        )
    return Metric(**{f.name: getattr(info, f.name) for f in fields(MetricInfo)}, per_entry=per_entry)


METRICS: tuple[Metric, ...] = tuple(_with_function(info) for info in names_module.METRICS)
BY_NAME: dict[str, Metric] = {metric.name: metric for metric in METRICS}


def get(name: str) -> Metric:
    """The metric called ``name``; KeyError lists the known names."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(METRIC_NAMES)}") from None


def retrieval_per_entry(view: m.RetrievalView) -> dict[str, np.ndarray]:
    return {x.name: x.per_entry(view) for x in METRICS if x.family == "retrieval"}


def answer_per_entry(view: m.AnswerView) -> dict[str, np.ndarray]:
    return {x.name: x.per_entry(view) for x in METRICS if x.family == "answer"}


def retrieval_scores(
    matrix: m.CandidateMatrix, floors: np.ndarray, k: int, out_of_scope: np.ndarray | None = None
) -> dict[str, np.ndarray]:
    """Per-entry retrieval metrics at (floors, k): every retrieval metric of the registry, float (n,) with NaN
    where it does not apply, plus "refused" (bool, R is empty) and "n_retrieved" (int)."""
    view = m.RetrievalView.of(matrix, floors, k, out_of_scope)
    return {
        **retrieval_per_entry(view),
        "refused": view.refused,
        "n_retrieved": view.in_R.sum(axis=1).astype(np.int64),
    }


def answer_scores(
    out_of_scope: np.ndarray,
    refused: np.ndarray,
    answers: list[str | None],
    expected: list[list[str]],
    forbidden: list[list[str]],
    verdicts: list[bool | None],
    *,
    judge_ran: bool = True,
    expected_any: list[list[list[str]]] | None = None,
) -> dict[str, np.ndarray]:
    """Per-entry answer metrics of the registry (float (n,), NaN where the metric does not apply).

    Scope comes only from ``out_of_scope``. ``judge_ran=False`` (no judge configured) makes answer_accuracy
    all NaN, so its aggregate is null rather than the 0 the refused entries would give. It is not inferred
    from the verdicts: with a judge configured and every in-scope entry refused, all verdicts are None yet
    the accuracy is genuinely 0.
    """
    return answer_per_entry(
        m.AnswerView(out_of_scope, refused, answers, expected, forbidden, verdicts, judge_ran, expected_any)
    )
