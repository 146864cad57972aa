"""Which interval and which test each metric gets: the policy over :mod:`doceval.scoring.proportions` and
:mod:`doceval.scoring.stats` (docs/design.md section 4.3).

- A **proportion** (every non-null per-entry value is 0 or 1: hit_rate and the refusal metrics always, recall
  or mrr when every entry happens to score 0 or 1) gets the mid-P interval by default, or the Wilson or
  Jeffreys score interval on request (``intervals.binary``). Never zero-width while n > 0. The values decide, not the metric's name, so a graded judge is never
  given a binomial interval and a 0/1 recall never a bootstrap one.
- Any other mean of values in [0, 1] (reciprocal ranks, nDCG) gets the BCa bootstrap. Fallback, stated
  in the summary's ``ci_method``: with fewer than :data:`MIN_N_BOOTSTRAP` values, or when every value is the
  same (a bootstrap then sees no spread), the Wilson interval of the mean (``wilson-bounded``), valid because a
  variable in [0, 1] with mean mu has variance at most mu (1 - mu).
- A **paired change** between two runs: both runs 0/1: Newcombe's interval for the difference of paired proportions
  and the exact McNemar p-value; otherwise the sign-flip permutation p-value and the interval that inverts the
  same test (:func:`doceval.scoring.stats.sign_flip_interval`): it keeps 95% where most differences are 0,
  which the BCa bootstrap it replaced did not (0.84-0.91 at n = 20-50). With fewer than
  :data:`MIN_DIFFERING` non-zero differences there is no interval, only why (:func:`too_few`): the test cannot
  reject 0 from so few, and an interval from them ends at 0 as if that were a finding.
- :func:`holm` adjusts the p-values of one table for the number of comparisons in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from doceval.scoring.proportions import jeffreys, mcnemar_exact_p, midp, newcombe_paired, wilson
from doceval.scoring.stats import bca_ci, sign_flip_interval, sign_flip_p

__all__ = [
    "BINARY_METHODS",
    "MIN_N_BOOTSTRAP",
    "MIN_DIFFERING",
    "MIN_N_BREAKDOWN",
    "Change",
    "Interval",
    "holm",
    "interval",
    "paired_change",
    "too_few",
]

BINARY_METHODS: tuple[str, ...] = ("midp", "wilson", "jeffreys")
_BINARY = {"midp": midp, "wilson": wilson, "jeffreys": jeffreys}
MIN_N_BOOTSTRAP = 10  # below this a bootstrap interval is mostly an artefact of the few values drawn
MIN_N_BREAKDOWN = 10  # a breakdown row with fewer entries says "too few" instead of printing an interval
# A paired change gets an interval from this many differing units (entries, or conversations) up: with 5 the
# sign-flip test's smallest two-sided p-value is 2 / 2**5 = 0.0625, so fewer can never tell a change from 0.
MIN_DIFFERING = 5


@dataclass(frozen=True)
class Interval:
    lo: float
    hi: float
    method: str  # midp | wilson | jeffreys | bca | wilson-bounded


@dataclass(frozen=True)
class Change:
    """The paired change new - base of one metric over the entries scored in both runs."""

    ci: tuple[float, float] | None  # None: no entry scored in both runs, or too few differ (``note`` says)
    p_value: float | None  # two-sided, for "no change"; None when no entry was scored in both runs
    method: str  # newcombe+mcnemar | sign-flip | "" (no interval)
    n: int
    note: str | None = None  # why there is no interval although entries were paired


def _finite(values: np.ndarray) -> np.ndarray:
    v = np.asarray(values, dtype=np.float64).ravel()
    return v[~np.isnan(v)]


def is_binary(values: np.ndarray) -> bool:
    v = _finite(values)
    return bool(np.all((v == 0.0) | (v == 1.0)))


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def _bounded(x: np.ndarray, alpha: float) -> tuple[float, float]:
    """Wilson interval of the mean of values in [0, 1] (conservative: their variance is at most mu(1 - mu))."""
    clipped = np.clip(x, 0.0, 1.0)
    return wilson(float(clipped.sum()), int(x.size), alpha)


def interval(
    values: np.ndarray,
    *,
    binary_method: str = "midp",
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> Interval | None:
    """The (1 - alpha) interval of the mean of the non-NaN ``values``; None when there are none."""
    _check_alpha(alpha)
    if binary_method not in BINARY_METHODS:
        raise ValueError(
            f"unknown binary interval method {binary_method!r}; known: {', '.join(BINARY_METHODS)}"
        )
    x = _finite(values)
    n = int(x.size)
    if n == 0:
        return None
    if is_binary(x):
        lo, hi = _BINARY[binary_method](float(x.sum()), n, alpha)
        return Interval(lo, hi, binary_method)
    if n >= MIN_N_BOOTSTRAP and float(x.max()) > float(x.min()):
        ci = bca_ci(x, n_boot=n_boot, seed=seed, alpha=alpha)
        if ci is not None and ci[1] > ci[0]:
            return Interval(ci[0], ci[1], "bca")
    lo, hi = _bounded(x, alpha)
    return Interval(lo, hi, "wilson-bounded")


def _paired(base: np.ndarray, new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(base, dtype=np.float64).ravel()
    w = np.asarray(new, dtype=np.float64).ravel()
    if b.shape != w.shape:
        raise ValueError(f"base and new must be aligned per entry, got shapes {b.shape} and {w.shape}")
    both = ~(np.isnan(b) | np.isnan(w))
    return b[both], w[both]


def too_few(differing: int, unit: str = "entries") -> str:
    """Why a paired change has no interval, e.g. ``too few differing entries (n=1)``."""
    return f"too few differing {unit} (n={differing})"


def paired_change(
    base: np.ndarray,
    new: np.ndarray,
    *,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> Change:
    """Interval and two-sided p-value of mean(new - base) over entries where both are non-NaN. ``n_boot``: the
    sign flips behind the interval of non-binary values (every sign vector up to 12 entries)."""
    _check_alpha(alpha)
    b, w = _paired(base, new)
    n = int(b.size)
    if n == 0:
        return Change(None, None, "", 0)
    if is_binary(b) and is_binary(w):
        both = int(((b == 1) & (w == 1)).sum())
        base_only = int(((b == 1) & (w == 0)).sum())
        new_only = int(((b == 0) & (w == 1)).sum())
        neither = n - both - base_only - new_only
        ci = newcombe_paired(both, base_only, new_only, neither, alpha)
        return Change(ci, mcnemar_exact_p(base_only, new_only), "newcombe+mcnemar", n)
    d = w - b
    p = sign_flip_p(d, seed=seed)
    differing = int(np.count_nonzero(d))
    if differing < MIN_DIFFERING:
        return Change(None, p, "", n, note=too_few(differing))
    lo, hi = sign_flip_interval(d, n_flips=n_boot, seed=seed, alpha=alpha)[0]
    return Change((max(-1.0, float(lo)), min(1.0, float(hi))), p, "sign-flip", n)


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of the p-values of one table (None stays None): the i-th smallest of m
    p-values is multiplied by (m - i), running maximum, capped at 1. Controls the family-wise error rate."""
    ranked = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(ranked)
    out: list[float | None] = [None] * len(p_values)
    running = 0.0
    for rank, (p, i) in enumerate(ranked):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out
