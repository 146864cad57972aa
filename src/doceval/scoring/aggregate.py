"""Aggregate per-entry scores into a summary: means (null over an empty set), counts, 95% bootstrap
intervals, and breakdowns per library, per library@version and per kind."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from doceval.scoring.metrics import mean_or_none
from doceval.scoring.stats import bootstrap_ci


def column(rows: Sequence[Mapping[str, Any]], metric: str) -> np.ndarray:
    """A metric's per-entry values as floats, NaN where it does not apply (null in JSON)."""
    return np.array(
        [np.nan if (v := r["scores"].get(metric)) is None else float(v) for r in rows], dtype=np.float64
    )


def _block(rows: Sequence[Mapping[str, Any]], keys: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {m: mean_or_none(column(rows, m)) for m in keys}
    out["n"] = len(rows)
    out["n_in_scope"] = sum(not r["out_of_scope"] for r in rows)
    out["n_out_of_scope"] = sum(bool(r["out_of_scope"]) for r in rows)
    return out


def aggregate(
    rows: Sequence[Mapping[str, Any]], keys: Sequence[str], seed: int = 0, n_boot: int = 1000
) -> dict[str, Any]:
    metrics: dict[str, Any] = {m: mean_or_none(column(rows, m)) for m in keys}
    metrics["counts"] = {
        "n_entries": len(rows),
        "n_in_scope": sum(not r["out_of_scope"] for r in rows),
        "n_out_of_scope": sum(bool(r["out_of_scope"]) for r in rows),
        **{f"n_{m}": int((~np.isnan(column(rows, m))).sum()) for m in keys},
    }
    metrics["ci95"] = {m: _ci(column(rows, m), n_boot, seed) for m in keys}
    for name, key in (("by_library", "library"), ("by_pin", None), ("by_kind", "kind")):
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for r in rows:
            label = f"{r['library']}@{r['version']}" if key is None else str(r[key])
            groups.setdefault(label, []).append(r)
        metrics[name] = {label: _block(group, keys) for label, group in sorted(groups.items())}
    return metrics


def _ci(values: np.ndarray, n_boot: int, seed: int) -> list[float] | None:
    ci = bootstrap_ci(values, n_boot=n_boot, seed=seed)
    return None if ci is None else [float(ci[0]), float(ci[1])]
