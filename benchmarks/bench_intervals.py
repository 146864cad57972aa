"""Coverage of the nominal 95% intervals: the old percentile bootstrap against the new intervals.

    python benchmarks/bench_intervals.py [--summary eval/summary.json ...] [--sets 2000] [--no-build] [--workers 2]

- Binary, single run: the EXACT coverage of each interval, summed over the binomial distribution (an interval
  for a 0/1 metric depends only on the count x, so one interval per x = 0..n is all it takes), for the old
  percentile bootstrap (``bootstrap_ci``), mid-P (the default) and the Wilson and Jeffreys options.
- Binary, paired: two runs with the same true rate (true change 0) and a stated correlation between a pair's
  two outcomes; simulated 2x2 tables, coverage of 0 by Newcombe's interval and by the old paired percentile
  bootstrap, and the type-I error of the exact McNemar test.
- Continuous: per-entry values (reciprocal ranks, recalls, nDCGs) of real runs taken as the population;
  samples drawn from it with replacement, coverage of the population mean by the BCa interval (``interval``)
  and by the old ``bootstrap_ci``; paired by entry id when two runs cover the same entries: the sign-flip
  interval of ``paired_change`` over the samples with at least 5 differing entries (the share with fewer, which
  print "too few differing entries" instead, on its own line), the old paired percentile bootstrap over all.
  Without ``--no-build`` a second real run is made here (same retriever, no floors) to pair with the headline
  run. benchmarks/bench_paired_coverage.py holds the grid where most differences are 0.

Targets (binary; the continuous tables use the same thresholds with the sizes n >= 20 as the window): over
each window of neighbouring rates mean coverage >= 0.94 for n >= 20; no cell below 0.90 for n >= 20 nor below
0.85 for n in {5, 10}; no zero-width interval. The benchmark reports; it exits 0 whether or not they are met.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
from scipy.stats import binom

from doceval.scoring import intervals as intervals_mod
from doceval.scoring.intervals import interval, paired_change
from doceval.scoring.proportions import jeffreys, mcnemar_exact_p, midp, newcombe_paired, wilson
from doceval.scoring.stats import bootstrap_ci, paired_bootstrap_ci

RATES: tuple[float, ...] = (0.02, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.98)
SIZES: tuple[int, ...] = (5, 10, 20, 43, 100, 500)
WINDOW = 3  # neighbouring rates averaged: integer counts make single cells jump, a window smooths that
ALPHA = 0.05
RHO = 0.5  # correlation between a pair's two outcomes in the paired binary simulation
N_BOOT = 1000  # resamples of every bootstrap, old and new
SEED = 0
METRICS: tuple[str, ...] = ("mrr", "recall", "ndcg")
LARGE_N = 20
WINDOW_MIN, CELL_MIN_LARGE, CELL_MIN_SMALL = 0.94, 0.90, 0.85
EPS = 1e-9  # a bound equal to the true value up to float rounding counts as covering it
MIN_SCORED = 200  # paired: a size judged only where this many samples print an interval (s.e. <= 0.016)

Bounds = Callable[[int, int], tuple[float, float]]  # (successes, n) -> (lo, hi)
Table = dict[int, list[float]]  # n -> one value per column (rates or sizes)


# ---------------------------------------------------------------------------------------------- pure parts


def covers(lo: np.ndarray | float, hi: np.ndarray | float, truth: float) -> np.ndarray:
    return np.asarray((np.asarray(lo) <= truth + EPS) & (np.asarray(hi) >= truth - EPS))


def count_bounds(method: Bounds, n: int) -> np.ndarray:
    """The interval for every count x = 0..n, shape (n + 1, 2)."""
    return np.array([method(x, n) for x in range(n + 1)], dtype=np.float64)


def exact_coverage(bounds: np.ndarray, n: int, rate: float) -> float:
    """P(the interval covers ``rate``) for X ~ Binomial(n, rate): the pmf summed over the covered counts."""
    pmf = binom.pmf(np.arange(n + 1), n, rate)
    return float(pmf[covers(bounds[:, 0], bounds[:, 1], rate)].sum())


def window_means(row: Sequence[float], width: int = WINDOW) -> list[float]:
    """Mean of each run of ``width`` neighbouring columns (len(row) - width + 1 windows)."""
    return [float(np.mean(row[i : i + width])) for i in range(len(row) - width + 1)]


def window_labels(columns: Sequence[float], width: int = WINDOW) -> list[str]:
    return [f"{columns[i]:g}-{columns[i + width - 1]:g}" for i in range(len(columns) - width + 1)]


def old_binary_bounds(x: int, n: int) -> tuple[float, float]:
    ci = bootstrap_ci(np.repeat([1.0, 0.0], [x, n - x]), n_boot=N_BOOT, seed=SEED, alpha=ALPHA)
    assert ci is not None
    return ci


def paired_probs(p: float, rho: float) -> tuple[tuple[float, float, float, float], bool]:
    """Cell probabilities (both, base_only, new_only, neither) for two runs with rate ``p`` each and outcome
    correlation ``rho``; P(both) = p^2 + rho p (1 - p), clipped to [max(0, 2p - 1), p] (True when clipped)."""
    both = p * p + rho * p * (1.0 - p)
    clipped = min(max(both, max(0.0, 2.0 * p - 1.0)), p)
    return (clipped, p - clipped, p - clipped, 1.0 - 2.0 * p + clipped), clipped != both


@cache
def _newcombe(table: tuple[int, int, int, int]) -> tuple[float, float]:
    return newcombe_paired(*table, alpha=ALPHA)


@cache
def _mcnemar(base_only: int, new_only: int) -> float:
    return mcnemar_exact_p(base_only, new_only)


def old_paired_bounds(tables: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The old paired percentile bootstrap for each 2x2 table, shape (tables, 2), vectorised: the differences
    new - base take -1 (base_only), 0, +1 (new_only), so a resample is multinomial counts over those three,
    drawn as k+ ~ Bin(n, c/n), then k- ~ Bin(n - k+, b/(n - c)); the same distribution as
    ``paired_bootstrap_ci`` resampling entries."""
    n = tables.sum(axis=1)[:, None]
    b, c = tables[:, 1:2], tables[:, 2:3]
    plus = rng.binomial(n, c / n, size=(len(tables), N_BOOT))
    rest = n - c
    minus = rng.binomial(n - plus, np.divide(b, rest, out=np.zeros(b.shape), where=rest > 0))
    means = (plus - minus) / n
    bounds: np.ndarray = np.quantile(means, [ALPHA / 2.0, 1.0 - ALPHA / 2.0], axis=1).T
    return bounds


