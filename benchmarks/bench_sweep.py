"""A 100-point floor sweep from the cached candidates against the naive way (re-retrieve at every point).

    python benchmarks/bench_sweep.py [--points 100] [--naive-points 3]

Both sides compute the same thing per point: retrieval + answer metrics of the calibration split with the
global floor at that point (extractive answerer, no judge). The naive side opens the index and retrieves every
question again for each point; it is timed on a few points and the per-point cost is scaled to the full sweep
(stated in the output). Needs `dvc repro retrieve` (the candidate cache) and the index.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from doceval.config.compose import compose, load_params
from doceval.harness.candidate_cache import load_candidates
from doceval.harness.candidates import compute_candidates
from doceval.harness.evaluate import evaluate
from doceval.harness.plan import EvalOptions, load_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100)
    parser.add_argument("--naive-points", type=int, default=3)
    args = parser.parse_args()
    params = load_params()
    cfg = replace(
        params, floors=compose(["floors=zero"]).floors, split=replace(params.split, name="calibration")
    )
    t0 = time.perf_counter()
    cands = load_candidates(Path(params.paths.runs))
    load_s = time.perf_counter() - t0
    low, high = cands.meta["score_range"]
    scores = [s for ranked in cands.ranked.values() for _, s in ranked]
    grid = np.linspace(max(low, min(scores)), min(high, max(scores)), args.points)
    tmp = Path(tempfile.mkdtemp())

    def point(floor: float, candidates: object, i: int) -> dict:
        opts = EvalOptions(
            score_floor=float(floor), candidates=candidates, progress=False, run_dir=tmp / str(i)
        )  # type: ignore[arg-type]
        return evaluate(cfg, opts)["metrics"]

    t0 = time.perf_counter()
    cached = [point(f, cands, i) for i, f in enumerate(grid)]
    cached_s = time.perf_counter() - t0 + load_s

    corpus, entries, golden_path, md5 = load_inputs(cfg, EvalOptions(progress=False))
    naive_idx = np.linspace(0, len(grid) - 1, args.naive_points).astype(int)
    t0 = time.perf_counter()
    for j, i in enumerate(naive_idx):
        fresh = compute_candidates(
            cfg, corpus, entries, golden_path, md5, progress=False
        )  # opens the index again
        naive = point(grid[i], fresh, 10_000 + j)
        assert (
            naive["hit_rate"] == cached[i]["hit_rate"]
            and naive["refused_correctly"] == cached[i]["refused_correctly"]
        )
    naive_per_point = (time.perf_counter() - t0) / len(naive_idx)
    naive_s = naive_per_point * len(grid)

    print(
        f"machine: {platform.platform()}, {os.cpu_count()} cpus; retriever {params.retriever.name}; "
        f"{len(entries)} golden entries, {sum(e.split in ('calibration', None) for e in entries)} in the calibration split"
    )
    print(
        f"cached sweep: {len(grid)} points in {cached_s:.2f} s ({1000 * cached_s / len(grid):.1f} ms/point, "
        f"loading the cache {load_s:.2f} s included)"
    )
    print(
        f"naive sweep: {naive_per_point:.2f} s/point measured on {len(naive_idx)} points -> {naive_s:.1f} s "
        f"for {len(grid)} points (same metrics at the measured points)"
    )
    print(f"speed-up: {naive_s / cached_s:.0f}x (target >= 50x)")


if __name__ == "__main__":
    main()
