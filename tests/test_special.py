"""doceval.scoring.special against the SciPy it replaces at start-up (issue 26): bdtr, bdtrc and brentq give
the same floats to the last bit, so the mid-P interval, and every summary holding one, is unchanged. Exact
equality, not approx: a one-ulp difference would show in summary.json."""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import pytest
from scipy.optimize import brentq as scipy_brentq
from scipy.special import bdtr as scipy_bdtr
from scipy.special import bdtrc as scipy_bdtrc

from doceval.scoring import special
from doceval.scoring.proportions import midp


def _probability(rng: random.Random) -> float:
    """Uniform, both tails down to 1e-16 (where Cephes switches branches), and the edges."""
    pick = rng.random()
    if pick < 0.2:
        return 10 ** rng.uniform(-16, -1)
    if pick < 0.4:
        return 1 - 10 ** rng.uniform(-16, -1)
    if pick < 0.45:
        return rng.choice([0.0, 1.0, 0.5, 1e-15, 1 - 1e-15, 0.01, 0.0099999])
    return rng.random()


def test_binomial_tails_equal_scipys_to_the_last_bit() -> None:
    rng = random.Random(26)
    for _ in range(3000):
        n = rng.choice([rng.randint(1, 30), rng.randint(1, 300), rng.randint(1, 3000), rng.randint(1, 20000)])
        k, p = rng.randint(0, n), _probability(rng)
        assert special.bdtr(k, n, p) == float(scipy_bdtr(k, n, p)), (k, n, p)
        assert special.bdtrc(k, n, p) == float(scipy_bdtrc(k, n, p)), (k, n, p)


def _scipy_midp(x: int, n: int, alpha: float) -> tuple[float, float]:
    """The mid-P interval as doceval computed it with SciPy before issue 26, kept here as the reference."""

    def pmf(p: float) -> float:
        return float(scipy_bdtr(x, n, p)) - (float(scipy_bdtr(x - 1, n, p)) if x > 0 else 0.0)

    def above(p: float) -> float:
        return float(scipy_bdtrc(x, n, p)) + 0.5 * pmf(p) - alpha / 2.0

    def below(p: float) -> float:
        return (float(scipy_bdtr(x - 1, n, p)) if x > 0 else 0.0) + 0.5 * pmf(p) - alpha / 2.0

    tiny = 1e-15
    lo = 0.0 if x == 0 else float(scipy_brentq(above, tiny, 1.0 - tiny, xtol=1e-14))
    hi = 1.0 if x == n else float(scipy_brentq(below, tiny, 1.0 - tiny, xtol=1e-14))
    return lo, hi


def test_midp_equals_the_scipy_computation_to_the_last_bit() -> None:
    rng = random.Random(2026)
    cases = [(x, n, 0.05) for n in (1, 2, 3, 7, 10, 43) for x in range(n + 1)]
    for _ in range(150):
        n = rng.randint(1, 2000)
        x = rng.choice([rng.randint(0, n), rng.randint(0, min(n, 3)), n - rng.randint(0, min(n, 3))])
        cases.append((x, n, rng.choice([0.05, 0.05, 0.1, 0.01])))
    for x, n, alpha in cases:
        assert midp(x, n, alpha) == _scipy_midp(x, n, alpha), (x, n, alpha)


@pytest.mark.parametrize(
    "f,a,b,xtol",
    [
        (lambda x: x**3 - 2.0 * x - 5.0, 2.0, 3.0, 2e-12),
        (lambda x: math.cos(x) - x, 0.0, 1.0, 1e-14),
        (lambda x: math.exp(x) - 10.0, -5.0, 10.0, 1e-3),
        (lambda x: x - 0.25, 0.25, 1.0, 2e-12),  # a root at an end point
        (lambda x: math.atan(x - 1e-3), -1e6, 1e6, 2e-12),  # mostly bisection
    ],
)
def test_brentq_takes_scipys_steps(f: Callable[[float], float], a: float, b: float, xtol: float) -> None:
    assert special.brentq(f, a, b, xtol=xtol) == scipy_brentq(f, a, b, xtol=xtol)


def test_brentq_and_the_tails_refuse_what_scipy_refuses() -> None:
    with pytest.raises(ValueError, match="different signs"):
        special.brentq(lambda x: x * x + 1.0, -1.0, 1.0)
    with pytest.raises(ValueError, match="NaN"):
        special.brentq(lambda x: math.nan, 0.0, 1.0)
    with pytest.raises(RuntimeError, match="converge"):
        special.brentq(lambda x: x - 0.3, 0.0, 1.0, maxiter=1)
    with pytest.raises(ValueError):
        special.bdtr(3, 2, 0.5)
    with pytest.raises(ValueError):
        special.bdtrc(1, 2, 1.5)
    assert special.bdtrc(-1, 5, 0.3) == 1.0 and special.bdtr(5, 5, 0.3) == 1.0


def test_gamma_functions_on_the_paths_the_tails_take() -> None:
    """Gamma, 1/Gamma, log Gamma and Beta through each of their branches, against closed forms."""
    assert special.gamma(5.0) == 24.0 and special.rgamma(4.0) == 1.0 / 6.0
    for x in (0.5, 2.5, 12.5, 40.0, 150.0):
        assert special.gamma(x) == pytest.approx(math.gamma(x), rel=1e-14)
        assert special.rgamma(x) == pytest.approx(1.0 / math.gamma(x), rel=1e-14)
    for x in (0.5, 3.5, 20.0, 500.0, 5000.0, 2e8):
        assert special.lgam(x) == pytest.approx(math.lgamma(x), rel=1e-14)
    assert special.beta(3.0, 4.0) == pytest.approx(1.0 / 60.0, rel=1e-15)
    assert special.lbeta(300.0, 2.0) == pytest.approx(-math.log(300.0 * 301.0), rel=1e-14)
    assert special.lbeta(2e7, 1.0) == pytest.approx(-math.log(2e7), rel=1e-14)  # the asymptotic branch