# ---------------------------------------------------------------------------------------------- reporting


@dataclass
class Report:
    """Collects the printed lines and the missed targets."""

    lines: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)
        print(*lines, sep="\n", flush=True)


def fmt_table(
    title: str, columns: Sequence[str], table: Table, worst: str = "min", width: int = 7
) -> list[str]:
    """Rows n, the given columns, then the row mean and the worst cell (min for coverage, max for errors)."""
    pick = min if worst == "min" else max
    head = f"{'n':>4} " + "".join(f"{c:>{width}}" for c in columns) + f"{'mean':>8}{'worst':>7}"
    out = [title, head]
    for n, row in table.items():
        cells = "".join(f"{v:>{width}.3f}" for v in row)
        out.append(f"{n:>4} {cells}{np.mean(row):>8.3f}{pick(row):>7.3f}")
    return out


def check_binary(
    report: Report, name: str, table: Table, zero_width: int, columns: Sequence[float], role: str
) -> None:
    """Window table and the summary lines of one method. ``role``: "reference" (no target), "default" (what
    doceval uses unless told otherwise: its misses fail the TARGETS line) or "option" (checked and shown)."""
    labels = window_labels(columns)
    wins = {n: window_means(row) for n, row in table.items()}
    title = f"{name}: mean coverage per window of {WINDOW} neighbouring rates"
    report.add(*fmt_table(title, labels, wins, width=10))
    large = [n for n in table if n >= LARGE_N]
    small = [n for n in table if n < LARGE_N]
    w_val, w_n, w_i = min((v, n, i) for n in large for i, v in enumerate(wins[n]))
    l_val, l_n, l_i = min((v, n, i) for n in large for i, v in enumerate(table[n]))
    s_val, s_n, s_i = min((v, n, i) for n in small for i, v in enumerate(table[n]))
    mean = float(np.mean([v for row in table.values() for v in row]))
    report.add(
        f"{name}: mean {mean:.3f}; zero-width intervals: {zero_width}",
        f"  worst window (n >= {LARGE_N}) {w_val:.3f} at n={w_n}, rates {labels[w_i]}",
        f"  worst cell (n >= {LARGE_N}) {l_val:.3f} at n={l_n}, rate {columns[l_i]:g}; "
        f"worst cell (n < {LARGE_N}) {s_val:.3f} at n={s_n}, rate {columns[s_i]:g}",
    )
    if role == "reference":
        report.add("  (reference, no target)", "")
        return
    misses = []
    if w_val < WINDOW_MIN:
        misses.append(f"window {w_val:.3f} < {WINDOW_MIN} (n={w_n}, rates {labels[w_i]})")
    if l_val < CELL_MIN_LARGE:
        misses.append(f"cell {l_val:.3f} < {CELL_MIN_LARGE} (n={l_n}, rate {columns[l_i]:g})")
    if s_val < CELL_MIN_SMALL:
        misses.append(f"cell {s_val:.3f} < {CELL_MIN_SMALL} (n={s_n}, rate {columns[s_i]:g})")
    if zero_width:
        misses.append(f"{zero_width} zero-width intervals")
    verdict = "no: " + "; ".join(misses) if misses else "yes"
    if role == "option":
        report.add(f"  target met: {verdict} (an option, intervals.binary={name}; not the default)", "")
        return
    report.add(f"  target met: {verdict}", "")
    report.missed.extend(f"{name}: {m}" for m in misses)


