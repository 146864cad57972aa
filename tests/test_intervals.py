"""Intervals and tests (doceval.scoring.proportions, .stats, .intervals): published values for every method,
the degenerate cases, p-values against scipy's exact tests, and where they surface: summaries (breakdowns say
"too few"), compare (p and Holm), the gate's `non_regression.mode`, and `intervals.binary` from the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps
from test_eval_cli import DOCS, GOLDEN
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.errors import UsageError
from doceval.results import check_gate_config, compare, gate
from doceval.scoring.aggregate import aggregate
from doceval.scoring.intervals import MIN_N_BREAKDOWN, holm, interval, paired_change
from doceval.scoring.proportions import jeffreys, mcnemar_exact_p, midp, newcombe_paired, wilson
from doceval.scoring.registry import METRIC_NAMES
from doceval.scoring.stats import bca_ci, sign_flip_p

# ------------------------------------------------------------------------------ published examples


@pytest.mark.parametrize(
    "x,n,expected",
    [
        # Newcombe (1998), "Two-sided confidence intervals for the single proportion", Table II, score method
        (81, 263, (0.2553, 0.3662)),
        (15, 148, (0.0624, 0.1605)),
        (0, 20, (0.0, 0.1611)),
        (1, 29, (0.0061, 0.1718)),
        # Fagerland, Lydersen and Laake, "Statistical Analysis of Contingency Tables" (2017), 13 of 16
        (13, 16, (0.5699, 0.9341)),
    ],
)
def test_wilson_matches_published_values(x: int, n: int, expected: tuple[float, float]) -> None:
    assert wilson(x, n) == pytest.approx(expected, abs=5e-5)


def test_midp_matches_published_value_and_its_definition() -> None:
    assert midp(13, 16) == pytest.approx((0.5699, 0.9500), abs=5e-5)  # Fagerland et al. (2017)
    lo, hi = midp(7, 40)
    # the defining equations: half the probability of the observed count in each tail
    assert sps.binom.sf(7, 40, lo) + 0.5 * sps.binom.pmf(7, 40, lo) == pytest.approx(0.025, abs=1e-10)
    assert sps.binom.cdf(6, 40, hi) + 0.5 * sps.binom.pmf(7, 40, hi) == pytest.approx(0.025, abs=1e-10)
    assert midp(0, 10)[0] == 0.0 and midp(10, 10)[1] == 1.0
    with pytest.raises(ValueError, match="integer count"):
        midp(1.5, 3)


def test_jeffreys_matches_published_value_and_beta_quantiles() -> None:
    assert jeffreys(13, 16) == pytest.approx((0.5792, 0.9442), abs=5e-5)  # Fagerland et al. (2017)
    lo, hi = jeffreys(7, 40)
    assert (lo, hi) == pytest.approx(
        (sps.beta.ppf(0.025, 7.5, 33.5), sps.beta.ppf(0.975, 7.5, 33.5)), abs=1e-12
    )
    assert jeffreys(0, 10)[0] == 0.0 and jeffreys(10, 10)[1] == 1.0  # the boundary conventions


def test_newcombe_paired_matches_published_value() -> None:
    # Fagerland et al. (2017) chapter 8, Cavo et al. (2012): table [[59, 6], [16, 80]]; the row margin minus the
    # column margin is -0.0621 (95% CI -0.1186 to -0.0046). Rows = "new", columns = "base".
    lo, hi = newcombe_paired(both=59, base_only=16, new_only=6, neither=80)
    assert (lo, hi) == pytest.approx((-0.1186, -0.0046), abs=5e-5)
    assert mcnemar_exact_p(16, 6) == pytest.approx(0.0525, abs=5e-5)  # same table, exact conditional test


# ------------------------------------------------------------------------------------ degenerate cases


@pytest.mark.parametrize("method", [midp, wilson, jeffreys])
@pytest.mark.parametrize("x,n", [(0, 1), (1, 1), (0, 6), (6, 6), (0, 500), (500, 500)])
def test_score_intervals_are_never_zero_width(method: Any, x: int, n: int) -> None:
    lo, hi = method(x, n)
    assert 0.0 <= lo <= x / n <= hi <= 1.0 and hi - lo > 0.0


def test_six_of_six_no_longer_claims_certainty() -> None:  # the default method, mid-P
    # The percentile bootstrap printed [1.000, 1.000] for a held-out run with 6 of 6 refused.
    ci = interval(np.ones(6))
    assert ci is not None and ci.method == "midp"
    assert ci.hi == 1.0 and ci.lo == pytest.approx(midp(6, 6)[0]) and ci.lo < 0.65


@pytest.mark.parametrize(
    "counts",
    [(5, 0, 0, 5), (10, 0, 0, 0), (0, 0, 0, 10), (0, 0, 0, 1), (1, 0, 0, 0), (0, 1, 0, 0), (3, 2, 2, 3)],
)
def test_newcombe_paired_degenerate_tables_keep_positive_width(counts: tuple[int, int, int, int]) -> None:
    both, base_only, new_only, neither = counts
    n = sum(counts)
    lo, hi = newcombe_paired(*counts)
    diff = (new_only - base_only) / n
    assert -1.0 <= lo <= diff <= hi <= 1.0 and hi - lo > 0.0


def test_no_discordant_pairs_gives_p_one_and_a_symmetric_interval() -> None:
    change = paired_change(np.r_[np.ones(20), np.zeros(20)], np.r_[np.ones(20), np.zeros(20)])
    assert change.p_value == 1.0 and change.method == "newcombe+mcnemar"
    assert change.ci is not None and change.ci[0] == pytest.approx(-change.ci[1]) and change.ci[1] > 0


def test_continuous_fallbacks_are_stated_and_never_zero_width() -> None:
    tiny = interval(np.array([0.5, 1.0, 0.0]))
    assert tiny is not None and tiny.method == "wilson-bounded"
    assert (tiny.lo, tiny.hi) == pytest.approx(wilson(1.5, 3))
    constant = interval(np.full(43, 0.5))
    assert constant is not None and constant.method == "wilson-bounded" and constant.lo < 0.5 < constant.hi
    nothing = interval(np.zeros(43))  # all 0: a proportion of 0 out of 43, not a point
    assert nothing is not None and nothing.method == "midp" and (nothing.lo, nothing.hi) == midp(0, 43)
    spread = interval(np.r_[np.zeros(30), np.full(13, 0.5)])
    assert spread is not None and spread.method == "bca" and spread.lo < 13 * 0.5 / 43 < spread.hi
    # the values decide: a graded judge's 0/0.5 verdicts get the bootstrap, a 0/1 recall the score interval
    graded = interval(np.r_[np.zeros(10), np.full(10, 0.5)])
    assert graded is not None and graded.method == "bca"
    zero_one = interval(np.r_[np.zeros(28), 1.0])
    assert zero_one is not None and zero_one.method == "midp" and zero_one.lo > 0.0  # one hit seen: mean > 0
    same = np.linspace(0.1, 0.9, 15)
    none = paired_change(same, same.copy())  # continuous values, every difference 0: nothing to resample
    assert (none.ci, none.method, none.p_value) == (None, "", 1.0)
    assert none.note == "too few differing entries (n=0)"
    assert interval(np.array([np.nan])) is None
    assert paired_change(np.array([np.nan, 1.0]), np.array([1.0, np.nan])).ci is None


def test_bad_parameters_are_errors() -> None:
    with pytest.raises(ValueError, match="unknown binary interval method 'wald'"):
        interval(np.ones(3), binary_method="wald")
    with pytest.raises(ValueError, match="alpha"):
        interval(np.ones(3), alpha=1.0)
    with pytest.raises(ValueError, match="successes must be in"):
        wilson(4, 3)
    with pytest.raises(ValueError, match="aligned"):
        paired_change(np.ones(3), np.ones(4))


# ----------------------------------------------------------------------------- p-values against scipy


@pytest.mark.parametrize("b,c", [(0, 1), (1, 0), (3, 9), (16, 6), (0, 12), (40, 55), (7, 7)])
def test_mcnemar_exact_p_equals_scipy_binomtest(b: int, c: int) -> None:
    assert mcnemar_exact_p(b, c) == pytest.approx(sps.binomtest(min(b, c), b + c, 0.5).pvalue, rel=1e-12)


def test_mcnemar_is_exact_in_the_far_tail() -> None:
    assert mcnemar_exact_p(0, 60) == 2.0 * 0.5**60  # exact rational sum, rounded once
    assert mcnemar_exact_p(1, 60) == pytest.approx(2.0 * 61 * 0.5**61, rel=1e-15)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sign_flip_exact_p_equals_scipy_permutation_test(seed: int) -> None:
    d = np.round(np.random.default_rng(seed).normal(0.1, 0.3, 12), 3)
    expected = sps.permutation_test(
        (d,), np.mean, permutation_type="samples", alternative="two-sided", n_resamples=np.inf
    ).pvalue
    assert sign_flip_p(d) == pytest.approx(expected, rel=1e-9)


def test_sign_flip_monte_carlo_is_close_to_exact_and_never_zero() -> None:
    d = np.random.default_rng(5).normal(0.05, 0.3, 18)
    exact = sign_flip_p(d, exact_max=18)
    assert sign_flip_p(d, n_perm=40_000, seed=1) == pytest.approx(exact, abs=0.01)
    assert sign_flip_p(np.full(60, 0.5), n_perm=2_000) == pytest.approx(1 / 2001)
    assert sign_flip_p(np.zeros(8)) == 1.0


def test_bca_agrees_with_scipy_bootstrap() -> None:
    x = np.random.default_rng(3).exponential(0.2, 60).clip(0, 1)
    ours = bca_ci(x, n_boot=20_000, seed=0)
    ref = sps.bootstrap((x,), np.mean, method="BCa", n_resamples=20_000, random_state=0).confidence_interval
    assert ours is not None and ours == pytest.approx((ref.low, ref.high), abs=0.006)


def test_holm_by_hand() -> None:
    # sorted 0.01, 0.03, 0.04 of m = 3: 3 x 0.01 = 0.03, 2 x 0.03 = 0.06, max(0.06, 1 x 0.04) = 0.06
    assert holm([0.01, 0.04, None, 0.03]) == pytest.approx([0.03, 0.06, None, 0.06], abs=1e-12)
    assert holm([0.5, 0.9]) == [1.0, 1.0]
    assert holm([]) == []


# ------------------------------------------------------------------------------------------ summaries


def _rows(hits: list[float], library: str = "pydantic") -> list[dict[str, Any]]:
    rows = []
    for i, h in enumerate(hits):
        scores: dict[str, float | None] = {m: None for m in METRIC_NAMES}
        scores.update(hit_rate=h, recall=h, mrr=h / (1 + i % 3), ndcg=h, overrefusal_rate=0.0)
        rows.append({"id": f"{library}{i}", "library": library, "version": "1", "kind": "lookup", "out_of_scope": False,
                     "scores": scores, "split": "test", "question": f"q{i}?", "relevant_ids": ["d"],
                     "retrieved": [], "refused": False, "answer": "a"})  # fmt: skip
    return rows


def test_summary_states_methods_and_breakdowns_say_too_few() -> None:
    rows = _rows([1.0] * 30 + [0.0] * 10) + _rows([1.0] * (MIN_N_BREAKDOWN - 1), library="click")
    m = aggregate(rows, METRIC_NAMES)
    assert m["ci_method"]["hit_rate"] == "midp" and m["ci_method"]["mrr"] == "bca"
    assert m["ci95"]["hit_rate"] == pytest.approx(list(midp(39, 49)))
    assert m["intervals"]["binary"] == "midp" and m["intervals"]["min_n_breakdown"] == MIN_N_BREAKDOWN
    click, pyd = m["by_library"]["click"], m["by_library"]["pydantic"]
    assert click["hit_rate"] == 1.0 and click["ci95"]["hit_rate"] is None and "hit_rate" in click["too_few"]
    assert pyd["ci95"]["hit_rate"] == pytest.approx(list(midp(30, 40))) and pyd["too_few"] == []
    assert aggregate(rows, METRIC_NAMES, binary_method="jeffreys")["ci95"]["hit_rate"] == pytest.approx(
        list(jeffreys(39, 49))
    )


def test_report_prints_methods_and_too_few_instead_of_an_interval() -> None:
    from doceval.results.markdown import render_report

    rows = _rows([1.0] * 30 + [0.0] * 10) + _rows([1.0] * 4, library="click")
    md = render_report({"metrics": aggregate(rows, METRIC_NAMES), "config": CONFIG, "entries": rows})
    lo, hi = midp(34, 44)
    assert f"| hit_rate | 0.7727 | [{lo:.4f}, {hi:.4f}] | midp | 44 |" in md
    assert "| mrr | " in md and "| bca | 44 |" in md
    section = md.split("## Per library\n", 1)[1].split("##", 1)[0]
    assert "| click | 4 | 4 | 0 | 1.0000 (n<10) |" in section
    lo, hi = midp(30, 40)
    assert f"| pydantic | 40 | 40 | 0 | 0.7500 [{lo:.3f}, {hi:.3f}] |" in section
    assert "too few to say anything with confidence" in section


# ------------------------------------------------------------------------------------- gate: the mode


CONFIG = {"split": "test", "k": 5, "retriever": {"name": "dense"}, "floors": {"global": 0.0, "per_library": {},
          "source": "config", "provenance": {}}, "golden": {"path": "g.jsonl", "md5": "0f" * 16},
          "provenance": {"git_commit": "abc", "git_dirty": False}}  # fmt: skip


def _summary(hits: list[float]) -> dict[str, Any]:
    rows = _rows(hits)
    return {"metrics": aggregate(rows, METRIC_NAMES), "config": CONFIG, "entries": rows, "complete": True}


def _gate_cfg(mode: str, tolerance: float = 0.02) -> dict[str, Any]:
    nr = {
        "enabled": True,
        "tolerance": tolerance,
        "metrics": ["hit_rate", "mrr"],
        "mode": mode,
        "alpha": 0.05,
    }
    return {"thresholds": {}, "non_regression": nr}


def test_significant_mode_does_not_fail_on_noise_but_point_mode_does() -> None:
    base = _summary([1.0] * 60 + [0.0] * 40)
    noisy = _summary([1.0] * 57 + [0.0] * 43)  # 3 entries lost: -0.03, McNemar p = 0.25
    assert not gate(noisy, _gate_cfg("point"), base).passed
    result = gate(noisy, _gate_cfg("significant"), base)
    assert result.passed, result.failures
    assert any("hit_rate dropped by 0.0300" in n and "not significantly" in n for n in result.notes)
    assert "(significant at 0.05, Holm)" in result.line


def test_significant_mode_fails_a_real_drop_and_says_its_p() -> None:
    base = _summary([1.0] * 60 + [0.0] * 40)
    worse = _summary([1.0] * 40 + [0.0] * 60)  # 20 entries lost, none gained: p = 2 / 2**20
    result = gate(worse, _gate_cfg("significant"), base)
    assert not result.passed
    hit = next(f for f in result.failures if f.metric == "hit_rate")
    assert "Holm-adjusted p =" in hit.reason
    raw = mcnemar_exact_p(20, 0)
    assert raw == pytest.approx(2 * 0.5**20)
    assert f"{min(1.0, 2 * raw):.3g}" in hit.reason  # Holm over the two gated metrics


def test_significant_mode_needs_the_same_entries() -> None:
    base = _summary([1.0] * 60 + [0.0] * 40)
    other = _summary([1.0] * 50)
    with pytest.raises(UsageError, match="non_regression.mode: point"):
        gate(other, _gate_cfg("significant"), base)


@pytest.mark.parametrize(
    "key,value,needle",
    [("mode", "strict", "non_regression.mode=strict: expected one of significant, point"),
     ("alpha", 0.0, "non_regression.alpha=0.0: expected a number > 0 and <= 0.5"),
     ("alpha", True, "non_regression.alpha=true: expected a number")],
)  # fmt: skip
def test_bad_gate_mode_or_alpha_is_a_usage_error(key: str, value: Any, needle: str) -> None:
    cfg = _gate_cfg("significant")
    cfg["non_regression"][key] = value
    with pytest.raises(UsageError) as err:
        check_gate_config(cfg)
    assert needle in str(err.value)


def test_compare_holm_adjusts_over_the_metrics_compared() -> None:
    base, worse = _summary([1.0] * 60 + [0.0] * 40), _summary([1.0] * 40 + [0.0] * 60)
    result = compare(base, worse)
    p = {r.metric: r for r in result.rows}
    tested = [r for r in result.rows if r.p_value is not None]
    assert p["hit_rate"].p_holm == pytest.approx(min(1.0, len(tested) * p["hit_rate"].p_value), rel=1e-9)
    assert all(r.p_holm is not None and r.p_holm >= r.p_value for r in tested)


# ---------------------------------------------------------------------- the CLI: intervals.binary


@pytest.mark.parametrize("method", ["midp", "wilson", "jeffreys"])
def test_eval_cli_intervals_binary_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    golden = "".join(json.dumps({**e, "reference_answer": "ref"}) + "\n" for e in GOLDEN)
    make_tiny_project(tmp_path, DOCS, golden)
    monkeypatch.chdir(tmp_path)
    args = ["eval", "--no-track", "--quiet", "--output", "out.json", "retriever=bm25", "floors=zero",
            f"intervals.binary={method}"]  # fmt: skip
    assert main(args) == 0
    metrics = json.loads((tmp_path / "out.json").read_text())["metrics"]
    n_oos = metrics["counts"]["n_refused_correctly"]
    x = round(metrics["refused_correctly"] * n_oos)
    expected = {"midp": midp, "wilson": wilson, "jeffreys": jeffreys}[method](x, n_oos)
    assert metrics["ci95"]["refused_correctly"] == pytest.approx(list(expected))
    assert metrics["ci_method"]["refused_correctly"] == method and metrics["intervals"]["binary"] == method
    assert not math.isclose(*metrics["ci95"]["refused_correctly"])


def test_eval_cli_rejects_an_unknown_interval_method(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_tiny_project(tmp_path, DOCS, "".join(json.dumps(e) + "\n" for e in GOLDEN))
    monkeypatch.chdir(tmp_path)
    assert main(["eval", "--no-track", "--quiet", "--output", "out.json", "intervals.binary=wald"]) == 2
    assert not (tmp_path / "out.json").exists()


def test_midp_roots_are_scipys_brentq_to_the_last_bit() -> None:
    """The mid-P bounds use SciPy's compiled brentq loaded from its file (no scipy.optimize import at start-up);
    the public scipy.optimize.brentq gives the very same floats on every (x, n) up to 60 and random larger ones."""
    import random

    from scipy.optimize import brentq
    from scipy.special import bdtr, bdtrc

    from doceval.scoring import proportions

    loaded = proportions._brentq()
    pairs = [(x, n) for n in range(1, 61) for x in range(n + 1)]
    rng = random.Random(0)
    pairs += [(rng.randint(0, n), n) for n in (rng.randint(61, 2000) for _ in range(300))]
    checked = 0
    for x, n in pairs:
        if x == 0:
            continue

        def above(p: float, x: int = x, n: int = n) -> float:
            pmf = float(bdtr(x, n, p)) - float(bdtr(x - 1, n, p))
            return float(bdtrc(x, n, p)) + 0.5 * pmf - 0.025

        ours = loaded(above, 1e-15, 1.0 - 1e-15, 1e-14)
        assert ours == brentq(above, 1e-15, 1.0 - 1e-15, xtol=1e-14), (x, n)
        assert proportions.midp(x, n)[0] == ours
        checked += 1
    assert checked > 1800
