"""Score intervals for proportions, single and paired, and the exact McNemar test.

Closed forms, no resampling: a binary per-entry metric is a binomial proportion, and its interval should keep
its nominal coverage near 0 and 1 and on small groups, where the percentile bootstrap does not (it collapses
to a point when every entry agrees). docs/design.md section 4.3 states which metric uses which interval, and
``benchmarks/bench_intervals.py`` measures their coverage.

- :func:`midp`: the mid-P interval (Clopper-Pearson with half the probability of the observed count; Lancaster
  1961, Berry and Armitage 1995): the default, the one whose exact coverage meets the targets of the benchmark
  on every window of rates and sizes. Its binomial tails are SciPy's ``bdtr``/``bdtrc`` and its root finder
  SciPy's compiled ``brentq``, reached without importing ``scipy.optimize`` (see :func:`_brentq`).
- :func:`wilson`: Wilson (1927) score interval; :func:`jeffreys`: the equal-tailed Beta(x + 1/2, n - x + 1/2)
  interval, with the bound at 0 (1) when x = 0 (x = n) (Brown, Cai and DasGupta 2001).
- :func:`newcombe_paired`: Newcombe's (1998) square-and-add interval for the difference of two paired
  proportions, from the Wilson intervals of the two margins and the corrected phi of the 2x2 table.
- :func:`mcnemar_exact_p`: two-sided exact (conditional) McNemar p-value from the discordant pairs.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
import os
from collections.abc import Callable
from fractions import Fraction
from functools import lru_cache
from statistics import NormalDist

__all__ = ["jeffreys", "mcnemar_exact_p", "midp", "newcombe_paired", "normal_quantile", "wilson"]


def normal_quantile(q: float) -> float:
    return NormalDist().inv_cdf(q)


def _check(successes: float, n: int, alpha: float) -> None:
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    if not 0.0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")


def wilson(successes: float, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson score interval for a proportion ``successes / n``. ``successes`` may be fractional: for the
    mean of values in [0, 1] it is a conservative interval, since such values have variance at most
    mean * (1 - mean)."""
    _check(successes, n, alpha)
    z = normal_quantile(1.0 - alpha / 2.0)
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2.0) / (1.0 + z2n)
    half = z * math.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n)) / (1.0 + z2n)
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def jeffreys(successes: float, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Jeffreys interval: the alpha/2 and 1 - alpha/2 quantiles of Beta(x + 1/2, n - x + 1/2), with the lower
    bound 0 when x = 0 and the upper bound 1 when x = n."""
    # lazy: start-up budget (issue 26): scipy.special costs ~0.25 s to import, and only intervals.binary=jeffreys
    # needs it; its betaincinv is Boost's ibeta_inv, too large to reproduce to the last bit here.
    from scipy.special import betaincinv

    _check(successes, n, alpha)
    a, b = successes + 0.5, n - successes + 0.5
    lo = 0.0 if successes == 0 else float(betaincinv(a, b, alpha / 2.0))
    hi = 1.0 if successes == n else float(betaincinv(a, b, 1.0 - alpha / 2.0))
    return lo, hi


def midp(successes: float, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Mid-P interval for ``successes / n`` (an integer count): the lower bound L solves
    P(X > x) + P(X = x) / 2 = alpha / 2 under Binomial(n, L), the upper bound U solves
    P(X < x) + P(X = x) / 2 = alpha / 2; L = 0 when x = 0 and U = 1 when x = n."""
    _check(successes, n, alpha)
    x = int(successes)
    if x != successes:
        raise ValueError(f"midp needs an integer count of successes, got {successes}")
    return _midp(x, int(n), float(alpha))


@lru_cache(maxsize=4096)
def _midp(x: int, n: int, alpha: float) -> tuple[float, float]:
    # Cached: the same (x, n) recurs across metrics, breakdowns and sweep points.
    # lazy: start-up budget (issue 26): scipy.special costs ~0.25 s to import, only when an interval is computed.
    from scipy.special import bdtr, bdtrc  # binomial cdf and survival function, as fast ufuncs

    brentq = _brentq()
    tiny = 1e-15

    def pmf(p: float) -> float:
        return float(bdtr(x, n, p)) - (float(bdtr(x - 1, n, p)) if x > 0 else 0.0)

    def above(p: float) -> float:  # P(X > x) + P(X = x) / 2, increasing in p
        return float(bdtrc(x, n, p)) + 0.5 * pmf(p) - alpha / 2.0

    def below(p: float) -> float:  # P(X < x) + P(X = x) / 2, decreasing in p
        return (float(bdtr(x - 1, n, p)) if x > 0 else 0.0) + 0.5 * pmf(p) - alpha / 2.0

    lo = 0.0 if x == 0 else float(brentq(above, tiny, 1.0 - tiny, 1e-14))
    hi = 1.0 if x == n else float(brentq(below, tiny, 1.0 - tiny, 1e-14))
    return lo, hi


# scipy.optimize.brentq's own defaults (rtol = 4 * machine epsilon, 100 iterations).
_BRENT_RTOL, _BRENT_MAXITER = 4 * 2.220446049250313e-16, 100


@lru_cache(maxsize=1)
def _brentq() -> Callable[[Callable[[float], float], float, float, float], float]:
    """SciPy's compiled Brent root finder (the C routine ``scipy.optimize.brentq`` calls, same arguments, same
    floats) without importing ``scipy.optimize``, whose package import costs ~0.5 s of a ten-entry eval's start-up
    (issue 26): its extension module is loaded from its file. Where that fails (another SciPy layout), the public
    function; tests/test_intervals.py checks both give the same roots."""
    # lazy: start-up budget (issue 26): only an interval that is computed needs SciPy
    import scipy

    try:
        name = "scipy.optimize._zeros"
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = f"{scipy.__path__[0]}/optimize/_zeros{suffix}"
            spec = importlib.util.spec_from_file_location(name, path)
            if spec is not None and spec.loader is not None and os.path.isfile(path):
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                c_brentq = module._brentq
                return lambda f, a, b, xtol: float(
                    c_brentq(f, a, b, xtol, _BRENT_RTOL, _BRENT_MAXITER, (), False, True)
                )
    except (ImportError, AttributeError, OSError):
        pass
    # lazy: start-up budget (issue 26): scipy.optimize costs ~0.5 s; only this fallback imports it
    from scipy.optimize import brentq

    return lambda f, a, b, xtol: float(brentq(f, a, b, xtol=xtol))


def newcombe_paired(
    both: int, base_only: int, new_only: int, neither: int, alpha: float = 0.05
) -> tuple[float, float]:
    """Interval for p_new - p_base over paired binary outcomes (Newcombe 1998, square-and-add, method 10).

    ``both``: entries where base and new are 1; ``base_only``: base 1, new 0; ``new_only``: base 0, new 1;
    ``neither``: both 0. Each margin gets its Wilson interval; phi (the correlation of the two margins) is
    corrected toward 0 by N/2 when positive, as Newcombe does, so a table with no discordant pairs still gets
    an interval of positive width.
    """
    counts = (both, base_only, new_only, neither)
    if any(c < 0 for c in counts):
        raise ValueError(f"paired counts must be >= 0, got {counts}")
    n = sum(counts)
    if n < 1:
        raise ValueError("newcombe_paired needs at least one pair")
    x_new, x_base = both + new_only, both + base_only
    p_new, p_base = x_new / n, x_base / n
    l_new, u_new = wilson(x_new, n, alpha)
    l_base, u_base = wilson(x_base, n, alpha)
    margins = x_new * (n - x_new) * x_base * (n - x_base)
    phi = 0.0
    if margins > 0:
        cross = both * neither - base_only * new_only
        if cross > n / 2.0:
            phi = (cross - n / 2.0) / math.sqrt(margins)
        elif cross < 0:
            phi = cross / math.sqrt(margins)
    d = p_new - p_base
    down = (p_new - l_new) ** 2 + (u_base - p_base) ** 2 - 2.0 * phi * (p_new - l_new) * (u_base - p_base)
    up = (u_new - p_new) ** 2 + (p_base - l_base) ** 2 - 2.0 * phi * (u_new - p_new) * (p_base - l_base)
    return max(-1.0, d - math.sqrt(max(down, 0.0))), min(1.0, d + math.sqrt(max(up, 0.0)))


def mcnemar_exact_p(base_only: int, new_only: int) -> float:
    """Two-sided exact McNemar p-value: under no change, each discordant pair is equally likely to favour
    either run, so min(b, c) ~ Binomial(b + c, 1/2); the p-value doubles its lower tail (capped at 1). No
    discordant pairs: 1.0. The tail is summed as an exact fraction and rounded once."""
    if base_only < 0 or new_only < 0:
        raise ValueError(f"discordant counts must be >= 0, got {base_only}, {new_only}")
    m = base_only + new_only
    if m == 0:
        return 1.0
    k = min(base_only, new_only)
    tail = Fraction(sum(math.comb(m, i) for i in range(k + 1)), 2**m)
    return float(min(Fraction(1), 2 * tail))