# ---------------------------------------------------------------------------------------------- binary


def binary_single(report: Report) -> None:
    methods: list[tuple[str, Bounds, str]] = [
        ("old percentile bootstrap", old_binary_bounds, "reference"),
        ("midp", lambda x, n: midp(x, n, ALPHA), "default"),
        ("wilson", lambda x, n: wilson(x, n, ALPHA), "option"),
        ("jeffreys", lambda x, n: jeffreys(x, n, ALPHA), "option"),
    ]
    cols = [f"{r:g}" for r in RATES]
    for name, method, role in methods:
        t0 = time.perf_counter()
        table: Table = {}
        zero_width = 0
        for n in SIZES:
            bounds = count_bounds(method, n)
            zero_width += int((bounds[:, 1] <= bounds[:, 0]).sum())
            table[n] = [exact_coverage(bounds, n, r) for r in RATES]
        report.add(
            *fmt_table(f"{name}: exact coverage ({time.perf_counter() - t0:.1f} s)", cols, table),
        )
        check_binary(report, name, table, zero_width, RATES, role)


def binary_paired(report: Report, sets: int) -> None:
    cols = [f"{r:g}" for r in RATES]
    new_cov: Table = {}
    old_cov: Table = {}
    type1: Table = {}
    zero_new = zero_old = 0
    clipped = []
    boot_rng = np.random.default_rng(SEED)
    t0 = time.perf_counter()
    for n in SIZES:
        new_cov[n], old_cov[n], type1[n] = [], [], []
        for i, p in enumerate(RATES):
            probs, was_clipped = paired_probs(p, RHO)
            if was_clipped:
                clipped.append(f"p={p:g}")
            tables = np.random.default_rng((SEED, n, i)).multinomial(n, probs, size=sets)
            # Many sets share a table (always for small n): compute each distinct table once.
            uniq, inverse = np.unique(tables, axis=0, return_inverse=True)
            inverse = inverse.ravel()
            nc = np.array([_newcombe(tuple(int(v) for v in t)) for t in uniq])
            old = old_paired_bounds(uniq, boot_rng)
            pv = np.array([_mcnemar(int(t[1]), int(t[2])) for t in uniq])
            new_cov[n].append(float(covers(nc[:, 0], nc[:, 1], 0.0)[inverse].mean()))
            old_cov[n].append(float(covers(old[:, 0], old[:, 1], 0.0)[inverse].mean()))
            type1[n].append(float((pv < ALPHA)[inverse].mean()))
            zero_new += int((nc[:, 1] <= nc[:, 0])[inverse].sum())
            zero_old += int((old[:, 1] <= old[:, 0])[inverse].sum())
    took = time.perf_counter() - t0
    report.add(
        f"paired: both runs at rate p (true change 0), correlation rho={RHO} between a pair's outcomes:",
        "  P(both) = p^2 + rho p (1 - p)"
        + (f", clipped at {', '.join(clipped)}" if clipped else " (valid at every rate, nothing clipped)"),
        f"{sets} simulated 2x2 tables per cell ({took:.1f} s); Monte Carlo s.e. of a coverage of 0.95: "
        f"{np.sqrt(0.05 * 0.95 / sets):.4f}",
        "",
    )
    report.add(*fmt_table("old paired percentile bootstrap: coverage of 0", cols, old_cov))
    check_binary(report, "old paired percentile bootstrap", old_cov, zero_old, RATES, "reference")
    report.add(*fmt_table("newcombe: coverage of 0", cols, new_cov))
    check_binary(report, "newcombe", new_cov, zero_new, RATES, "default")
    report.add(*fmt_table(f"exact mcnemar: type-I error at {ALPHA} (worst = max)", cols, type1, worst="max"))
    worst = max(v for row in type1.values() for v in row)
    ok = worst <= ALPHA
    report.add(
        f"exact mcnemar: worst type-I error {worst:.4f}; target <= {ALPHA} met: {'yes' if ok else 'no'}", ""
    )
    if not ok:
        report.missed.append(f"mcnemar: type-I error {worst:.4f} > {ALPHA}")


