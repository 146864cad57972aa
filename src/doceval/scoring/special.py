"""The binomial tails and the root finder behind the mid-P interval, in pure Python, bit for bit SciPy's.

``doceval eval`` on a ten-entry golden set must start in well under two seconds (issue 26), and importing
``scipy.optimize`` and ``scipy.special`` for two functions cost about 0.75 s of that. These are the same
algorithms, operation for operation, so every summary keeps the exact floats it had:

- :func:`bdtr`, :func:`bdtrc`: ``scipy.special.bdtr``/``bdtrc``, i.e. Cephes (S. L. Moshier, BSD licence, as
  SciPy ships it): the binomial cdf and survival function through the regularized incomplete beta
  :func:`incbet` (power series or one of two continued fractions, scaled by x^a (1-x)^b / (a B(a, b)) with
  Cephes' Gamma, reciprocal Gamma and log Gamma);
- :func:`brentq`: ``scipy.optimize.brentq`` (C. Harris' C routine): Brent's method with inverse quadratic
  extrapolation, the same steps, tolerances and defaults.

Python floats are IEEE doubles and ``math.log``/``exp``/``pow``/``log1p`` call the same C library SciPy calls
(``expm1`` is Cephes' own, here as there), so the results are equal to the last bit; ``tests/test_special.py``
checks that against the installed SciPy on thousands of arguments (a SciPy built to fuse multiply-adds could
differ in the last bit; that test would say so). Only positive shape parameters are supported (the binomial needs
no more), and a domain error is a ValueError instead of a NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

__all__ = ["bdtr", "bdtrc", "beta", "brentq", "expm1", "gamma", "incbet", "lbeta", "lgam", "rgamma"]

MACHEP = 1.1102230246251565404236316680908203125e-16  # 2**-53
MAXLOG = 7.097827128933839730962063185871e2  # log(DBL_MAX)
MINLOG = -7.451332191019412076235245305675398106812e2  # log(2**-1075)
MAXGAM = 171.624376956302725  # the largest x with a finite Gamma(x)
SQRT2PI = 2.506628274631000502415765284811045253007
LS2PI = 0.91893853320467274178  # log(sqrt(2 pi))
MAXLGM = 2.556348e305
_BIG, _BIGINV = 4.503599627370496e15, 2.22044604925031308085e-16  # continued-fraction rescaling
# exp(x) - 1 on [-0.5, 0.5] as 2x P(x^2) / (Q(x^2) - x P(x^2)): Cephes' own, not the C library's.
_EXPM1_P = (1.2617719307481059087798e-4, 3.0299440770744196129956e-2, 9.9999999999999999991025e-1)
_EXPM1_Q = (3.0019850513866445504159e-6, 2.5244834034968410419224e-3, 2.2726554820815502876593e-1,
            2.0000000000000000000897e0)  # fmt: skip

# Gamma on [2, 3]: rational approximation P/Q; Stirling's series for x > 33.
_GAMMA_P = (1.60119522476751861407e-4, 1.19135147006586384913e-3, 1.04213797561761569935e-2,
            4.76367800457137231464e-2, 2.07448227648435975150e-1, 4.94214826801497100753e-1,
            9.99999999999999996796e-1)  # fmt: skip
_GAMMA_Q = (-2.31581873324120129819e-5, 5.39605580493303397842e-4, -4.45641913851797240494e-3,
            1.18139785222060435552e-2, 3.58236398605498653373e-2, -2.34591795718243348568e-1,
            7.14304917030273074085e-2, 1.00000000000000000320e0)  # fmt: skip
_STIR = (7.87311395793093628397e-4, -2.29549961613378126380e-4, -2.68132617805781232825e-3,
         3.47222221605458667310e-3, 8.33333333333482257126e-2)  # fmt: skip
_MAXSTIR = 143.01608
# log Gamma: Stirling's series (A) from 13 up, rational B/C on [2, 3] below.
_LGAM_A = (8.11614167470508450300e-4, -5.95061904284301438324e-4, 7.93650340457716943945e-4,
           -2.77777777730099687205e-3, 8.33333333333331927722e-2)  # fmt: skip
_LGAM_B = (-1.37825152569120859100e3, -3.88016315134637840924e4, -3.31612992738871184744e5,
           -1.16237097492762307383e6, -1.72173700820839662146e6, -8.53555664245765465627e5)  # fmt: skip
_LGAM_C = (-3.51815701436523470549e2, -1.70642106651881159223e4, -2.20528590553854454839e5,
           -1.13933444367982507207e6, -2.53252307177582951285e6, -2.01889141433532773231e6)  # fmt: skip
_LGAM_LARGE = (
    7.9365079365079365079365e-4,
    -2.7777777777777777777778e-3,
    0.0833333333333333333333,
)  # x >= 1000
# 1 / (x Gamma(x)) - 1 on [0, 1] as a Chebyshev series.
_RGAMMA_R = (3.13173458231230000000e-17, -6.70718606477908000000e-16, 2.20039078172259550000e-15,
             2.47691630348254132600e-13, -6.60074100411295197440e-12, 5.13850186324226978840e-11,
             1.08965386454418662084e-9, -3.33964630686836942556e-8, 2.68975996440595483619e-7,
             2.96001177518801696639e-6, -8.04814124978471142852e-5, 4.16609138709688864714e-4,
             5.06579864028608725080e-3, -6.41925436109158228810e-2, -4.98558728684003594785e-3,
             1.27546015610523951063e-1)  # fmt: skip


def _polevl(x: float, coef: Sequence[float]) -> float:
    """Horner's rule, highest coefficient first."""
    ans = coef[0]
    for c in coef[1:]:
        ans = ans * x + c
    return ans


