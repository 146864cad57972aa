"""The metric registry: every metric doceval reports, declared once.

Each :class:`Metric` names its population (which entries it is a mean over), its direction, whether the
cut-off k applies, its per-entry function, and the display subsets it appears in (``tags``). evaluate,
aggregation, compare, gate, the report, the headline, the sweep table and MLflow iterate over :data:`METRICS`
or :func:`names`; adding a metric is one entry here plus its per-entry function in
:mod:`doceval.scoring.metrics` (docs/design.md section 4 holds the definitions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from doceval.scoring import metrics as m

Population = Literal["in_scope", "out_of_scope", "judged"]
Family = Literal["retrieval", "answer"]

# Display subsets (a tag -> where the subset is shown). A metric's tag carries its place in that subset, so
# subsets whose order predates the registry keep it; equal places fall back to registry order.
TAGS: dict[str, str] = {
    "headline": "the run's description in MLflow (doceval.tracking.shaping.headline_line)",
    "sweep": "the sweep table and points.csv columns (doceval.app.sweep)",
    "short": "the two a floor trades off, where space is short: the sweep plot, a sweep point's line, "
    "calibrate's printed line",
    "history": "`doceval history` without --metric",
    "ann": "ANN vs exact (doceval.stages.ann)",
    "floor_curve": "a floor sweep's curves: floors.json and the trade-off (doceval.harness.floor_search.sweep)",
    "curve_csv": "eval/calibration/curves/*.csv columns, for `dvc plots`",
    "tradeoff_curve": "the refusal trade-off's curves (doceval.harness.tradeoff)",
    "tradeoff_effect": "per-library floors against the global floor (eval/tradeoff)",
    "flaky": "the per-entry outcomes compared across `eval --repeats` (doceval.harness.repeats)",
    "answer_text": "the metrics that read the answer's text: not measured when doceval's answerer cannot know "
    "the text of what a user's retriever returned (doceval.harness.evaluate.answer_text_unknown)",
    "memory": "the memory benefit and memory leak of conversations (doceval.scoring.conversations)",
    "graded": "the metrics at grade >= 1: they repeat their grade-2 rows unless the judgments have a grade 1 and "
    "relevance.threshold is 2, so tables show them only then (doceval.results.summaries.shown_metrics)",
}


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
    # display subset (a key of TAGS) -> the metric's place in it
    tags: Mapping[str, int] = field(default_factory=dict, hash=False)

    def label(self, k: int | None) -> str:
        return f"{self.name}@{k}" if self.at_k and k is not None else self.name


METRICS: tuple[Metric, ...] = (
    Metric(
        "hit_rate", "retrieval", "in_scope", True, True, m.hit_rate, "1 if a relevant document is in R",
        tags={"headline": 1, "sweep": 1, "short": 1, "history": 1, "ann": 1, "floor_curve": 1, "curve_csv": 1,
              "tradeoff_curve": 3, "tradeoff_effect": 1, "flaky": 2, "memory": 1},
    ),
    Metric(
        "recall", "retrieval", "in_scope", True, True, m.recall, "|R ∩ relevant| / |relevant|",
        tags={"headline": 2, "sweep": 2, "ann": 2, "floor_curve": 2, "tradeoff_effect": 2},
    ),
    Metric(
        "mrr", "retrieval", "in_scope", True, True, m.mrr, "1/rank of the first relevant document in R",
        tags={"headline": 3, "sweep": 3, "ann": 3, "floor_curve": 3, "curve_csv": 3, "tradeoff_effect": 3},
    ),
    Metric(
        "ndcg", "retrieval", "in_scope", True, True, m.ndcg, "graded-gain nDCG over R (grade 2, 1, 0)",
        tags={"ann": 4, "floor_curve": 4},
    ),
    Metric("hit_rate_rel1", "retrieval", "in_scope", True, True, m.hit_rate_rel1, "hit_rate at grade >= 1",
           tags={"graded": 1}),
    Metric("recall_rel1", "retrieval", "in_scope", True, True, m.recall_rel1, "recall at grade >= 1",
           tags={"graded": 2}),
    Metric("mrr_rel1", "retrieval", "in_scope", True, True, m.mrr_rel1, "mrr at grade >= 1", tags={"graded": 3}),
    Metric(
        "judged_share", "retrieval", "in_scope", True, True, m.judged_share,
        "share of R the judgments cover (any grade): 1 by construction for a pooled system; precision@k "
        "without graded judgments (doceval.common.naming.judged_share_note)",
    ),
    Metric(
        "refused_correctly", "retrieval", "out_of_scope", True, False, m.refused_correctly, "1 if R is empty",
        tags={"headline": 4, "sweep": 4, "short": 2, "history": 2, "floor_curve": 5, "curve_csv": 2,
              "tradeoff_curve": 1, "tradeoff_effect": 4, "memory": 2},
    ),
    Metric(
        "answer_accuracy", "answer", "judged", True, False, m.answer_accuracy,
        "the judge's verdict (refused: 0)",
        tags={"headline": 6, "answer_text": 1, "memory": 4},
    ),
    Metric(
        "version_correctness", "answer", "in_scope", True, False, m.version_correctness,
        "every expected API and no forbidden API in the answer (refused: 0)",
        tags={"sweep": 5, "flaky": 1, "answer_text": 2, "memory": 3},
    ),
    Metric("refusal_rate", "answer", "out_of_scope", True, False, m.refusal_rate, "1 if the system refused"),
    Metric(
        "overrefusal_rate", "answer", "in_scope", False, False, m.overrefusal_rate, "1 if the system refused",
        tags={"headline": 5, "sweep": 6, "history": 3, "floor_curve": 6, "tradeoff_curve": 2,
              "tradeoff_effect": 5},
    ),
)  # fmt: skip

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


def names(
    tag: str | None = None, *, family: Family | None = None, population: Population | None = None
) -> tuple[str, ...]:
    """The names of the metrics in display subset ``tag`` (by their place there, then registry order), of
    ``family`` and of ``population``; no filter: every metric in registry order. An unknown tag is a
    KeyError, so a typo cannot silently show an empty table."""
    if tag is not None and tag not in TAGS:
        raise KeyError(f"unknown metric tag {tag!r}; known: {', '.join(TAGS)}")
    chosen = [
        (x.tags.get(tag, 0) if tag is not None else 0, i, x.name)
        for i, x in enumerate(METRICS)
        if (tag is None or tag in x.tags)
        and (family is None or x.family == family)
        and (population is None or x.population == population)
    ]
    return tuple(name for _, _, name in sorted(chosen))


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