# ---------------------------------------------------------------------------------------------- continuous


def run_label(summary: dict[str, Any]) -> str:
    recorded = summary.get("config", {})  # the summary's record of its config (any version), not a Config
    retriever = recorded.get("retriever")
    name = retriever.get("name", "?") if isinstance(retriever, dict) else str(retriever)
    floors = str(recorded.get("floors", {}).get("source", "?")).split(":", 1)[0]
    split = recorded.get("split")
    split = split.get("name") if isinstance(split, dict) else split
    return f"{name}, floors {floors}, split {split}, k={recorded.get('k')}"


def population(summary: dict[str, Any], metric: str) -> dict[str, float]:
    """Entry id -> the entry's non-null value of ``metric``."""
    return {
        str(e["id"]): float(e["scores"][metric])
        for e in summary["entries"]
        if e.get("scores", {}).get(metric) is not None
    }


def build_no_floor_run(headline: dict[str, Any]) -> dict[str, Any]:
    """The headline's retriever again without floors, over the same golden split: a second real run to pair."""
    from doceval.api import evaluate

    recorded = headline.get("config", {})  # the summary's record of its config (any version), not a Config
    golden = recorded.get("golden", {}).get("path", "data/golden/v1.jsonl")
    split = recorded.get("split") or None
    split = split.get("name") if isinstance(split, dict) else split
    # conf/floors has `zero` (floors at 0.0, i.e. none) and `calibrated`; there is no `none` option.
    return evaluate(golden, split=split, k=recorded.get("k"), overrides=["floors=zero"])