def _p1evl(x: float, coef: Sequence[float]) -> float:
    """Horner's rule with an implied leading coefficient 1."""
    ans = x + coef[0]
    for c in coef[1:]:
        ans = ans * x + c
    return ans


def _chbevl(x: float, coef: Sequence[float]) -> float:
    """Clenshaw's recurrence for a Chebyshev series."""
    b0, b1, b2 = coef[0], 0.0, 0.0
    for c in coef[1:]:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def expm1(x: float) -> float:
    """exp(x) - 1 as Cephes computes it (its binomial survival function uses this one)."""
    if not math.isfinite(x):
        return x if math.isnan(x) or x > 0 else -1.0
    if x < -0.5 or x > 0.5:
        return math.exp(x) - 1.0
    xx = x * x
    r = x * _polevl(xx, _EXPM1_P)
    r = r / (_polevl(xx, _EXPM1_Q) - r)
    return r + r


def _positive(x: float, where: str) -> None:
    if not x > 0.0:
        raise ValueError(f"{where}: needs a positive argument, got {x}")


def _stirf(x: float) -> float:
    if x >= MAXGAM:
        return math.inf
    w = 1.0 / x
    w = 1.0 + w * _polevl(w, _STIR)
    y = math.exp(x)
    if x > _MAXSTIR:  # pow(x, x - 0.5) would overflow
        v = math.pow(x, 0.5 * x - 0.25)
        y = v * (v / y)
    else:
        y = math.pow(x, x - 0.5) / y
    return SQRT2PI * y * w


def gamma(x: float) -> float:
    """Gamma(x) for x > 0."""
    _positive(x, "gamma")
    if math.isinf(x):
        return x
    if x > 33.0:
        return _stirf(x)
    z = 1.0
    while x >= 3.0:
        x -= 1.0
        z *= x
    while x < 2.0:
        if x < 1.0e-9:
            return z / ((1.0 + 0.5772156649015329 * x) * x)
        z /= x
        x += 1.0
    if x == 2.0:
        return z
    x -= 2.0
    return z * _polevl(x, _GAMMA_P) / _polevl(x, _GAMMA_Q)


def rgamma(x: float) -> float:
    """1 / Gamma(x) for x > 0."""
    _positive(x, "rgamma")
    if x > 4.0:
        return 1.0 / gamma(x)
    z, w = 1.0, x
    while w > 1.0:
        w -= 1.0
        z *= w
    if w == 1.0:
        return 1.0 / z
    return w * (1.0 + _chbevl(4.0 * w - 2.0, _RGAMMA_R)) / z


