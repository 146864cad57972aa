"""Resampling statistics for per-entry metric arrays: the BCa bootstrap interval of a mean, the paired
sign-flip permutation test and the interval that inverts it, the plain percentile bootstrap (kept as the
reference the coverage benchmark compares against) and win/tie/loss counts.

All functions take per-entry float arrays where NaN means "does not apply" (see :mod:`doceval.scoring.metrics`)
and ignore NaN. Resampling is driven by ``numpy.random.default_rng(seed)``, so the same inputs and seed always
give the same result. :mod:`doceval.scoring.intervals` decides which method each metric gets.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

__all__ = [
    "bca_ci",
    "bootstrap_ci",
    "cluster_bca_ci",
    "cluster_bootstrap_ratios",
    "paired_bootstrap_ci",
    "sign_flip_interval",
    "sign_flip_p",
    "win_tie_loss",
]

# Upper bound on the resampling index matrix (elements per chunk), to keep memory bounded (~80 MB of int64)
# for large golden sets without giving up vectorisation.
_MAX_CHUNK_ELEMENTS = 10_000_000
# Up to this many units the sign-flip interval enumerates every sign vector (2**12 = 4,096) instead of drawing.
SIGN_FLIP_EXACT_UNITS = 12


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


def bootstrap_means(x: np.ndarray, n_boot: int, rng: np.random.Generator) -> np.ndarray:
    """``n_boot`` bootstrap means of ``x``. Per-entry metrics take few distinct values (0 and 1, or 1/rank),
    so a resample is drawn as multinomial counts over the distinct values: the same distribution as drawing
    indices, at a cost of n_boot x (distinct values) instead of n_boot x n."""
    values, counts = np.unique(x, return_counts=True)
    m = x.size
    means = np.empty(n_boot, dtype=np.float64)
    rows = max(1, _MAX_CHUNK_ELEMENTS // max(1, values.size))
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        draws = rng.multinomial(m, counts / m, size=stop - start)
        means[start:stop] = draws @ values / m
    return means


def bca_ci(
    values: np.ndarray, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float] | None:
    """Bias-corrected and accelerated (BCa, Efron 1987) bootstrap interval of the mean over the non-NaN
    values; None if none. The bias correction z0 comes from the share of bootstrap means below the estimate
    (ties count half), the acceleration from the jackknife. It is the percentile interval when z0 = a = 0.
    Callers handle tiny or constant samples first (:mod:`doceval.scoring.intervals`): BCa, like any
    bootstrap, cannot see spread that the sample does not show."""
    _check(n_boot, alpha)
    x = _finite(values)
    m = x.size
    if m == 0:
        return None
    theta = float(x.mean())
    means = bootstrap_means(x, n_boot, np.random.default_rng(seed))
    jack = (theta * m - x) / (m - 1) if m > 1 else None  # leave-one-out means
    return _bca_interval(theta, means, jack, alpha)


def _bca_interval(
    theta: float, draws: np.ndarray, jack: np.ndarray | None, alpha: float
) -> tuple[float, float]:
    """The BCa interval from the bootstrap draws of an estimate ``theta`` and its jackknife values (None: one
    unit, no acceleration): z0 from the share of draws below theta (ties count half), a from the jackknife."""
    n_boot = draws.size
    below = (float((draws < theta).sum()) + 0.5 * float((draws == theta).sum())) / n_boot
    normal = NormalDist()
    z0 = normal.inv_cdf(min(max(below, 0.5 / n_boot), 1.0 - 0.5 / n_boot))
    acc = 0.0
    if jack is not None:
        dev = jack.mean() - jack
        denom = float((dev**2).sum())
        if denom > 0:
            acc = float((dev**3).sum()) / (6.0 * denom**1.5)
    levels = []
    for q in (alpha / 2.0, 1.0 - alpha / 2.0):
        z = normal.inv_cdf(q)
        levels.append(normal.cdf(z0 + (z0 + z) / (1.0 - acc * (z0 + z))))
    lo, hi = np.quantile(draws, levels)
    return float(lo), float(hi)


def cluster_bootstrap_ratios(
    sums: np.ndarray, counts: np.ndarray, n_boot: int, rng: np.random.Generator
) -> np.ndarray:
    """``n_boot`` bootstrap values of sum(sums) / sum(counts) drawing whole clusters (conversations) with
    replacement: cluster i contributes its ``sums[i]`` over its ``counts[i]`` units together, so units of one
    cluster always move together. Every count must be positive."""
    c = sums.size
    ratios = np.empty(n_boot, dtype=np.float64)
    rows = max(1, _MAX_CHUNK_ELEMENTS // max(1, c))
    for start in range(0, n_boot, rows):
        stop = min(n_boot, start + rows)
        draws = rng.multinomial(c, np.full(c, 1.0 / c), size=stop - start).astype(np.float64)
        ratios[start:stop] = (draws @ sums) / (draws @ counts)
    return ratios


def cluster_bca_ci(
    sums: np.ndarray, counts: np.ndarray, n_boot: int = 1000, seed: int = 0, alpha: float = 0.05
) -> tuple[float, float] | None:
    """BCa interval of the mean over units grouped in clusters, sum(sums) / sum(counts), resampling whole
    clusters (:func:`cluster_bootstrap_ratios`); the acceleration from the leave-one-cluster-out jackknife.
    Clusters with no unit are ignored; None when none is left. Turns of one conversation are not independent:
    this is their interval."""
    _check(n_boot, alpha)
    s = np.asarray(sums, dtype=np.float64).ravel()
    n = np.asarray(counts, dtype=np.float64).ravel()
    keep = n > 0
    s, n = s[keep], n[keep]
    c = s.size
    if c == 0:
        return None
    theta = float(s.sum() / n.sum())
    ratios = cluster_bootstrap_ratios(s, n, n_boot, np.random.default_rng(seed))
    jack = (s.sum() - s) / (n.sum() - n) if c > 1 else None  # leave-one-cluster-out means
    return _bca_interval(theta, ratios, jack, alpha)


def sign_flip_p(diffs: np.ndarray, n_perm: int = 20_000, seed: int = 0, exact_max: int = 16) -> float:
    """Two-sided paired permutation (sign-flip) p-value for mean(diffs) = 0 over the non-NaN differences.

    Under no change each difference is as likely positive as negative. With at most ``exact_max`` non-zero
    differences every sign assignment is enumerated (exact); beyond that ``n_perm`` seeded random flips give
    the Monte Carlo p-value (1 + hits) / (1 + n_perm), which never claims 0. No non-zero difference: 1.0.
    """
    d = _finite(diffs)
    d = d[d != 0.0]
    if d.size == 0:
        return 1.0
    observed = abs(float(d.sum())) * (1.0 - 1e-12)  # float slack: an equal sum counts as at least as extreme
    if d.size <= exact_max:
        signs = 1.0 - 2.0 * ((np.arange(2**d.size)[:, None] >> np.arange(d.size)) & 1)
        sums = np.abs(signs @ d)
        return float((sums >= observed).mean())
    rng = np.random.default_rng(seed)
    hits = 0
    rows = max(1, _MAX_CHUNK_ELEMENTS // d.size)
    for start in range(0, n_perm, rows):
        stop = min(n_perm, start + rows)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(stop - start, d.size))
        hits += int((np.abs(signs @ d) >= observed).sum())
    return (1.0 + hits) / (1.0 + n_perm)


def _sign_vectors(units: int, n_flips: int, seed: int) -> np.ndarray:
    """The sign vectors of the sign-flip interval, one per row, the identity (all +1) left out: every other one
    of the 2**units when units <= SIGN_FLIP_EXACT_UNITS (exact), else ``n_flips`` seeded random ones."""
    if units <= SIGN_FLIP_EXACT_UNITS:
        codes = np.arange(1, 2**units)[:, None] >> np.arange(units)
        return 1.0 - 2.0 * (codes & 1)
    return np.random.default_rng(seed).choice(np.array([-1.0, 1.0]), size=(n_flips, units))


def _accepted_hull(lo: np.ndarray, hi: np.ndarray, need: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the least and the greatest shift that lies in at least ``need`` of the closed intervals
    [lo[r, b], hi[r, b]] (each row holds at least ``need`` that share a point)."""
    rows, _ = lo.shape
    low_end, high_end = np.empty(rows), np.empty(rows)
    starts, ends = np.sort(lo, axis=1), np.sort(hi, axis=1)
    for r in range(rows):
        # Inside at a start point: intervals started by it minus those already over; likewise at an end point.
        lo_r, hi_r = starts[r], ends[r]
        at_start = np.searchsorted(lo_r, lo_r, "right") - np.searchsorted(hi_r, lo_r, "left")
        at_end = np.searchsorted(lo_r, hi_r, "right") - np.searchsorted(hi_r, hi_r, "left")
        low_end[r] = lo_r[np.argmax(at_start >= need)]
        high_end[r] = hi_r[hi_r.size - 1 - np.argmax((at_end >= need)[::-1])]
    return low_end, high_end