def _no_sign_flip(diffs: np.ndarray, **_: Any) -> float:
    return float("nan")


Row = tuple[list[float], list[float], list[float], int]  # new coverage, old coverage, side share, zero


def continuous_table(
    base: np.ndarray, new: np.ndarray | None, truth: float, sets: int, key: tuple[int, ...]
) -> Row:
    """Coverage of ``truth`` by the new and the old interval at every size, a side share, and the new interval's
    zero-width count. ``new`` None: samples of ``base`` (single run), the side share is that of samples that
    took the wilson-bounded fallback; else samples of the pairs (base[i], new[i]) and the interval of the mean of
    new - base, the side share is that of samples with too few differing entries for one (the new coverage is
    over the others)."""
    new_row, old_row, fallback = [], [], []
    zero = 0
    for n in SIZES:
        idx = np.random.default_rng((SEED, *key, n)).integers(0, base.size, size=(sets, n))
        hit_new = hit_old = fb = 0
        for i in range(sets):
            a = base[idx[i]]
            if new is None:
                iv = interval(a, n_boot=N_BOOT, seed=i, alpha=ALPHA)
                assert iv is not None
                lo, hi, method = iv.lo, iv.hi, iv.method
                old = bootstrap_ci(a, n_boot=N_BOOT, seed=i, alpha=ALPHA)
            else:
                b = new[idx[i]]
                ch = paired_change(a, b, n_boot=N_BOOT, seed=i, alpha=ALPHA)
                old = paired_bootstrap_ci(a, b, n_boot=N_BOOT, seed=i, alpha=ALPHA)
                assert old is not None
                hit_old += bool(covers(old[0], old[1], truth))
                if ch.ci is None:  # too few differing entries: no interval, the reason instead
                    fb += 1
                    continue
                (lo, hi), method = ch.ci, ch.method
            assert old is not None
            hit_new += bool(covers(lo, hi, truth))
            if new is None:
                hit_old += bool(covers(old[0], old[1], truth))
                fb += method.startswith("wilson-bounded")
            zero += hi <= lo
        scored = sets - (fb if new is not None else 0)
        new_row.append(hit_new / scored if scored else float("nan"))
        old_row.append(hit_old / sets)
        fallback.append(fb / sets)
    return new_row, old_row, fallback, zero


Task = tuple[np.ndarray, np.ndarray | None, float, int, tuple[int, ...]]  # continuous_table's arguments


def _task(args: Task) -> Row:
    # The sign-flip p-value is of no use here (the paired populations' true change is not 0) and would
    # dominate the cost: paired_change runs as it is, with the permutation test stubbed out.
    with mock.patch.object(intervals_mod, "sign_flip_p", _no_sign_flip):
        return continuous_table(*args)


def check_continuous(
    report: Report, name: str, row: Sequence[float], zero: int, scored: Sequence[float] | None = None
) -> None:
    """The binary targets with the sizes n >= 20 as the window (a metric's values have no rate grid). With
    ``scored`` (paired: samples that printed an interval, per size), a size with fewer than MIN_SCORED is shown,
    not judged: too few samples for its coverage (bench_paired_coverage.py draws that regime given enough)."""
    judged = [scored is None or scored[i] >= MIN_SCORED for i in range(len(SIZES))]
    large = [v for n, v, j in zip(SIZES, row, judged, strict=True) if n >= LARGE_N and j]
    misses = []
    if large and np.mean(large) < WINDOW_MIN:
        misses.append(f"mean (n >= {LARGE_N}) {np.mean(large):.3f} < {WINDOW_MIN}")
    for n, v, j in zip(SIZES, row, judged, strict=True):
        if not j:
            continue
        floor = CELL_MIN_LARGE if n >= LARGE_N else CELL_MIN_SMALL
        if v < floor:
            misses.append(f"cell {v:.3f} < {floor} (n={n})")
    if zero:
        misses.append(f"{zero} zero-width intervals")
    report.missed.extend(f"{name}: {m}" for m in misses)
    report.add(
        f"  {name}: zero-width {zero}; target met: {'no' if misses else 'yes'}",
        *(f"    missed: {m}" for m in misses),
    )


