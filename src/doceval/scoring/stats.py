"""Seeded bootstrap intervals for per-entry metric arrays (single-sample and paired) and win/tie/loss counts.

All functions take per-entry float arrays where NaN means "does not apply" (see :mod:`doceval.scoring.metrics`)
and ignore NaN. Resampling is vectorised (an index matrix per chunk) and driven by
``numpy.random.default_rng(seed)``, so the same inputs and seed always give the same interval.
"""

from __future__ import annotations

import numpy as np

__all__ = ["bootstrap_ci", "paired_bootstrap_ci", "win_tie_loss"]

# Upper bound on the resampling index matrix (elements per chunk), to keep memory bounded (~80 MB of int64)
# for large golden sets without giving up vectorisation.
_MAX_CHUNK_ELEMENTS = 10_000_000


def _check(n_boot: int, alpha: float) -> None:
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def _finite(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).ravel()
    return v[~np.isnan(v)]


def _percentile_interval(x: np.ndarray, n_boot: int, seed: int, alpha: float) -> tuple[float, float] | None:
    m = x.size
    if m == 0:
        return None
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot, dtype=np.float64)
    rows = max(1, _MAX_CHUNK_ELEMENTS // m)
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        idx = rng.integers(0, m, size=(stop - start, m))
        means[start:stop] = x[idx].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2.0, 1.0 - alpha / 2.0])
    return float(lo), float(hi)


def bootstrap_ci(
    values: np.ndarray, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float] | None:
    """Percentile bootstrap (1 - alpha) interval of the mean over the non-NaN values; None if none."""
    _check(n_boot, alpha)
    return _percentile_interval(_finite(values), n_boot, seed, alpha)


def _paired(base: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(base, dtype=np.float64)
    w = np.asarray(new, dtype=np.float64)
    if b.shape != w.shape:
        raise ValueError(f"base and new must be aligned per entry, got shapes {b.shape} and {w.shape}")
    both = ~(np.isnan(b) | np.isnan(w))
    return b[both], w[both]


def paired_bootstrap_ci(
    base: np.ndarray, new: np.ndarray, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float] | None:
    """Percentile bootstrap interval for mean(new - base) over entries where both are non-NaN.

    Resampling the per-entry differences keeps the pairing, so the interval reflects only the change, not
    the spread of entry difficulty. None when no entry has both values.
    """
    _check(n_boot, alpha)
    b, w = _paired(base, new)
    return _percentile_interval(w - b, n_boot, seed, alpha)


def win_tie_loss(base: np.ndarray, new: np.ndarray) -> tuple[int, int, int]:
    """(wins, ties, losses) of new against base over entries where both are non-NaN."""
    b, w = _paired(base, new)
    return int((w > b).sum()), int((w == b).sum()), int((w < b).sum())