def lgam(x: float) -> float:
    """log Gamma(x) for x > 0."""
    _positive(x, "lgam")
    if math.isinf(x):
        return x
    if x < 13.0:
        z, p, u = 1.0, 0.0, x
        while u >= 3.0:
            p -= 1.0
            u = x + p
            z *= u
        while u < 2.0:
            z /= u
            p += 1.0
            u = x + p
        if u == 2.0:
            return math.log(z)
        p -= 2.0
        x = x + p
        return math.log(z) + x * _polevl(x, _LGAM_B) / _p1evl(x, _LGAM_C)
    if x > MAXLGM:
        return math.inf
    q = (x - 0.5) * math.log(x) - x + LS2PI
    if x >= 1000.0:
        if x > 1.0e8:
            return q
        p = 1.0 / (x * x)
        return q + _polevl(p, _LGAM_LARGE) / x
    p = 1.0 / (x * x)
    return q + _polevl(p, _LGAM_A) / x


def _lbeta_asymp(a: float, b: float) -> float:
    """log B(a, b) for a much larger than b (lgam(a + b) - lgam(a) would cancel)."""
    r = lgam(b)
    r -= b * math.log(a)
    r += b * (1 - b) / (2 * a)
    r += b * (1 - b) * (1 - 2 * b) / (12 * a * a)
    r += -b * b * (1 - b) * (1 - b) / (12 * a * a * a)
    return r


def _gamma_ratio(a: float, b: float) -> float:
    """Gamma(a) Gamma(b) / Gamma(a + b) for a + b below MAXGAM, multiplied in the order that loses least."""
    y = rgamma(a + b)
    ga, gb = gamma(a), gamma(b)
    if math.isinf(y):
        raise OverflowError(f"beta({a}, {b}) overflows")
    if abs(abs(ga * y) - 1.0) > abs(abs(gb * y) - 1.0):
        y = gb * y
        y *= ga
    else:
        y = ga * y
        y *= gb
    return y


def _big(a: float, b: float) -> bool:
    return a > 1e6 * b and a > 1e6  # Cephes' ASYMP_FACTOR


def beta(a: float, b: float) -> float:
    """B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b) for a, b > 0."""
    _positive(a, "beta")
    _positive(b, "beta")
    if a < b:
        a, b = b, a
    if _big(a, b):
        return math.exp(_lbeta_asymp(a, b))
    y = a + b
    if y > MAXGAM or a > MAXGAM or b > MAXGAM:
        y = lgam(y)
        y = lgam(b) - y
        y = lgam(a) + y
        if y > MAXLOG:
            raise OverflowError(f"beta({a}, {b}) overflows")
        return math.exp(y)
    return _gamma_ratio(a, b)


def lbeta(a: float, b: float) -> float:
    """log B(a, b) for a, b > 0."""
    _positive(a, "lbeta")
    _positive(b, "lbeta")
    if a < b:
        a, b = b, a
    if _big(a, b):
        return _lbeta_asymp(a, b)
    y = a + b
    if y > MAXGAM or a > MAXGAM or b > MAXGAM:
        y = lgam(y)
        y = lgam(b) - y
        return lgam(a) + y
    return math.log(abs(_gamma_ratio(a, b)))


def _pseries(a: float, b: float, x: float) -> float:
    """Power series for I_x(a, b), for b x small and x not near 1."""
    ai = 1.0 / a
    u = (1.0 - b) * x
    v = u / (a + 1.0)
    t1, t, n, s = v, u, 2.0, 0.0
    z = MACHEP * ai
    while abs(v) > z:
        u = (n - b) * x / n
        t *= u
        v = t / (a + n)
        s += v
        n += 1.0
    s += t1
    s += ai
    u = a * math.log(x)
    if (a + b) < MAXGAM and abs(u) < MAXLOG:
        t = 1.0 / beta(a, b)
        return (s * t) * math.pow(x, a)
    t = -lbeta(a, b) + u + math.log(s)
    return 0.0 if t < MINLOG else math.exp(t)