@dataclass
class Block:
    """One printed table of the continuous part: a population (single) or a pair of runs."""

    title: str
    names: tuple[str, str, str]  # row labels: new, old, fallback share
    check: str  # the name of its target lines, with {metric}
    notes: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    tasks: list[Task] = field(default_factory=list)


def load_runs(report: Report, paths: list[Path], build: bool) -> list[tuple[str, dict[str, Any]]]:
    runs: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        if not path.exists():
            report.add(f"continuous: {path} not found, skipped")
            continue
        summary = json.loads(path.read_text())
        runs.append((f"{path} ({run_label(summary)})", summary))
    if build and runs and Path("eval/summary.json").exists() and Path("data/runs/candidates").exists():
        t0 = time.perf_counter()
        try:
            extra = build_no_floor_run(runs[0][1])
            runs.append((f"built here ({run_label(extra)})", extra))
            report.add(
                f"built a second run here in {time.perf_counter() - t0:.1f} s: population 1's retriever, "
                "split and k, no floors",
                "  (doceval.api.evaluate with overrides=['floors=zero']: conf/floors has no `none`)",
            )
        except Exception as exc:  # the benchmark goes on with the runs it has
            report.add(f"could not build a no-floor run ({type(exc).__name__}: {exc}); continuing without it")
    return runs


def continuous(report: Report, paths: list[Path], sets: int, build: bool, workers: int) -> None:
    runs = load_runs(report, paths, build)
    if not runs:
        report.add("continuous: no summary to draw populations from; skipped", "")
        return
    blocks: list[Block] = []
    for r, (label, summary) in enumerate(runs):
        block = Block(
            f"population {r + 1}: {label}",
            ("bca (new)", "percentile (old)", "  fallback share"),
            f"bca {{metric}} [pop {r + 1}]",
        )
        for m, metric in enumerate(METRICS):
            pop = np.array(list(population(summary, metric).values()))
            if pop.size == 0:
                block.notes.append(f"  {metric}: no values")
                continue
            block.notes.append(
                f"  {metric}: n={pop.size}, mean {pop.mean():.4f}, {np.unique(pop).size} distinct values"
            )
            block.metrics.append(metric)
            block.tasks.append((pop, None, float(pop.mean()), sets, (r, m)))
        blocks.append(block)
    for r, (_, summary) in enumerate(runs[1:], start=2):
        block = Block(
            f"paired: population 1 (base) vs population {r} (new), by entry id, new - base",
            ("paired sign-flip (new)", "paired pct (old)", "  too-few share"),
            f"paired {{metric}} [1 vs {r}]",
        )
        for m, metric in enumerate(METRICS):
            base, new = population(runs[0][1], metric), population(summary, metric)
            ids = sorted(base.keys() & new.keys())
            if not ids:
                block.notes.append(f"  {metric}: no entry scored in both runs")
                continue
            b = np.array([base[i] for i in ids])
            w = np.array([new[i] for i in ids])
            d = w - b
            block.notes.append(
                f"  {metric}: {len(ids)} pairs, true mean difference {d.mean():+.4f}, "
                f"{np.unique(d).size} distinct differences, {int((d != 0).sum())} non-zero"
            )
            block.metrics.append(metric)
            block.tasks.append((b, w, float(d.mean()), sets, (100 + r, m)))
        blocks.append(block)
    t0 = time.perf_counter()
    tasks = [t for block in blocks for t in block.tasks]
    # Cells are independent and seeded per cell, so the figures do not depend on the number of workers.
    if workers > 1:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = iter(list(pool.map(_task, tasks)))
    else:
        results = iter([_task(t) for t in tasks])
    report.add(
        f"{sets} samples per cell; {len(tasks)} metric tables in {time.perf_counter() - t0:.1f} s on "
        f"{workers} worker process{'es' if workers > 1 else ''};",
        "  paired_change runs with its sign-flip test stubbed out (its CI is unchanged; its p-value is not",
        "  measured: the paired populations' true change is not 0).",
        "",
    )
    cols = [str(n) for n in SIZES]
    head = f"{'metric/method':<24}" + "".join(f"{c:>7}" for c in cols) + f"{'mean>=20':>9}{'worst':>7}"
    for block in blocks:
        rows = [(metric, next(results)) for metric in block.metrics]
        report.add(block.title, *block.notes, head)
        _print_rows(report, rows, block.names)
        for metric, (new_row, _, side, zero) in rows:
            paired = block.names[2].strip().startswith("too-few")
            scored = [sets * (1.0 - share) for share in side] if paired else None
            check_continuous(report, block.check.format(metric=metric), new_row, zero, scored)
        report.add("")


