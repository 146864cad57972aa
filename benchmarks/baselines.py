"""Baseline retrievers on the golden set: overlap, bm25, dense, hybrid on both splits at k = 3 and 10.

Floors at 0 (the classic floor, no calibration). Each retriever retrieves once (top-100), then every
(split, k) is cut from those candidates. Needs the built corpus and index (`dvc repro index`).

    python benchmarks/baselines.py [--retrievers overlap bm25 dense hybrid] [--out eval/baselines.json]
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from doceval.config.compose import compose
from doceval.harness.candidates import compute_candidates
from doceval.harness.evaluate import evaluate
from doceval.harness.plan import EvalOptions, load_inputs

METRICS = (
    "hit_rate",
    "recall",
    "mrr",
    "ndcg",
    "refused_correctly",
    "version_correctness",
    "overrefusal_rate",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--retrievers", nargs="+", default=["overlap", "bm25", "dense", "hybrid"])
    parser.add_argument("--ks", nargs="+", type=int, default=[3, 10])
    parser.add_argument("--out", default="eval/baselines.json")
    args = parser.parse_args()
    rows = []
    for name in args.retrievers:
        cfg = compose([f"retriever={name}", "floors=zero", "tracking.enabled=false"])
        corpus, entries, golden_path, md5 = load_inputs(cfg, EvalOptions(progress=False))
        started = time.perf_counter()
        cands = compute_candidates(cfg, corpus, entries, golden_path, md5, progress=False)
        seconds = time.perf_counter() - started
        for split in ("calibration", "test"):
            for k in args.ks:
                summary = evaluate(
                    replace(cfg, k=k),
                    EvalOptions(
                        split=split,
                        candidates=cands,
                        progress=False,
                        run_dir=Path("/tmp/doceval-baselines") / f"{name}-{split}-{k}",
                    ),
                )
                m = summary["metrics"]
                rows.append(
                    {
                        "retriever": name,
                        "split": split,
                        "k": k,
                        "retrieve_s": round(seconds, 1),
                        **{key: m[key] for key in METRICS},
                        "n_in_scope": m["counts"]["n_in_scope"],
                        "n_out_of_scope": m["counts"]["n_out_of_scope"],
                    }
                )
    header = f"{'retriever':<9} {'split':<11} {'k':>3} " + " ".join(f"{m[:9]:>9}" for m in METRICS)
    print(header)
    print("-" * len(header))
    for r in rows:
        vals = " ".join(f"{'n/a':>9}" if r[m] is None else f"{r[m]:>9.4f}" for m in METRICS)
        print(f"{r['retriever']:<9} {r['split']:<11} {r['k']:>3} {vals}")
    print(f"(n in scope / out of scope per split: {rows[0]['n_in_scope']} / {rows[0]['n_out_of_scope']})")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