def _contfrac(x: float, k: list[float], steps: tuple[float, ...]) -> float:
    """The continued fraction both of Cephes' expansions share: terms -(x k1 k2)/(k3 k4) and
    (x k5 k6)/(k7 k8), ``k`` moving by ``steps`` each round; at most 300 rounds, rescaled against overflow."""
    k1, k2, k3, k4, k5, k6, k7, k8 = k
    s1, s2, s3, s4, s5, s6, s7, s8 = steps
    pkm2, qkm2, pkm1, qkm1 = 0.0, 1.0, 1.0, 1.0
    ans = r = 1.0
    thresh = 3.0 * MACHEP
    big, biginv = _BIG, _BIGINV  # locals: this loop is where the mid-P interval spends its time
    for _ in range(300):
        xk = -(x * k1 * k2) / (k3 * k4)
        pk = pkm1 + pkm2 * xk
        qk = qkm1 + qkm2 * xk
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        xk = (x * k5 * k6) / (k7 * k8)
        pk = pkm1 + pkm2 * xk
        qk = qkm1 + qkm2 * xk
        pkm2, pkm1, qkm2, qkm1 = pkm1, pk, qkm1, qk
        if qk != 0:
            r = pk / qk
        if r != 0:
            t = (ans - r) / r
            ans = r
            if -thresh < t < thresh:  # |t| < thresh, NaN included (neither)
                break
        k1, k2, k3, k4 = k1 + s1, k2 + s2, k3 + s3, k4 + s4
        k5, k6, k7, k8 = k5 + s5, k6 + s6, k7 + s7, k8 + s8
        apk, aqk = abs(pk), abs(qk)
        if aqk + apk > big:
            pkm2, pkm1, qkm2, qkm1 = pkm2 * biginv, pkm1 * biginv, qkm2 * biginv, qkm1 * biginv
        if aqk < biginv or apk < biginv:
            pkm2, pkm1, qkm2, qkm1 = pkm2 * big, pkm1 * big, qkm2 * big, qkm1 * big
    return ans


def _incbcf(a: float, b: float, x: float) -> float:
    k = [a, a + b, a, a + 1.0, 1.0, b - 1.0, a + 1.0, a + 2.0]
    return _contfrac(x, k, (1.0, 1.0, 2.0, 2.0, 1.0, -1.0, 2.0, 2.0))


def _incbd(a: float, b: float, x: float) -> float:
    k = [a, b - 1.0, a, a + 1.0, 1.0, a + b, a + 1.0, a + 2.0]
    return _contfrac(x / (1.0 - x), k, (1.0, -1.0, 2.0, 2.0, 1.0, 1.0, 2.0, 2.0))


def incbet(aa: float, bb: float, xx: float) -> float:
    """The regularized incomplete beta function I_x(a, b) for a, b > 0 and 0 <= x <= 1."""
    if not (aa > 0.0 and bb > 0.0 and 0.0 <= xx <= 1.0):
        raise ValueError(f"incbet: needs a, b > 0 and 0 <= x <= 1, got {aa}, {bb}, {xx}")
    if xx == 0.0 or xx == 1.0:
        return xx
    if bb * xx <= 1.0 and xx <= 0.95:
        return _pseries(aa, bb, xx)
    w = 1.0 - xx
    flip = xx > aa / (aa + bb)  # work on the smaller tail: I_x(a, b) = 1 - I_(1-x)(b, a)
    a, b, x, xc = (bb, aa, w, xx) if flip else (aa, bb, xx, w)
    t = _pseries(a, b, x) if flip and b * x <= 1.0 and x <= 0.95 else _scaled_fraction(a, b, x, xc)
    if not flip:
        return t
    return 1.0 - MACHEP if t <= MACHEP else 1.0 - t


def _scaled_fraction(a: float, b: float, x: float, xc: float) -> float:
    """The better-converging continued fraction times x^a (1-x)^b / (a B(a, b))."""
    w = _incbcf(a, b, x) if x * (a + b - 2.0) - (a - 1.0) < 0.0 else _incbd(a, b, x) / xc
    y = a * math.log(x)
    t = b * math.log(xc)
    if (a + b) < MAXGAM and abs(y) < MAXLOG and abs(t) < MAXLOG:
        t = math.pow(xc, b)
        t *= math.pow(x, a)
        t /= a
        t *= w
        t *= 1.0 / beta(a, b)
        return t
    y += t - lbeta(a, b)
    y += math.log(w / a)
    return 0.0 if y < MINLOG else math.exp(y)