def _print_rows(report: Report, rows: list[tuple[str, Row]], names: Sequence[str]) -> None:
    for metric, (new_row, old_row, fallback, _) in rows:
        for name, row in zip(names, (new_row, old_row, fallback), strict=True):
            cells = "".join(f"{v:>7.3f}" for v in row)
            if name.startswith(" "):  # the fallback share: no mean or worst
                report.add(f"{name:<24}{cells}")
                continue
            large = [v for n, v in zip(SIZES, row, strict=True) if n >= LARGE_N]
            report.add(f"{metric + ' ' + name:<24}{cells}{np.mean(large):>9.3f}{min(row):>7.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--summary",
        type=Path,
        action="append",
        metavar="PATH",
        help="a summary JSON whose per-entry values are a population (repeatable; default eval/summary.json)",
    )
    parser.add_argument("--sets", type=int, default=2000, help="simulated sets per cell")
    parser.add_argument("--no-build", action="store_true", help="do not build the no-floor run to pair")
    parser.add_argument(
        "--workers", type=int, default=min(2, os.cpu_count() or 1), help="processes for the continuous part"
    )
    args = parser.parse_args()
    t_start = time.perf_counter()
    report = Report()
    report.add(
        f"machine: {platform.platform()}, {os.cpu_count()} cpus, python {platform.python_version()}, "
        f"numpy {np.__version__}",
        f"settings: nominal {1 - ALPHA:.0%}; rates {', '.join(f'{r:g}' for r in RATES)};",
        f"  n {', '.join(map(str, SIZES))}; {args.sets} sets per simulated cell; paired rho={RHO};",
        f"  n_boot={N_BOOT} for every bootstrap, old and new; seeds: old binary bootstrap {SEED}, simulated",
        f"  sets from default_rng(({SEED}, cell)), the interval of continuous set i with seed=i.",
        f"targets: mean over a window of {WINDOW} neighbouring rates >= {WINDOW_MIN} for n >= {LARGE_N};",
        f"  every cell >= {CELL_MIN_LARGE} for n >= {LARGE_N} and >= {CELL_MIN_SMALL} for n < {LARGE_N}; "
        "no zero-width interval.",
        "",
        "== binary, single run: exact coverage (summed over Binomial(n, rate))",
        "",
    )
    binary_single(report)
    report.add("== binary, paired: simulated", "")
    binary_paired(report, args.sets)
    report.add("== continuous: simulated from real runs' per-entry values", "")
    paths = args.summary or [Path("eval/summary.json")]
    continuous(report, paths, args.sets, not args.no_build, args.workers)
    report.add(f"total wall time: {time.perf_counter() - t_start:.1f} s")
    if report.missed:
        # The details one per line (they are long); the last line names what missed.
        report.add("missed targets:", *(f"  - {m}" for m in report.missed))
        names = dict.fromkeys(m.split(":", 1)[0] for m in report.missed)
        report.add("TARGETS: missed: " + ", ".join(names))
    else:
        report.add("TARGETS: all met")


if __name__ == "__main__":
    main()
