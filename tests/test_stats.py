"""Tests for doceval.scoring.stats: seeded bootstrap intervals and win/tie/loss counts."""

from __future__ import annotations

import numpy as np
import pytest

from doceval.scoring.stats import bootstrap_ci, paired_bootstrap_ci, win_tie_loss

SAMPLE = np.random.default_rng(1234).random(200)


def interval(ci: tuple[float, float] | None) -> tuple[float, float]:
    assert ci is not None
    return ci


def test_bootstrap_ci_contains_the_mean_and_is_ordered() -> None:
    lo, hi = interval(bootstrap_ci(SAMPLE, n_boot=2000, seed=7))
    assert lo < SAMPLE.mean() < hi
    # Standard error of a U(0,1) mean over 200 is ~0.02, so a 95% interval is ~0.08 wide.
    assert 0.05 < hi - lo < 0.12


def test_bootstrap_ci_is_deterministic_for_a_seed() -> None:
    assert bootstrap_ci(SAMPLE, seed=3) == bootstrap_ci(SAMPLE, seed=3)
    assert bootstrap_ci(SAMPLE, seed=3) != bootstrap_ci(SAMPLE, seed=4)


def test_bootstrap_ci_none_when_nothing_to_average() -> None:
    assert bootstrap_ci(np.array([])) is None
    assert bootstrap_ci(np.array([np.nan, np.nan])) is None


def test_bootstrap_ci_ignores_nan() -> None:
    with_nan = np.array([0.0, np.nan, 1.0, 1.0, np.nan])
    assert bootstrap_ci(with_nan, seed=5) == bootstrap_ci(np.array([0.0, 1.0, 1.0]), seed=5)


def test_bootstrap_ci_hand_computed_cases() -> None:
    assert bootstrap_ci(np.array([0.25, 0.25, 0.25])) == (0.25, 0.25)  # constant: no spread
    assert bootstrap_ci(np.array([0.7])) == (0.7, 0.7)
    # Resampled means of [0, 1] are 0, 0.5, 1 with probability 1/4, 1/2, 1/4: the 2.5% and 97.5% percentiles
    # are the extremes.
    assert bootstrap_ci(np.array([0.0, 1.0]), n_boot=1000) == (0.0, 1.0)


def test_bootstrap_ci_chunking_matches_a_single_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    import doceval.scoring.stats as stats

    one_pass = bootstrap_ci(SAMPLE, n_boot=500, seed=11)
    # 200 * 7 elements per chunk forces many chunks drawn from the same generator: same draws, same interval.
    monkeypatch.setattr(stats, "_MAX_CHUNK_ELEMENTS", 200 * 7)
    assert bootstrap_ci(SAMPLE, n_boot=500, seed=11) == one_pass


def test_bootstrap_ci_rejects_bad_parameters() -> None:
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_ci(SAMPLE, n_boot=0)
    with pytest.raises(ValueError, match="alpha"):
        bootstrap_ci(SAMPLE, alpha=1.0)


def test_paired_ci_of_identical_arrays_is_zero() -> None:
    assert paired_bootstrap_ci(SAMPLE, SAMPLE.copy()) == (0.0, 0.0)


def test_paired_ci_constant_shift() -> None:
    base = np.array([0.0, 1.0, 0.0, 1.0])
    assert paired_bootstrap_ci(base, base + 1.0) == (1.0, 1.0)
    assert paired_bootstrap_ci(base + 1.0, base) == (-1.0, -1.0)


def test_paired_ci_uses_only_entries_where_both_apply() -> None:
    base = np.array([1.0, np.nan, 0.0, 0.5])
    new = np.array([1.0, 1.0, np.nan, 0.5])
    assert paired_bootstrap_ci(base, new) == (0.0, 0.0)  # only entries 0 and 3 pair up, both unchanged
    assert paired_bootstrap_ci(np.array([np.nan, 1.0]), np.array([0.0, np.nan])) is None


def test_paired_ci_contains_the_mean_difference_and_is_deterministic() -> None:
    base = SAMPLE
    new = SAMPLE + np.random.default_rng(99).normal(0.05, 0.1, SAMPLE.size)
    lo, hi = interval(paired_bootstrap_ci(base, new, seed=2))
    assert lo < (new - base).mean() < hi
    assert paired_bootstrap_ci(base, new, seed=2) == (lo, hi)


def test_paired_ci_detects_a_small_shift_that_unpaired_intervals_miss() -> None:
    # Pairing removes entry difficulty: +0.02 on a U(0,1) spread is invisible to the two single-sample
    # intervals (they overlap) but the paired interval is tight around 0.02 and excludes 0.
    base = np.random.default_rng(5).random(300)
    new = base + 0.02
    b_lo, b_hi = interval(bootstrap_ci(base))
    n_lo, n_hi = interval(bootstrap_ci(new))
    assert b_lo < n_lo < b_hi < n_hi  # the single-sample intervals overlap
    lo, hi = interval(paired_bootstrap_ci(base, new))
    assert lo > 0.0 and lo == pytest.approx(0.02) and hi == pytest.approx(0.02)


def test_paired_rejects_misaligned_arrays() -> None:
    with pytest.raises(ValueError, match="aligned"):
        paired_bootstrap_ci(np.zeros(3), np.zeros(2))
    with pytest.raises(ValueError, match="aligned"):
        win_tie_loss(np.zeros(3), np.zeros(2))


def test_win_tie_loss() -> None:
    base = np.array([0.0, 1.0, 0.5, np.nan, 1.0, 0.2, 0.0])
    new = np.array([1.0, 1.0, 0.0, 1.0, np.nan, 0.3, 0.0])
    # pairs: 0 win, 1 tie, 2 loss, 3 and 4 skipped (NaN), 5 win, 6 tie
    result = win_tie_loss(base, new)
    assert result == (2, 2, 1)
    assert all(type(x) is int for x in result)
    assert win_tie_loss(np.array([np.nan]), np.array([1.0])) == (0, 0, 0)
