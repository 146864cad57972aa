"""Tests for the pure parts of benchmarks/bench_intervals.py (exact coverage, window means) and of
benchmarks/run_all.py (the ``--only`` splice of one sub-block of docs/benchmarks.md's suite block)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from doceval.scoring.proportions import wilson

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


@functools.cache
def _load(name: str) -> Any:
    """benchmarks/<name>.py as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


def test_exact_coverage_of_wilson_at_n20_rate002_by_hand() -> None:
    bench = _load("bench_intervals")
    bounds = bench.count_bounds(lambda x, n: wilson(x, n), 20)
    # Wilson at n=20: x=0 -> [0, 0.161], x=1 -> [0.0089, 0.236] cover 0.02; x=2 -> [0.0279, 0.301] and every
    # larger x start above 0.02. So the coverage is P(X=0) + P(X=1) for X ~ Binomial(20, 0.02):
    # 0.98^20 + 20 * 0.02 * 0.98^19 = 0.66761 + 0.27250 = 0.94010.
    assert bounds[1, 0] < 0.02 < bounds[2, 0]
    hand = 0.98**20 + 20 * 0.02 * 0.98**19
    assert bench.exact_coverage(bounds, 20, 0.02) == pytest.approx(hand, abs=1e-12)
    assert hand == pytest.approx(0.94010, abs=1e-5)


def test_exact_coverage_counts_every_covered_count() -> None:
    bench = _load("bench_intervals")
    everything = np.array([[0.0, 1.0]] * 6)  # an interval of [0, 1] for every x covers any rate
    assert bench.exact_coverage(everything, 5, 0.3) == pytest.approx(1.0)
    nothing = np.array([[0.9, 1.0]] * 6)
    assert bench.exact_coverage(nothing, 5, 0.3) == 0.0


def test_window_means_on_a_hand_made_row() -> None:
    bench = _load("bench_intervals")
    row = [0.90, 0.96, 0.93, 1.00, 0.94]
    # windows of 3: (0.90, 0.96, 0.93), (0.96, 0.93, 1.00), (0.93, 1.00, 0.94)
    assert bench.window_means(row, 3) == pytest.approx([0.93, 0.9633333, 0.9566667])
    assert bench.window_means(row, 5) == pytest.approx([0.946])
    assert bench.window_labels([0.02, 0.05, 0.1, 0.3], 3) == ["0.02-0.1", "0.05-0.3"]


def test_paired_probs_are_a_distribution_with_the_stated_margins() -> None:
    bench = _load("bench_intervals")
    (both, base_only, new_only, neither), clipped = bench.paired_probs(0.3, 0.5)
    assert both == pytest.approx(0.09 + 0.5 * 0.3 * 0.7) and not clipped
    assert both + base_only == pytest.approx(0.3) and both + new_only == pytest.approx(0.3)
    assert both + base_only + new_only + neither == pytest.approx(1.0)
    # rho = -1 at p = 0.3 asks for P(both) < 0: clipped to 0.
    (both, *_), clipped = bench.paired_probs(0.3, -1.0)
    assert both == 0.0 and clipped


README = """# Project

## Benchmarks

<!-- bench:start -->
Measured 2026-01-01 on Linux, 2 CPUs, by `python benchmarks/run_all.py`.

**Metrics: one** (17 s)

```
metrics output
```

**Interval coverage** (90 s)

```
old coverage
table
```

**Index stage** (40 s)

```
index output
```
<!-- bench:end -->

## After
"""


def test_splice_replaces_one_sub_block_and_keeps_the_others() -> None:
    run_all = _load("run_all")
    block = run_all.sub_block("Interval coverage", 61.4, "new coverage\nTARGETS: all met")
    out = run_all.splice_sub_blocks(README, [("Interval coverage", block)])
    assert "**Interval coverage** (61 s)\n\n```\nnew coverage\nTARGETS: all met\n```" in out
    assert "old coverage" not in out and "(90 s)" not in out
    # everything else, the "Measured" line included, is as it was
    expected = README.replace("**Interval coverage** (90 s)", "**Interval coverage** (61 s)").replace(
        "old coverage\ntable", "new coverage\nTARGETS: all met"
    )
    assert out == expected


def test_splice_appends_a_missing_sub_block_at_the_end_of_the_region() -> None:
    run_all = _load("run_all")
    block = run_all.sub_block("New bench", 3.0, "fresh")
    out = run_all.splice_sub_blocks(README, [("New bench", block)])
    assert out.count("**New bench**") == 1
    assert "index output\n```\n\n**New bench** (3 s)\n\n```\nfresh\n```\n\n<!-- bench:end -->" in out
    assert out.replace("\n**New bench** (3 s)\n\n```\nfresh\n```\n", "") == README.replace(
        "```\n<!-- bench:end -->", "```\n\n<!-- bench:end -->"
    )
    # a second splice of the same block replaces it instead of appending again
    again = run_all.splice_sub_blocks(out, [("New bench", run_all.sub_block("New bench", 4.0, "fresher"))])
    assert again.count("**New bench**") == 1 and "fresher" in again and "fresh\n" not in again


def test_splice_needs_the_markers() -> None:
    run_all = _load("run_all")
    with pytest.raises(ValueError, match="markers"):
        run_all.splice_sub_blocks("# no markers\n", [("x", ["**x** (1 s)"])])


def test_the_suite_block_lives_in_docs_benchmarks_not_in_the_readme() -> None:
    """Issue 40, C12: on main `make bench` rewrote a 515-line block between markers in README.md."""
    run_all = _load("run_all")
    assert run_all.START not in (ROOT / "README.md").read_text(encoding="utf-8")
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert page.count(run_all.START) == 1 and page.count(run_all.END) == 1
    done = [("Interval coverage", run_all.sub_block("Interval coverage", 61.4, "new coverage"))]
    whole = run_all.with_suite_block(README, done, ["Measured today.", "", *done[0][1]], only=False)
    assert "Measured today." in whole and "old coverage" not in whole and "**Index stage**" not in whole
    spliced = run_all.with_suite_block(README, done, [], only=True)
    assert "new coverage" in spliced and "**Index stage** (40 s)" in spliced and "## After" in spliced
