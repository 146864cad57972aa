"""Calibrating floors: the objectives (operating points with targets, in words, and sums or shares to maximise)
and the exact per-library sweep over candidate floors, on the retriever's scores or a per-question signal
(docs/design.md section 5.3). :mod:`doceval.harness.floors` holds the floors themselves and their guards."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from doceval.config.schema import OBJECTIVE_NAMES
from doceval.errors import UsageError
from doceval.scoring.metrics import CandidateMatrix, mean_or_none
from doceval.scoring.registry import get, names, retrieval_scores

Objective = Callable[[dict[str, np.ndarray], np.ndarray], float]


def _mean0(values: np.ndarray) -> float:
    m = mean_or_none(values)
    return 0.0 if m is None else m


def _objective(retrieval_metric: str) -> Objective:
    def score(per_entry: dict[str, np.ndarray], out_of_scope: np.ndarray) -> float:
        refused = per_entry["refused"].astype(np.float64)
        in_scope = per_entry[retrieval_metric][~out_of_scope]
        return _mean0(in_scope) + _mean0(refused[out_of_scope])

    return score


def _decision_accuracy(per_entry: dict[str, np.ndarray], out_of_scope: np.ndarray) -> float:
    """Share of all entries decided right (in scope: a hit; out of scope: refused), so each side counts by its
    prevalence instead of the two means weighing the same."""
    right = np.where(out_of_scope, per_entry["refused"], per_entry["hit_rate"] == 1.0)
    return float(right.mean()) if len(right) else 0.0


def _rates(per_entry: dict[str, np.ndarray], out_of_scope: np.ndarray) -> tuple[float, float]:
    """(refused_correctly, overrefusal_rate) at one floor: refusals among out-of-scope and in-scope entries."""
    refused = per_entry["refused"].astype(np.float64)
    return _mean0(refused[out_of_scope]), _mean0(refused[~out_of_scope])


def _max_refusal_at_overrefusal(target: float) -> Objective:
    """Refuse as many out-of-scope questions as possible while wrongly refusing at most ``target`` of the
    answerable ones. Infeasible floors score below every feasible one, the least violation first."""

    def score(per_entry: dict[str, np.ndarray], out_of_scope: np.ndarray) -> float:
        refused_correctly, overrefusal = _rates(per_entry, out_of_scope)
        if overrefusal <= target + 1e-12:
            return refused_correctly
        return -1.0 - (overrefusal - target)

    return score


def _min_overrefusal_at_refusal(target: float) -> Objective:
    """Wrongly refuse as few answerable questions as possible while refusing at least ``target`` of the
    out-of-scope ones (the mirror)."""

    def score(per_entry: dict[str, np.ndarray], out_of_scope: np.ndarray) -> float:
        refused_correctly, overrefusal = _rates(per_entry, out_of_scope)
        if refused_correctly >= target - 1e-12:
            return 1.0 - overrefusal
        return -1.0 - (target - refused_correctly)

    return score


# Objectives with a target (the operating points teams state) and without (a sum or a share to maximise).
OBJECTIVES: dict[str, Objective] = {
    "max_refusal_at_overrefusal": _max_refusal_at_overrefusal(0.10),
    "min_overrefusal_at_refusal": _min_overrefusal_at_refusal(0.90),
    "decision_accuracy": _decision_accuracy,
    "hit_rate+refused_correctly": _objective("hit_rate"),
    "mrr+refused_correctly": _objective("mrr"),
    "recall+refused_correctly": _objective("recall"),
}
if tuple(OBJECTIVES) != OBJECTIVE_NAMES:  # one list of names: the config validates against the schema's
    raise ImportError(
        "doceval.harness.floor_search.OBJECTIVES and doceval.config.schema.OBJECTIVE_NAMES differ"
    )


def make_objective(
    name: str, max_overrefusal: float = 0.10, min_refused_correctly: float = 0.90
) -> Objective:
    """The named objective, its target applied; an unknown name or a target outside [0, 1] exits 2."""
    if name not in OBJECTIVES:
        raise UsageError(
            f"calibration.objective={name!r} is not known; choose one of: {', '.join(OBJECTIVES)}"
        )
    for key, value in (
        ("max_overrefusal", max_overrefusal),
        ("min_refused_correctly", min_refused_correctly),
    ):
        if not 0.0 <= value <= 1.0:
            raise UsageError(f"calibration.{key}={value}: a rate, must be in [0, 1]")
    if name == "max_refusal_at_overrefusal":
        return _max_refusal_at_overrefusal(max_overrefusal)
    if name == "min_overrefusal_at_refusal":
        return _min_overrefusal_at_refusal(min_refused_correctly)
    return OBJECTIVES[name]


def describe_operating_point(
    name: str, max_overrefusal: float = 0.10, min_refused_correctly: float = 0.90
) -> str:
    """The objective in the words a team would use."""
    if name == "max_refusal_at_overrefusal":
        return (
            f"floors chosen to refuse as many out-of-scope questions as possible while wrongly refusing at "
            f"most {max_overrefusal:.0%} of answerable ones"
        )
    if name == "min_overrefusal_at_refusal":
        return (
            f"floors chosen to wrongly refuse as few answerable questions as possible while refusing at "
            f"least {min_refused_correctly:.0%} of out-of-scope ones"
        )
    if name == "decision_accuracy":
        return "floors chosen to decide the most entries right (a hit when answerable, a refusal otherwise)"
    metric = name.split("+")[0]
    return f"floors chosen to maximise {metric} on answerable questions plus refused_correctly on the others"


def candidate_floors(matrix: CandidateMatrix, out_of_scope: np.ndarray, low: float) -> np.ndarray:
    """Every floor at which the objective can change, so the sweep is exact rather than a grid.

    R is a score-sorted prefix, so a floor changes the outcome only when it crosses the top score of an entry
    (refusal) or a relevant document's score (hit/recall/rank). Each such value is tried as a floor that keeps
    it and as the next float up, which drops it.
    """
    finite = np.isfinite(matrix.scores)
    tops = matrix.scores[:, 0][finite[:, 0]]
    rel = matrix.scores[matrix.relevant & finite]
    values = np.unique(np.concatenate([tops, rel]))
    # The floor that keeps everything: the retriever's lowest score, or (a user's function, scores on any
    # scale: low is -inf) the float just below the lowest score seen, so a floors artifact stays strict JSON.
    if not np.isfinite(low):
        low = float(np.nextafter(values.min(), -np.inf)) if len(values) else 0.0
    return np.unique(np.concatenate([[low], values, np.nextafter(values, np.inf)]))


@dataclass
class LibraryCalibration:
    library: str
    floor: float
    objective: float
    n_in_scope: int
    n_out_of_scope: int
    separable: bool
    in_scope_top: list[float]
    out_of_scope_top: list[float]
    curve: dict[str, list[float]]


def floor_vector(value: float, n: int, signal: np.ndarray | None = None) -> np.ndarray:
    """One floor as per-entry floors on the candidates' scores: the value itself (a floor on scores), or for a
    per-question ``signal`` -inf where the signal reaches it (keep the top k) and +inf elsewhere (refuse)."""
    if signal is None:
        return np.full(n, value)
    return np.where(signal >= value, -np.inf, np.inf)


CURVE = names("floor_curve")
# The curve's in-scope retrieval metrics are means over the answerable entries; its two refusal metrics
# (refused_correctly, overrefusal_rate) are shares of refusals, computed below from R being empty.
_IN_SCOPE_CURVE = tuple(m for m in CURVE if get(m).family == "retrieval" and get(m).population == "in_scope")


def sweep(
    matrix: CandidateMatrix,
    out_of_scope: np.ndarray,
    floors: np.ndarray,
    k: int,
    signal: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """hit_rate, mrr, recall, ndcg (over in-scope), refused_correctly (over out-of-scope) and overrefusal_rate
    (over in-scope) at each floor (on scores, or on a per-question ``signal``)."""
    rows: dict[str, list[float]] = {m: [] for m in CURVE}
    n = len(out_of_scope)
    for value in floors:
        per = retrieval_scores(matrix, floor_vector(value, n, signal), k)
        for m in _IN_SCOPE_CURVE:
            rows[m].append(float("nan") if (v := mean_or_none(per[m][~out_of_scope])) is None else v)
        refused = per["refused"].astype(np.float64)
        rows["refused_correctly"].append(
            float(refused[out_of_scope].mean()) if out_of_scope.any() else float("nan")
        )
        rows["overrefusal_rate"].append(
            float(refused[~out_of_scope].mean()) if (~out_of_scope).any() else float("nan")
        )
    return {m: np.array(v) for m, v in rows.items()}


def calibrate_library(
    library: str,
    matrix: CandidateMatrix,
    out_of_scope: np.ndarray,
    k: int,
    objective: str,
    low: float,
    plot_grid: np.ndarray,
    fn: Objective | None = None,
    signal: np.ndarray | None = None,
) -> LibraryCalibration:
    """``fn``: the objective with its target (:func:`make_objective`); None: ``objective``'s default.
    ``signal``: a per-question signal the floor applies to (None: the candidates' scores)."""
    if fn is None:
        fn = make_objective(objective)
    if signal is None:
        grid = candidate_floors(matrix, out_of_scope, low)
    else:  # the outcome changes only where the floor crosses an entry's signal
        finite = np.unique(signal[np.isfinite(signal)])
        grid = np.unique(
            np.concatenate([[finite.min() if len(finite) else 0.0], finite, np.nextafter(finite, np.inf)])
        )
    n = len(out_of_scope)
    values = np.array(
        [fn(retrieval_scores(matrix, floor_vector(f, n, signal), k), out_of_scope) for f in grid]
    )
    best = int(np.flatnonzero(values >= values.max() - 1e-12)[0])  # ties -> the lowest floor
    top = np.where(np.isfinite(matrix.scores[:, 0]), matrix.scores[:, 0], np.nan)
    # Best score of a relevant document within the first k: what a floor must keep for a hit.
    rel_scores = np.where(matrix.relevant[:, :k], matrix.scores[:, :k], -np.inf).max(axis=1, initial=-np.inf)
    hits = rel_scores[~out_of_scope]
    hits = hits[np.isfinite(hits)]
    oos_top = top[out_of_scope]
    oos_top = oos_top[~np.isnan(oos_top)]
    separable = bool(len(oos_top) == 0 or len(hits) == 0 or oos_top.max() < hits.min())
    curve = {
        "floor": plot_grid.tolist(),
        **{m: v.tolist() for m, v in sweep(matrix, out_of_scope, plot_grid, k, signal).items()},
    }
    return LibraryCalibration(
        library=library,
        floor=float(grid[best]),
        objective=float(values[best]),
        n_in_scope=int((~out_of_scope).sum()),
        n_out_of_scope=int(out_of_scope.sum()),
        separable=separable,
        in_scope_top=_quantiles(hits),
        out_of_scope_top=_quantiles(oos_top),
        curve=curve,
    )


def _quantiles(values: np.ndarray) -> list[float]:
    """min, median, max (empty list when there is nothing to summarise)."""
    if not len(values):
        return []
    return [float(values.min()), float(np.median(values)), float(values.max())]
