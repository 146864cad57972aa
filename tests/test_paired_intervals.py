"""Paired intervals where most differences are 0 (issue 41 item 1): the sign-flip interval
(doceval.scoring.stats.sign_flip_interval) against the test it inverts, the rule that fewer than 5 differing
units get no interval but the reason, and that reason on every surface that printed an interval: compare's
table (and the CLI), the trade-off and ANN-vs-exact sections, the report's memory tables, the conversations
stage's metrics file and the MLflow run."""

from __future__ import annotations

import contextlib
import io
import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mlflow import MlflowClient
from scipy import stats as sps
from test_report import base_summary, new_summary

from doceval.cli.main import main
from doceval.results.ann_md import ann_lines
from doceval.results.conversations_md import conversations_section
from doceval.results.tradeoff_md import tradeoff_lines
from doceval.scoring.conversations import ClusterSettings, cluster_paired_interval, memory_leak
from doceval.scoring.intervals import MIN_DIFFERING, paired_change
from doceval.scoring.registry import METRIC_NAMES
from doceval.scoring.stats import sign_flip_interval, sign_flip_p
from doceval.tracking import log_run

SETTINGS = ClusterSettings(n_boot=1000, seed=0)
ALPHA = 0.05


def _p_scipy(d: np.ndarray, delta: float) -> float:
    """The exact two-sided sign-flip p-value of "mean(d) = delta" by scipy (every sign vector)."""
    result = sps.permutation_test(
        (d - delta,), np.sum, permutation_type="samples", alternative="two-sided", n_resamples=np.inf
    )
    return float(result.pvalue)


def _p_clusters(sums: np.ndarray, counts: np.ndarray, delta: float) -> float:
    """The same p-value for clusters, by enumerating every sign vector (independent of the code under test)."""
    z = sums - delta * counts
    observed = abs(z.sum())
    extreme = sum(
        abs(np.dot(signs, z)) >= observed * (1 - 1e-12)
        for signs in itertools.product((-1.0, 1.0), repeat=z.size)
    )
    return extreme / 2**z.size


# ------------------------------------------------------------------------------- the interval itself


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_interval_ends_where_the_exact_sign_flip_test_starts_rejecting(seed: int) -> None:
    rng = np.random.default_rng(seed)
    d = np.where(rng.random(10) < 0.6, rng.choice([-1.0, -0.5, 0.3, 0.5, 1.0], 10), 0.0)
    d[:5] = [0.5, -0.3, 1.0, 0.5, 0.25]  # at least five differ
    lo, hi = sign_flip_interval(d)[0]
    assert lo < d.mean() < hi
    eps = 1e-7
    assert _p_scipy(d, lo + eps) > ALPHA and _p_scipy(d, hi - eps) > ALPHA
    assert _p_scipy(d, lo - eps) <= ALPHA and _p_scipy(d, hi + eps) <= ALPHA


def test_the_cluster_interval_weighs_each_conversation_by_its_turns() -> None:
    sums = np.array([2.0, 1.0, 0.0, -1.0, 3.0, 1.0, 0.0, 2.0])
    counts = np.array([2.0, 3.0, 1.0, 2.0, 3.0, 1.0, 2.0, 2.0])
    lo, hi = sign_flip_interval(sums, counts)[0]
    assert lo < sums.sum() / counts.sum() < hi
    eps = 1e-7
    assert _p_clusters(sums, counts, lo + eps) > ALPHA and _p_clusters(sums, counts, hi - eps) > ALPHA
    assert _p_clusters(sums, counts, lo - eps) <= ALPHA and _p_clusters(sums, counts, hi + eps) <= ALPHA


def test_drawn_flips_are_seeded_and_each_row_is_its_own_sample() -> None:
    rng = np.random.default_rng(4)
    rows = np.where(rng.random((3, 60)) < 0.3, rng.uniform(-1.0, 1.0, (3, 60)), 0.0)
    together = sign_flip_interval(rows, n_flips=999, seed=3)
    for r in range(3):
        assert sign_flip_interval(rows[r], n_flips=999, seed=3)[0] == pytest.approx(together[r])
    assert not np.allclose(sign_flip_interval(rows[0], n_flips=999, seed=4), together[0])


