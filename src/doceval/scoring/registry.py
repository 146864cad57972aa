"""The metric registry: every metric doceval reports, defined once.

Each :class:`Metric` names its population (which entries it is a mean over), its direction, whether the
cut-off k applies, and its per-entry function. evaluate, aggregation, compare, gate, the report, the headline
and MLflow iterate over :data:`METRICS`; adding a metric is one entry here plus its per-entry function in
:mod:`doceval.scoring.metrics` (docs/design.md section 4 holds the definitions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from doceval.scoring import metrics as m

Population = Literal["in_scope", "out_of_scope", "judged"]
Family = Literal["retrieval", "answer"]


@dataclass(frozen=True)
class Metric:
    name: str  # the key in summaries, metrics.json, MLflow and the gate config
    family: Family  # retrieval: from the ranked list after floors and k; answer: from the system's answer
    population: Population  # the entries it is a mean over (scope always from the label)
    higher_is_better: bool
    at_k: bool  # the cut-off k applies (reported as NAME@k)
    per_entry: Callable[
        [Any], np.ndarray
    ]  # a RetrievalView or AnswerView -> float (n,), NaN = not applicable
    description: str

    def label(self, k: int | None) -> str:
        return f"{self.name}@{k}" if self.at_k and k is not None else self.name


METRICS: tuple[Metric, ...] = (
    Metric("hit_rate", "retrieval", "in_scope", True, True, m.hit_rate, "1 if a relevant document is in R"),
    Metric("recall", "retrieval", "in_scope", True, True, m.recall, "|R ∩ relevant| / |relevant|"),
    Metric(
        "mrr",
        "retrieval",
        "in_scope",
        True,
        True,
        m.mrr,
        "1/rank of the first relevant document in R",
    ),
    Metric("ndcg", "retrieval", "in_scope", True, True, m.ndcg, "graded-gain nDCG over R (grade 2, 1, 0)"),
    Metric("hit_rate_rel1", "retrieval", "in_scope", True, True, m.hit_rate_rel1, "hit_rate at grade >= 1"),
    Metric("recall_rel1", "retrieval", "in_scope", True, True, m.recall_rel1, "recall at grade >= 1"),
    Metric("mrr_rel1", "retrieval", "in_scope", True, True, m.mrr_rel1, "mrr at grade >= 1"),
    Metric("judged_share", "retrieval", "in_scope", True, True, m.judged_share, "share of R that was judged"),
    Metric(
        "refused_correctly", "retrieval", "out_of_scope", True, False, m.refused_correctly, "1 if R is empty"
    ),
    Metric(
        "answer_accuracy",
        "answer",
        "judged",
        True,
        False,
        m.answer_accuracy,
        "the judge's verdict (refused: 0)",
    ),
    Metric(
        "version_correctness",
        "answer",
        "in_scope",
        True,
        False,
        m.version_correctness,
        "every expected API and no forbidden API in the answer (refused: 0)",
    ),
    Metric("refusal_rate", "answer", "out_of_scope", True, False, m.refusal_rate, "1 if the system refused"),
    Metric(
        "overrefusal_rate", "answer", "in_scope", False, False, m.overrefusal_rate, "1 if the system refused"
    ),
)

BY_NAME: dict[str, Metric] = {metric.name: metric for metric in METRICS}
METRIC_NAMES: tuple[str, ...] = tuple(BY_NAME)
RETRIEVAL_NAMES: tuple[str, ...] = tuple(x.name for x in METRICS if x.family == "retrieval")
ANSWER_NAMES: tuple[str, ...] = tuple(x.name for x in METRICS if x.family == "answer")
AT_K_NAMES: tuple[str, ...] = tuple(x.name for x in METRICS if x.at_k)
LOWER_IS_BETTER: frozenset[str] = frozenset(x.name for x in METRICS if not x.higher_is_better)


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