def sign_flip_interval(
    sums: np.ndarray,
    counts: np.ndarray | None = None,
    *,
    n_flips: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> np.ndarray:
    """The (1 - alpha) interval of a mean difference that inverts the sign-flip test: every shift delta at which
    the test of "the units' residuals sums - delta * counts are symmetric about 0" has p > alpha.

    ``sums``: one row per sample (the coverage benchmark passes thousands; a caller one), one column per
    independent unit: an entry's difference, or a conversation's summed turn differences; ``counts``: the
    units' sizes (None: 1 each), so the estimate is sum(sums) / sum(counts). The p-value at delta is
    (1 + flips at least as extreme) / (1 + flips), over every sign vector up to SIGN_FLIP_EXACT_UNITS units,
    else over ``n_flips`` seeded ones (the same vectors at every delta). A flip's statistic is linear in
    delta, so the shifts it counts as extreme form one closed interval with closed-form ends; the answer is
    the hull of the shifts lying in enough of them: exact for the flips drawn, no search. Returns shape
    (rows, 2); unbounded ends (too few sign vectors to reject anything: 5 units) are for the caller to clip.
    The test is exact when the residuals are symmetric and needs no symmetry to hold asymptotically: under the
    true mean they average 0 and the flips' spread sum(residual**2) estimates the sum's variance (Romano 1990);
    measured where most differences are 0 and the rest skewed in benchmarks/bench_paired_coverage.py."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if n_flips < 1:
        raise ValueError(f"n_flips must be >= 1, got {n_flips}")
    s = np.atleast_2d(np.asarray(sums, dtype=np.float64))
    c = np.ones_like(s) if counts is None else np.atleast_2d(np.asarray(counts, dtype=np.float64))
    if c.shape != s.shape or s.shape[1] == 0:
        raise ValueError(f"sums and counts must have one shape with units, got {s.shape} and {c.shape}")
    signs = _sign_vectors(s.shape[1], n_flips, seed)
    flips = signs.shape[0]
    # delta is accepted when 1 + (flips counting it extreme) > alpha * (1 + flips).
    need = math.floor(alpha * (1 + flips) - 1) + 1
    out = np.empty((s.shape[0], 2))
    rows = max(1, _MAX_CHUNK_ELEMENTS // (8 * flips))  # eight (rows, flips) arrays live at once
    for start in range(0, s.shape[0], rows):
        part_s, part_c = s[start : start + rows], c[start : start + rows]
        a, b = part_s @ signs.T, part_c @ signs.T  # a flip's statistic at delta: a - delta * b
        total, size = part_s.sum(axis=1)[:, None], part_c.sum(axis=1)[:, None]
        # |a - delta b| >= |total - delta size|: a concave quadratic in delta (|b| <= size), >= 0 between its
        # roots. A flip of every sign (b = +-size) is as extreme as the observed sum at every delta.
        whole = np.abs(b) == size
        with np.errstate(divide="ignore", invalid="ignore"):
            r1 = np.where(whole, -np.inf, (a - total) / np.where(whole, 1.0, b - size))
            r2 = np.where(whole, np.inf, (a + total) / np.where(whole, 1.0, b + size))
        lo, hi = np.fmin(r1, r2), np.fmax(r1, r2)
        if need <= 0:  # too few sign vectors to reject anything at this level
            out[start : start + rows] = (-np.inf, np.inf)
            continue
        out[start : start + rows, 0], out[start : start + rows, 1] = _accepted_hull(lo, hi, need)
    return out


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