def test_five_differences_of_one_sign_cannot_reject_zero_and_six_can() -> None:
    # The smallest two-sided sign-flip p-value from k non-zero differences is 2 / 2**k: 0.0625 for 5.
    five = np.r_[np.full(5, 0.5), np.zeros(25)]
    six = np.r_[np.full(6, 0.5), np.zeros(24)]
    assert sign_flip_p(five) == pytest.approx(0.0625) and sign_flip_p(six) == pytest.approx(0.03125)
    lo5, hi5 = sign_flip_interval(five)[0]
    lo6, _ = sign_flip_interval(six)[0]
    assert lo5 <= 0.0 < hi5 and lo6 > 0.0


def test_five_units_in_all_can_never_reject_so_the_interval_is_everything() -> None:
    # 31 sign vectors besides the observed one, and flipping every sign is always as extreme: p >= 2/32.
    change = paired_change(np.full(5, 0.25), np.array([1.0, 0.5, 1.0, 0.5, 1.0]))
    assert change.method == "sign-flip" and change.ci == (-1.0, 1.0)
    with pytest.raises(ValueError, match="one shape"):
        sign_flip_interval(np.ones(4), np.ones(5))


# --------------------------------------------------------------------------------- paired_change


def test_one_differing_entry_gets_no_interval_but_the_reason() -> None:
    # Graded values (reciprocal ranks) on 31 entries, one of which moved: the BCa bootstrap printed
    # [-0.154, 0.000] here, "no gain" at 95% from a single entry.
    base = np.r_[np.full(30, 0.5), 1.0]
    new = base.copy()
    new[-1] = 0.0
    change = paired_change(base, new)
    assert change.ci is None, f"an interval from one differing entry: {change.ci}"
    assert change.note == "too few differing entries (n=1)"
    assert (change.p_value, change.n, change.method) == (1.0, 31, "")


def test_graded_changes_from_five_differing_entries_get_the_sign_flip_interval() -> None:
    base = np.r_[np.full(20, 1 / 3), np.full(10, 1.0)]
    new = base.copy()
    new[:MIN_DIFFERING] = [1.0, 0.5, 1.0, 0.0, 0.5]
    change = paired_change(base, new, n_boot=500, seed=2)
    assert change.method == "sign-flip" and change.note is None
    d = new - base
    assert change.ci == pytest.approx(tuple(sign_flip_interval(d, n_flips=500, seed=2)[0]))
    assert change.ci is not None and change.ci[0] < d.mean() < change.ci[1]
    assert change.p_value == sign_flip_p(d, seed=2)


def test_binary_runs_keep_newcombe_even_with_one_discordant_pair() -> None:
    base = np.r_[np.ones(20), np.zeros(11)]
    new = base.copy()
    new[0] = 0.0
    change = paired_change(base, new)
    assert change.method == "newcombe+mcnemar" and change.note is None
    assert change.ci is not None and change.ci[0] < 0.0 < change.ci[1]  # spans 0, never ends on it


# --------------------------------------------------------------------------------- conversations


def _turn(conv: str, n: int, value: float) -> dict[str, Any]:
    scores: dict[str, float | None] = dict.fromkeys(METRIC_NAMES)
    scores["version_correctness"] = value
    return {"id": f"{conv}#{n}", "conversation": conv, "turn": n, "needs_memory": False, "stage": "ok",
            "out_of_scope": False, "scores": scores}  # fmt: skip


def _v2_leak() -> dict[str, Any]:
    """Issue 41's V2: 31 turns over 24 conversations, one turn right isolated and wrong with warm memory."""
    isolated, warm = [], []
    for i in range(24):
        for n in (1, 2) if i < 7 else (1,):
            value = float((i + n) % 2)
            isolated.append(_turn(f"c{i}", n, value))
            warm.append(_turn(f"c{i}", n, 1.0 if (i, n) == (3, 1) else value))
    return memory_leak(isolated, warm, SETTINGS)


