"""How well a per-question score tells answerable from out-of-scope questions: the AUROC (the probability that
a random answerable question scores above a random out-of-scope one, ties counting half: the Mann-Whitney
statistic) with a stratified percentile bootstrap interval, and the refusal curve a floor moves along."""

from __future__ import annotations

import numpy as np


def auroc(answerable: np.ndarray, out_of_scope: np.ndarray) -> float | None:
    """P(score of an answerable question > score of an out-of-scope one) + half the ties; None when a side is
    empty. ``-inf`` (nothing retrieved) is a valid, lowest score."""
    pos, neg = np.asarray(answerable, dtype=np.float64), np.asarray(out_of_scope, dtype=np.float64)
    if not len(pos) or not len(neg):
        return None
    both = np.concatenate([pos, neg])
    order = np.argsort(both, kind="mergesort")
    ranks = np.empty(len(both), dtype=np.float64)
    sorted_vals = both[order]
    # average ranks for ties (1-based)
    i = 0
    while i < len(both):
        j = i
        while j + 1 < len(both) and sorted_vals[j + 1] == sorted_vals[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    u = ranks[: len(pos)].sum() - len(pos) * (len(pos) + 1) / 2
    return float(u / (len(pos) * len(neg)))


def auroc_interval(
    answerable: np.ndarray, out_of_scope: np.ndarray, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float] | None:
    """Percentile bootstrap, resampling each side on its own (the class sizes stay fixed); None below 2 per side."""
    pos, neg = np.asarray(answerable, dtype=np.float64), np.asarray(out_of_scope, dtype=np.float64)
    if len(pos) < 2 or len(neg) < 2:
        return None
    rng = np.random.default_rng(seed)
    # Vectorised: compare every resampled pair through the pairwise win matrix of the original samples.
    wins = (pos[:, None] > neg[None, :]).astype(np.float64) + 0.5 * (pos[:, None] == neg[None, :])
    values = np.empty(n_boot)
    for b in range(n_boot):
        i = rng.integers(0, len(pos), len(pos))
        j = rng.integers(0, len(neg), len(neg))
        values[b] = wins[np.ix_(i, j)].mean()
    lo, hi = np.quantile(values, [alpha / 2, 1 - alpha / 2])
    return float(lo), float(hi)
