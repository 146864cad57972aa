"""Aggregate per-entry scores into a summary: means (null over an empty set), counts, 95% intervals with the
method that made each, and breakdowns per library, per library@version and per kind (an interval per group
only from :data:`~doceval.scoring.intervals.MIN_N_BREAKDOWN` entries up: below it a group says so)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from doceval.scoring.intervals import MIN_N_BREAKDOWN, interval
from doceval.scoring.metrics import mean_or_none


def column(rows: Sequence[Mapping[str, Any]], metric: str) -> np.ndarray:
    """A metric's per-entry values as floats, NaN where it does not apply (null in JSON)."""
    return np.array(
        [np.nan if (v := r["scores"].get(metric)) is None else float(v) for r in rows], dtype=np.float64
    )


class _Intervals:
    """The interval settings of one aggregation (the summary's ``metrics.intervals`` block)."""

    def __init__(self, binary_method: str, n_boot: int, seed: int) -> None:
        self.binary_method, self.n_boot, self.seed = binary_method, n_boot, seed

    def of(self, values: np.ndarray, metric: str) -> tuple[list[float] | None, str | None]:
        ci = interval(
            values,
            binary_method=self.binary_method,
            n_boot=self.n_boot,
            seed=self.seed,
        )
        return (None, None) if ci is None else ([float(ci.lo), float(ci.hi)], ci.method)


def _block(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], cis: _Intervals) -> dict[str, Any]:
    out: dict[str, Any] = {m: mean_or_none(column(rows, m)) for m in keys}
    out["n"] = len(rows)
    out["n_in_scope"] = sum(not r["out_of_scope"] for r in rows)
    out["n_out_of_scope"] = sum(bool(r["out_of_scope"]) for r in rows)
    ci95: dict[str, list[float] | None] = {}
    too_few: list[str] = []
    for m in keys:
        values = column(rows, m)
        n = int((~np.isnan(values)).sum())
        if n == 0:
            ci95[m] = None
        elif n < MIN_N_BREAKDOWN:
            ci95[m] = None  # a handful of entries: an interval would claim more than they can say
            too_few.append(m)
        else:
            ci95[m] = cis.of(values, m)[0]
    out["ci95"] = ci95
    out["too_few"] = too_few
    return out


def aggregate(
    rows: Sequence[Mapping[str, Any]],
    keys: Sequence[str],
    seed: int = 0,
    n_boot: int = 1000,
    binary_method: str = "midp",
) -> dict[str, Any]:
    cis = _Intervals(binary_method, n_boot, seed)
    metrics: dict[str, Any] = {m: mean_or_none(column(rows, m)) for m in keys}
    metrics["counts"] = {
        "n_entries": len(rows),
        "n_in_scope": sum(not r["out_of_scope"] for r in rows),
        "n_out_of_scope": sum(bool(r["out_of_scope"]) for r in rows),
        **{f"n_{m}": int((~np.isnan(column(rows, m))).sum()) for m in keys},
    }
    ci95: dict[str, list[float] | None] = {}
    ci_method: dict[str, str | None] = {}
    for m in keys:
        ci95[m], ci_method[m] = cis.of(column(rows, m), m)
    metrics["ci95"] = ci95
    metrics["ci_method"] = ci_method
    metrics["intervals"] = {
        "level": 0.95,
        "binary": binary_method,
        "continuous": "bca",
        "bootstrap": n_boot,
        "seed": seed,
        "min_n_breakdown": MIN_N_BREAKDOWN,
    }
    for name, key in (("by_library", "library"), ("by_pin", None), ("by_kind", "kind")):
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for r in rows:
            label = f"{r['library']}@{r['version']}" if key is None else str(r[key])
            groups.setdefault(label, []).append(r)
        metrics[name] = {label: _block(group, keys, cis) for label, group in sorted(groups.items())}
    return metrics
