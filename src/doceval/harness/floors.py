"""Floors: decision thresholds on the retriever's own score, applied per library, and their calibration.

A floor is calibrated on the calibration split only and stored as an artifact with its provenance; a run that
reports on the split its floors were calibrated on is refused (train-on-test guard).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from doceval.common.io import read_json
from doceval.errors import UsageError
from doceval.inputs.golden import GoldenEntry
from doceval.scoring.metrics import CandidateMatrix, mean_or_none, retrieval_scores


@dataclass
class Floors:
    global_floor: float
    per_library: dict[str, float] = field(default_factory=dict)
    source: str = "config"  # config | cli | calibrated:<path>
    provenance: dict[str, Any] = field(default_factory=dict)

    def of(self, library: str) -> float:
        return self.per_library.get(library, self.global_floor)

    def vector(self, entries: Sequence[GoldenEntry]) -> np.ndarray:
        return np.array([self.of(e.library) for e in entries], dtype=np.float64)

    def as_dict(self) -> dict[str, Any]:
        return {
            "global": self.global_floor,
            "per_library": dict(sorted(self.per_library.items())),
            "source": self.source,
            "provenance": self.provenance,
        }


def parse_floor_flags(values: Sequence[str]) -> dict[str, float]:
    """``--floor LIB=VALUE`` (repeatable) -> {lib: value}; a malformed flag is a UsageError naming it."""
    out: dict[str, float] = {}
    for raw in values:
        lib, sep, num = raw.partition("=")
        if not sep or not lib.strip() or not num.strip():
            raise UsageError(f"--floor {raw!r}: expected LIB=VALUE, e.g. --floor pydantic=0.35")
        try:
            out[lib.strip().lower()] = float(num)
        except ValueError as exc:
            raise UsageError(
                f"--floor {raw!r}: {num!r} is not a number; expected LIB=VALUE, e.g. pydantic=0.35"
            ) from exc
    return out


def check_floors(
    floors: Floors, libraries: Sequence[str], score_range: Sequence[float], retriever: str
) -> None:
    """Every per-library floor names an indexed library and every floor lies in the retriever's score range."""
    unknown = sorted(set(floors.per_library) - set(libraries))
    if unknown:
        raise UsageError(
            f"--floor: {', '.join(unknown)} not in the corpus; known libraries: {', '.join(sorted(libraries))}"
        )
    low, high = float(score_range[0]), float(score_range[1])
    for name, value in [
        ("--score-floor / floors.global", floors.global_floor),
        *((f"--floor {lib}", v) for lib, v in floors.per_library.items()),
    ]:
        if not (low <= value <= high) or math.isnan(value):
            raise UsageError(
                f"{name}={value}: outside the {retriever} retriever's score range [{low}, {high}]; "
                "pick a floor inside it"
            )


def load_calibrated(
    path: Path, report_split: str | None, retriever: Mapping[str, Any] | None = None
) -> Floors:
    """Floors from a calibration artifact; refuses floors calibrated on the split being reported, and floors
    calibrated for another retriever (a cosine floor means nothing on a BM25 score)."""
    data = read_json(path, "calibrated floors", rerun="dvc repro calibrate")
    try:
        prov = data["provenance"]
        floors = Floors(
            float(data["global"]),
            {k: float(v) for k, v in data["per_library"].items()},
            source=f"calibrated:{path}",
            provenance=prov,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise UsageError(f"{path}: not a floors artifact ({exc}); rerun `dvc repro calibrate`") from exc
    calibrated_for = prov.get("retriever")
    if retriever is not None and calibrated_for is not None and dict(calibrated_for) != dict(retriever):
        raise UsageError(
            f"{path}: floors were calibrated for retriever {calibrated_for}, not {dict(retriever)}; their scores "
            "are on another scale. Calibrate for this retriever (`dvc exp run -S retriever=NAME` reruns "
            "calibrate), or choose floors explicitly (floors=zero, --score-floor, --floor LIB=VALUE)."
        )
    calibrated_on = prov.get("split")
    if report_split is None or calibrated_on is None or calibrated_on == report_split:
        raise UsageError(
            f"{path}: floors were calibrated on split {calibrated_on!r}; refusing to report on split "
            f"{report_split!r} with them (train-on-test). Report on the held-out split (e.g. split=test), "
            "or calibrate on another split."
        )
    return floors


def resolve_floors(
    floors_cfg: Mapping[str, Any],
    report_split: str | None,
    score_floor: float | None = None,
    floor_flags: Mapping[str, float] | None = None,
    retriever: Mapping[str, Any] | None = None,
) -> Floors:
    """The effective floors: calibrated artifact or config, then CLI flags on top (never written back)."""
    if floors_cfg.get("source") == "calibrated" and score_floor is None and not floor_flags:
        floors = load_calibrated(Path(str(floors_cfg["path"])), report_split, retriever)
    else:
        floors = Floors(
            float(floors_cfg.get("global", 0.0)),
            {str(k).lower(): float(v) for k, v in (floors_cfg.get("per_library") or {}).items()},
        )
        floors.source = "config"
    if score_floor is not None:
        floors.global_floor = float(score_floor)
        floors.source = "cli"
    if floor_flags:
        floors.per_library.update(floor_flags)
        floors.source = "cli"
    return floors


# ------------------------------------------------------------------------------------------- calibration

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


OBJECTIVES: dict[str, Objective] = {
    "decision_accuracy": _decision_accuracy,
    "hit_rate+refused_correctly": _objective("hit_rate"),
    "mrr+refused_correctly": _objective("mrr"),
    "recall+refused_correctly": _objective("recall"),
}


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


def sweep(
    matrix: CandidateMatrix, out_of_scope: np.ndarray, floors: np.ndarray, k: int
) -> dict[str, np.ndarray]:
    """hit_rate, mrr, recall, ndcg (over in-scope) and refused_correctly (over out-of-scope) at each floor."""
    rows: dict[str, list[float]] = {m: [] for m in ("hit_rate", "recall", "mrr", "ndcg", "refused_correctly")}
    n = len(out_of_scope)
    for value in floors:
        per = retrieval_scores(matrix, np.full(n, value), k)
        for m in ("hit_rate", "recall", "mrr", "ndcg"):
            rows[m].append(float("nan") if (v := mean_or_none(per[m][~out_of_scope])) is None else v)
        refused = per["refused"][out_of_scope].astype(np.float64)
        rows["refused_correctly"].append(float("nan") if not len(refused) else float(refused.mean()))
    return {m: np.array(v) for m, v in rows.items()}


def calibrate_library(
    library: str,
    matrix: CandidateMatrix,
    out_of_scope: np.ndarray,
    k: int,
    objective: str,
    low: float,
    plot_grid: np.ndarray,
) -> LibraryCalibration:
    if objective not in OBJECTIVES:
        raise UsageError(
            f"calibration.objective={objective!r} is not known; choose one of: {', '.join(OBJECTIVES)}"
        )
    fn = OBJECTIVES[objective]
    grid = candidate_floors(matrix, out_of_scope, low)
    n = len(out_of_scope)
    values = np.array([fn(retrieval_scores(matrix, np.full(n, f), k), out_of_scope) for f in grid])
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
        **{m: v.tolist() for m, v in sweep(matrix, out_of_scope, plot_grid, k).items()},
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
