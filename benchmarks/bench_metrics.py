"""Benchmark: doceval retrieval metrics vs pytrec_eval and ranx on 10,000 entries x 100 candidates at k=10.

Run: ``.venv/bin/python benchmarks/bench_metrics.py [--entries N] [--candidates K] [--k K] [--seed S]``

Timings (seconds, time.perf_counter):
- doceval build_matrix: ranked lists of (doc_id, score) -> padded matrix (done once per cached run).
- doceval cut+scores: retrieval_scores at (floors, k): what every floor/k point of a sweep costs.
- pytrec_eval cold: RelevanceEvaluator construction + evaluate; warm: evaluate on the existing evaluator.
- ranx cold: Qrels/Run construction + first evaluate in this process (includes numba compilation, or loading
  numba's on-disk cache when an earlier process already compiled); warm: a second evaluate.
Building the input dicts that pytrec_eval and ranx need is timed separately (it is not counted for either).
Figures marked best, warm, and pytrec_eval cold (a new evaluator each time) are the best of a few repeats;
the garbage collector runs before each timed call.

Agreement is checked on the means: hit_rate/recall/ndcg at k against success_k/recall_k/ndcg_cut_k and ranx;
mrr@k against ranx mrr@k; trec_eval's recip_rank has no cutoff, so it is compared with doceval's uncut mrr.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from doceval.scoring.metrics import build_matrix
from doceval.scoring.registry import retrieval_scores

REPEATS = 3


def make_data(n: int, width: int, seed: int) -> tuple[list[list[tuple[str, float]]], list[set[str]]]:
    """Seeded ranked lists (distinct scores, descending) over a shared corpus, with 1-5 relevant per entry.

    Each relevant doc is a retrieved candidate with probability 0.6 (rank skewed to the top), else a corpus
    doc outside the list, so recall < 1 is common.
    """
    rng = np.random.default_rng(seed)
    pool = 1_000_000
    perm = rng.permutation(pool)
    starts = rng.integers(0, pool, n)
    cols = np.arange(width)
    # A contiguous window of a random permutation: unique ids within a row, overlapping across rows.
    ids = perm[(starts[:, None] + cols[None, :]) % pool]
    scores = -np.sort(-rng.random((n, width)), axis=1)
    n_rel = rng.integers(1, 6, n)
    ranked: list[list[tuple[str, float]]] = []
    relevant: list[set[str]] = []
    for i in range(n):
        names = [f"d{d}" for d in ids[i]]
        ranked.append(list(zip(names, scores[i].tolist(), strict=True)))
        rel: set[str] = set()
        for j in range(n_rel[i]):
            if rng.random() < 0.6:
                rel.add(names[int(width * rng.random() ** 3)])
            else:
                rel.add(f"d{perm[(starts[i] - 1 - j) % pool]}")
        relevant.append(rel)
    return ranked, relevant


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    # Collect first so garbage left by an earlier step is not charged to this one.
    gc.collect()
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def best_of(fn: Callable[[], Any], repeats: int = REPEATS) -> tuple[float, Any]:
    runs = [timed(fn) for _ in range(repeats)]
    return min(t for t, _ in runs), runs[-1][1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=10_000)
    ap.add_argument("--candidates", type=int, default=100)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    n, width, k = args.entries, args.candidates, args.k

    import pytrec_eval

    # ranx's hit_rate kernel warns about a uint64 -> int64 cast on every compile; it does not affect results.
    warnings.filterwarnings("ignore", message=".*unsafe cast from uint64 to int64.*")
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    cpu = platform.processor() or platform.machine()
    print(f"machine: {platform.platform()} | {cpu} | cpus={os.cpu_count()}")
    print(f"python {platform.python_version()} | numpy {np.__version__}")
    print(f"data: {n} entries x {width} candidates, k={k}, seed={args.seed}")
    ranked, relevant = make_data(n, width, args.seed)

    # --- doceval
    t_build_first, matrix = timed(lambda: build_matrix(ranked, relevant))
    t_build, matrix = best_of(lambda: build_matrix(ranked, relevant))
    floors = np.full(matrix.n, -np.inf)
    t_first_scores, _ = timed(lambda: retrieval_scores(matrix, floors, k))
    t_scores, ours = best_of(lambda: retrieval_scores(matrix, floors, k))
    ours_uncut_mrr = retrieval_scores(matrix, floors, matrix.width)["mrr"]

    # --- input dicts for the reference tools (shared, timed on their own)
    def make_dicts() -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
        qrels = {f"q{i}": dict.fromkeys(rel, 1) for i, rel in enumerate(relevant)}
        run = {f"q{i}": dict(lst) for i, lst in enumerate(ranked)}
        return qrels, run

    t_dicts, (qrels_d, run_d) = timed(make_dicts)

    # --- pytrec_eval
    measures = {f"success.{k}", f"recall.{k}", f"ndcg_cut.{k}", "recip_rank"}

    def trec_cold() -> tuple[Any, dict[str, dict[str, float]]]:
        ev = pytrec_eval.RelevanceEvaluator(qrels_d, measures)
        return ev, ev.evaluate(run_d)

    # Every call builds a new evaluator, so each repeat is cold.
    t_trec_cold, (evaluator, trec_res) = best_of(trec_cold)
    t_trec_warm, trec_res = best_of(lambda: evaluator.evaluate(run_d))

    # --- ranx
    ranx_metrics = [f"hit_rate@{k}", f"recall@{k}", f"mrr@{k}", f"ndcg@{k}"]

    def ranx_cold() -> tuple[Any, Any, dict[str, float]]:
        q, r = Qrels.from_dict(qrels_d), Run.from_dict(run_d)
        return q, r, ranx_evaluate(q, r, ranx_metrics)

    t_ranx_cold, (rq, rr, ranx_res) = timed(ranx_cold)
    t_ranx_warm, ranx_res = best_of(lambda: ranx_evaluate(rq, rr, ranx_metrics))

    # --- agreement on the means
    def trec_mean(key: str) -> float:
        return float(np.mean([trec_res[f"q{i}"][key] for i in range(n)]))

    trec_keys = {"hit_rate": f"success_{k}", "recall": f"recall_{k}", "ndcg": f"ndcg_cut_{k}"}
    print(f"\nmeans at k={k}:")
    print(f"{'metric':<10} {'doceval':>10} {'pytrec_eval':>12} {'ranx':>10}")
    worst = 0.0
    base = ("hit_rate", "recall", "mrr", "ndcg")  # the at-k metrics pytrec_eval and ranx share with doceval
    for name, ranx_name in zip(base, base, strict=True):
        mine = float(np.nanmean(ours[name]))
        theirs_r = float(ranx_res[f"{ranx_name}@{k}"])
        if name == "mrr":
            # recip_rank has no cutoff: compare it with doceval's uncut mrr (printed in brackets).
            theirs_t = trec_mean("recip_rank")
            worst = max(worst, abs(float(np.nanmean(ours_uncut_mrr)) - theirs_t))
            t_cell = f"[{theirs_t:.6f}]"
        else:
            theirs_t = trec_mean(trec_keys[name])
            worst = max(worst, abs(mine - theirs_t))
            t_cell = f"{theirs_t:.6f}"
        worst = max(worst, abs(mine - theirs_r))
        print(f"{name:<10} {mine:>10.6f} {t_cell:>12} {theirs_r:>10.6f}")
    print(f"uncut mrr (doceval) = {np.nanmean(ours_uncut_mrr):.6f}; max |difference| = {worst:.2e}")
    agree = worst < 1e-9

    # --- timings
    doceval_total = t_build + t_scores
    rows = [
        ("doceval build_matrix (first call)", t_build_first),
        ("doceval build_matrix (best)", t_build),
        ("doceval cut+scores (first call)", t_first_scores),
        ("doceval cut+scores (warm)", t_scores),
        ("doceval total (best build + warm scores)", doceval_total),
        ("input dicts for pytrec_eval/ranx", t_dicts),
        ("pytrec_eval cold (evaluator + evaluate)", t_trec_cold),
        ("pytrec_eval cold + input dicts", t_trec_cold + t_dicts),
        ("pytrec_eval warm (evaluate)", t_trec_warm),
        ("ranx cold (Qrels/Run + first evaluate)", t_ranx_cold),
        ("ranx warm (second evaluate)", t_ranx_warm),
    ]
    print(f"\n{'step':<42} {'seconds':>9}")
    for label, secs in rows:
        print(f"{label:<42} {secs:>9.4f}")
    print("\nratios (reference / doceval):")
    print(f"  pytrec_eval cold / doceval total      {t_trec_cold / doceval_total:8.1f}x")
    print(f"  (pytrec_eval cold + dicts) / total    {(t_trec_cold + t_dicts) / doceval_total:8.1f}x")
    print(f"  pytrec_eval warm / doceval cut+scores {t_trec_warm / t_scores:8.1f}x")
    print(f"  ranx cold / doceval total             {t_ranx_cold / doceval_total:8.1f}x")
    print(f"  ranx warm / doceval cut+scores        {t_ranx_warm / t_scores:8.1f}x")
    print(f"\nagreement on means: {'OK' if agree else 'MISMATCH'}")
    print(f"doceval total under 1 s: {'yes' if doceval_total < 1.0 else 'no'}")
    if not agree:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
