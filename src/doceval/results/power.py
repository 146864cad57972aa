"""What the significant non-regression rule can detect at this n (docs/design.md 8.3).

``non_regression.mode: significant`` fails a metric only when the paired test of ``doceval compare`` (exact
McNemar for 0/1 values, sign-flip for graded ones), Holm-adjusted over the gated metrics, gives p < alpha. On a
small split that may be impossible: with 12 entries and three metrics at alpha 0.05, no fewer than 7 entries
must get worse (none better) before p_holm < 0.05. A rule that cannot fail must say so, not stay green in
silence: :func:`detectable` runs the gate's own test on the most one-sided outcomes (d entries worse, the rest
unchanged) and finds the smallest d that fails, and whether the baseline leaves that many entries to lose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from doceval.scoring.intervals import holm, paired_change

_EPS = 1e-9


@dataclass(frozen=True)
class Detectable:
    """The smallest regression of one metric the rule can fail at this n and level."""

    metric: str
    n: int  # entries scored in both runs
    entries: int | None  # fewest entries worse (none better) that reach p_holm < alpha; None: not even all n
    possible: int  # entries the baseline leaves to lose (those not already at the worst value)
    test: str  # the paired test as compare names it (newcombe+mcnemar, ...+sign-flip)
    family: int  # metrics in the Holm family
    alpha: float

    @property
    def can_fail(self) -> bool:
        return self.entries is not None and self.entries <= self.possible

    @property
    def drop(self) -> float | None:
        """The smallest drop of the mean it detects: ``entries`` entries each losing their whole score."""
        return None if self.entries is None else self.entries / self.n

    def text(self) -> str:
        how = f"{self.test.split('+')[-1]} test, Holm over {self.family} metric{'s' * (self.family != 1)}"
        if self.entries is None:
            return (
                f"{self.metric} non-regression cannot fail at n = {self.n}: even all {self.n} entries worse "
                f"stays at p_holm >= {self.alpha:g} ({how}); use mode: point, fewer metrics or more entries"
            )
        smallest = f"{self.drop:.3f} ({self.entries} of {self.n} entries worse, none better; {how}, alpha {self.alpha:g})"
        if not self.can_fail:
            return (
                f"{self.metric} non-regression cannot fail against this baseline: the smallest drop it detects "
                f"at n = {self.n} is {smallest}, and only {self.possible} entries can get worse"
            )
        return f"{self.metric} non-regression: the smallest drop it detects at n = {self.n} is {smallest}"


def detectable(
    metric: str,
    base: np.ndarray,
    new: np.ndarray,
    *,
    lower_is_better: bool,
    family: int,
    alpha: float,
    tolerance: float = 0.0,
) -> Detectable:
    """The smallest number of entries that, all worse by their whole score and none better, make the gate's
    test (:func:`doceval.scoring.intervals.paired_change`, Holm over ``family`` metrics) fail ``metric`` at
    ``alpha`` and beyond ``tolerance``, over the entries ``base`` and ``new`` both scored."""
    b, w = np.asarray(base, dtype=np.float64), np.asarray(new, dtype=np.float64)
    both = ~(np.isnan(b) | np.isnan(w))
    b, w = b[both], w[both]
    n = int(b.size)
    binary = bool(np.all((b == 0) | (b == 1)) and np.all((w == 0) | (w == 1)))
    possible = int((b < 1).sum() if lower_is_better else (b > 0).sum())
    test = paired_change(b, w, n_boot=50).method if n else ""
    found = None
    for d in range(1, n + 1):
        if d / n <= tolerance + _EPS:
            continue
        # The most one-sided outcome: d entries from 1 to 0, the rest tied (0/1 ties for a 0/1 metric, so the
        # same test runs: McNemar; 0.5 ties for a graded one: sign-flip).
        tie = 1.0 if binary else 0.5
        before = np.r_[np.ones(d), np.full(n - d, tie)]
        after = np.r_[np.zeros(d), np.full(n - d, tie)]
        p = paired_change(before, after, n_boot=50).p_value
        adjusted = holm([p, *([1.0] * (family - 1))])[0]
        if adjusted is not None and adjusted < alpha:
            found = d
            break
    return Detectable(metric, n, found, possible, test, family, alpha)