def test_a_leak_from_one_differing_turn_has_no_interval_but_the_reason() -> None:
    row = _v2_leak()["version_correctness"]
    assert (row["n_turns"], row["n_conversations"]) == (31, 24)
    assert row["leak"] == pytest.approx(-1 / 31)
    assert row["ci95"] is None, f"an interval from one differing turn: {row['ci95']} ({row['ci_method']})"
    assert (row["ci_method"], row["ci_note"]) == (None, "too few differing conversations (n=1)")


def test_a_conversation_with_turns_that_cancel_still_counts_as_differing() -> None:
    diffs = [np.array([1.0, -1.0]), *(np.array([1.0]) for _ in range(4)), *(np.zeros(2) for _ in range(9))]
    paired = cluster_paired_interval(diffs, SETTINGS)
    assert paired.method == "cluster-sign-flip" and paired.ci is not None and paired.note is None
    assert cluster_paired_interval(diffs[1:], SETTINGS).note == "too few differing conversations (n=4)"


# --------------------------------------------------------------------------------------- surfaces


def test_the_compare_command_prints_the_reason_in_place_of_the_interval(tmp_path: Path) -> None:
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(json.dumps(base_summary()), encoding="utf-8")
    new.write_text(json.dumps(new_summary()), encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["compare", str(base), str(new), "--no-gate"]) == 0
    mrr = next(line for line in out.getvalue().splitlines() if line.startswith("mrr "))
    assert "too few differing entries (n=2)" in mrr and "[" not in mrr


def test_the_tradeoff_and_ann_sections_print_the_reason() -> None:
    row = {
        "metric": "mrr",
        "change": 0.01,
        "ci95": None,
        "ci_note": "too few differing entries (n=3)",
        "n": 40,
    }
    versus = {"global_floor": 0.3, "rows": [{**row, "global": 0.5, "per_library": 0.51, "p_holm": 1.0}]}
    lines = tradeoff_lines({"libraries": {}, "per_library_vs_global": versus}, None, {"metrics": {}})
    assert "| mrr | 0.500 | 0.510 | +0.010 (too few differing entries (n=3)) | 1.000 | 40 |" in lines
    ann = {"search": {"exact": False, "m": 16}, "exact": False, "k": 5, "split": "test",
           "rows": [{**row, "exact": 0.5, "configured": 0.51, "p": 1.0}], "overlap_at_k": {"mean": 1.0, "n": 40}}  # fmt: skip
    assert any("| too few differing entries (n=3) |" in line for line in ann_lines(ann))


def _conversation_metrics(leak: dict[str, Any]) -> dict[str, Any]:
    return {"conversations": {"n_conversations": 24, "n_turns": 31, "n_needs_memory": 0, "turns": {},
                              "per_conversation": {}, "memory_leak": leak}}  # fmt: skip


def test_the_report_and_the_metrics_file_say_why_a_leak_has_no_interval() -> None:
    from doceval.stages.conversations import flat_metrics  # the stage module: ray-free, imported here alone

    metrics = _conversation_metrics(_v2_leak())
    row = next(line for line in conversations_section(metrics) if line.startswith("| version_correctness |"))
    assert row.endswith("| -0.0323 (too few differing conversations (n=1)) | - | 31 |")
    flat = flat_metrics({"metrics": metrics, "config": {"split": "test", "k": 5}})
    name = "conversations.memory_leak.version_correctness"
    assert flat[name] == pytest.approx(-1 / 31) and f"{name}_ci_lo" not in flat
    assert flat[f"{name}_ci_note"] == "too few differing conversations (n=1)"


@pytest.mark.slow
def test_the_mlflow_run_carries_the_reason_as_a_tag(tmp_path: Path) -> None:
    summary = base_summary()
    summary["metrics"].update(_conversation_metrics(_v2_leak()))
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = MlflowClient(uri).get_run(log_run(summary, uri=uri, run_name="leak"))
    name = "conversations.memory_leak.version_correctness"
    assert run.data.metrics[name] == pytest.approx(-1 / 31) and f"{name}_ci_lo" not in run.data.metrics
    assert run.data.tags[f"{name}_ci_note"] == "too few differing conversations (n=1)"
