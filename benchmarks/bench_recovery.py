"""Coverage of memory recovery's interval (docs/design.md 4.6): simulated conversation replays, the true recovery
known, the interval of doceval.scoring.conversations.ratio_interval checked against it.

    python benchmarks/bench_recovery.py [--reps 300] [--cells 48:0.95,96:0.95]

Each replication draws ``m`` conversations of 1-3 needs_memory turns (0/1 scores, as hit_rate): the reset
replay scores 1 with probability 0.1, the standalone replay at least as often (0.8 more), and memory recovers a
turn (scores as the standalone replay does, else as the reset one) with a per-conversation probability drawn
from Beta(4q, 4(1 - q)), so turns of one conversation are correlated and the true recovery is q. The interval
inverts the paired cluster interval (whatever method `cluster_paired_interval` uses), so its coverage is
that method's on benefit - q x ceiling: this measures both. The cells: 12, 24 and 48 conversations at recoveries
0.3, 0.7 and 0.95, recoveries 0.85 and 0.9 at 24 and 48 (near 1, where the residuals are skewed), 96 at 0.7 and
0.95, and 48 at 0.05 (the mirror near 0). Targets: every cell >= 0.92, every row (a conversation count's cells)
>= 0.94.
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict

import numpy as np

from doceval.scoring.conversations import ClusterSettings, ratio_interval

CELLS = (
    "12:0.3,12:0.7,12:0.95,24:0.3,24:0.7,24:0.85,24:0.9,24:0.95,"
    "48:0.05,48:0.3,48:0.7,48:0.85,48:0.9,48:0.95,96:0.7,96:0.95"
)


def replicate(rng: np.random.Generator, m: int, q: float) -> tuple[list[np.ndarray], list[np.ndarray]]:
    benefit, ceiling = [], []
    for _ in range(m):
        k = int(rng.integers(1, 4))
        recovered = rng.beta(4 * q, 4 * (1 - q))
        reset = rng.binomial(1, 0.1, k).astype(float)
        alone = np.maximum(reset, rng.binomial(1, 0.8, k))
        memory = np.where(rng.random(k) < recovered, alone, reset)
        benefit.append(memory - reset)
        ceiling.append(alone - reset)
    return benefit, ceiling


def cell(m: int, q: float, reps: int, seed: int) -> tuple[float, int, int, float]:
    """(coverage over the replications with an interval, replications with one, without one, mean width)."""
    rng = np.random.default_rng(seed)
    settings = ClusterSettings(1000, 0)
    covered = with_ci = without = 0
    widths = []
    for _ in range(reps):
        benefit, ceiling = replicate(rng, m, q)
        total = float(np.concatenate(ceiling).mean())
        if total == 0.0:
            without += 1
            continue
        ci, _ = ratio_interval(benefit, ceiling, float(np.concatenate(benefit).mean()) / total, settings)
        if ci is None:
            without += 1
            continue
        with_ci += 1
        covered += ci[0] <= q <= ci[1]
        widths.append(ci[1] - ci[0])
    return covered / max(with_ci, 1), with_ci, without, float(np.mean(widths)) if widths else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--cells", default=CELLS, help="conversations:recovery, comma-separated")
    args = parser.parse_args()
    started = time.perf_counter()
    rows: dict[int, list[float]] = defaultdict(list)
    print("conversations  recovery  coverage  intervals  no interval  mean width")
    for m, q in ((int(a), float(b)) for a, b in (c.split(":") for c in args.cells.split(","))):
        coverage, n, none, width = cell(m, q, args.reps, seed=1000 * m + round(100 * q))
        rows[m].append(coverage)
        print(f"{m:>13}  {q:>8.2f}  {coverage:>8.3f}  {n:>9}  {none:>11}  {width:>10.3f}", flush=True)
    means = ", ".join(f"{m}: {np.mean(c):.3f}" for m, c in rows.items())
    print(f"row means (a conversation count's cells): {means}")
    print(f"{args.reps} replications per cell, 95% intervals, {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