def _check_binomial(k: int, n: int, p: float, where: str) -> None:
    if not 0.0 <= p <= 1.0 or n < k:
        raise ValueError(f"{where}: needs 0 <= p <= 1 and k <= n, got k={k}, n={n}, p={p}")


def bdtr(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), k >= 0."""
    _check_binomial(k, n, p, "bdtr")
    if k < 0:
        raise ValueError(f"bdtr: needs k >= 0, got {k}")
    if k == n:
        return 1.0
    fk = float(k)
    dn = float(n) - fk
    if k == 0:
        return math.pow(1.0 - p, dn)
    return incbet(dn, fk + 1.0, 1.0 - p)


def bdtrc(k: int, n: int, p: float) -> float:
    """P(X > k) for X ~ Binomial(n, p); 1 for k < 0."""
    _check_binomial(k, n, p, "bdtrc")
    if k < 0:
        return 1.0
    if k == n:
        return 0.0
    fk = float(k)
    dn = float(n) - fk
    if k == 0:
        if p < 0.01:
            return -expm1(dn * math.log1p(-p))
        return 1.0 - math.pow(1.0 - p, dn)
    return incbet(fk + 1.0, dn, p)


RTOL = 4 * 2.220446049250313e-16  # scipy.optimize's default and smallest rtol: 4 machine epsilons


def brentq(
    f: Callable[[float], float],
    xa: float,
    xb: float,
    xtol: float = 2e-12,
    rtol: float = RTOL,
    maxiter: int = 100,
) -> float:
    """A root of ``f`` in [xa, xb] (where f changes sign) by Brent's method, step for step as
    ``scipy.optimize.brentq``; ValueError without a sign change, RuntimeError when it does not converge."""
    if xtol <= 0 or rtol < RTOL:
        raise ValueError(f"brentq: needs xtol > 0 and rtol >= {RTOL}, got {xtol}, {rtol}")
    xpre, xcur = float(xa), float(xb)
    fpre, fcur = _value(f, xpre), _value(f, xcur)
    if fpre * fcur > 0:
        raise ValueError("brentq: f(a) and f(b) must have different signs")
    if fpre == 0:
        return xpre
    if fcur == 0:
        return xcur
    xblk = fblk = spre = scur = 0.0
    for _ in range(maxiter):
        if fpre * fcur < 0:
            xblk, fblk = xpre, fpre
            spre = scur = xcur - xpre
        if abs(fblk) < abs(fcur):  # keep the best estimate in xcur
            xpre, xcur, xblk = xcur, xblk, xcur
            fpre, fcur, fblk = fcur, fblk, fcur
        delta = (xtol + rtol * abs(xcur)) / 2
        sbis = (xblk - xcur) / 2
        if fcur == 0 or abs(sbis) < delta:
            return xcur
        spre, scur = _brent_step(xpre, xcur, xblk, fpre, fcur, fblk, spre, scur, sbis, delta)
        xpre, fpre = xcur, fcur
        xcur += scur if abs(scur) > delta else (delta if sbis > 0 else -delta)
        fcur = _value(f, xcur)
    raise RuntimeError(f"brentq: failed to converge after {maxiter} iterations, value is {xcur}")


def _brent_step(
    xpre: float, xcur: float, xblk: float, fpre: float, fcur: float, fblk: float,
    spre: float, scur: float, sbis: float, delta: float,
) -> tuple[float, float]:  # fmt: skip
    """The next (spre, scur): an interpolated step when it is short enough, else bisection."""
    if abs(spre) > delta and abs(fcur) < abs(fpre):
        if xpre == xblk:  # secant
            stry = -fcur * (xcur - xpre) / (fcur - fpre)
        else:  # inverse quadratic
            dpre = (fpre - fcur) / (xpre - xcur)
            dblk = (fblk - fcur) / (xblk - xcur)
            stry = -fcur * (fblk * dblk - fpre * dpre) / (dblk * dpre * (fblk - fpre))
        if 2 * abs(stry) < min(abs(spre), 3 * abs(sbis) - delta):
            return scur, stry
    return sbis, sbis


def _value(f: Callable[[float], float], x: float) -> float:
    fx = float(f(x))
    if math.isnan(fx):
        raise ValueError(f"brentq: the function value at x={x} is NaN")
    return fx
