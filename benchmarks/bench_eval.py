"""Eval throughput: golden entries per second through the whole harness (agent, metrics, intervals).

    python benchmarks/bench_eval.py [--latency 0.1] [--concurrency 8]

1. Offline (extractive answerer, no judge) over all 344 entries from the cached candidates.
2. OpenAI answerer + OpenAI judge against the local OpenAI-compatible test server (fixed reply latency, in a
   child process), cold cache, then the same run again: every reply from the cache, zero requests.
Needs `dvc repro retrieve` (the candidate cache).
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from local_server import local_server, server_requests

from doceval.config.compose import compose, load_params  # noqa: E402
from doceval.harness.candidate_cache import load_candidates  # noqa: E402
from doceval.harness.evaluate import EvalOptions, evaluate  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    params = load_params()
    cands = load_candidates(Path(params.paths.runs))
    base = replace(params, floors=compose(["floors=zero"]).floors, split=replace(params.split, name=None))
    tmp = Path(tempfile.mkdtemp())
    print(f"machine: {platform.platform()}, {os.cpu_count()} cpus")

    t0 = time.perf_counter()
    n = len(evaluate(base, EvalOptions(candidates=cands, progress=False, run_dir=tmp / "offline"))["entries"])
    offline = time.perf_counter() - t0
    print(f"offline (extractive, no judge): {n} entries in {offline:.2f} s = {n / offline:.0f} entries/s")

    with local_server(args.latency) as url:
        llm = {"base_url": url, "model": "fake", "api_key_env": "DOCEVAL_BENCH_KEY",
               "max_concurrency": args.concurrency, "cache_path": tmp / "llm.sqlite", "max_retries": 2}  # fmt: skip
        # The shipped answerer=openai and judge=openai blocks (conf/) with these client settings.
        roles = compose(
            ["answerer=openai", "judge=openai"]
            + [f"{role}.{key}={value}" for role in ("answerer", "judge") for key, value in llm.items()]
        )
        # run.max_concurrency: entries answered (then judged) at once; the clients' own bound is the same.
        run = replace(base.run, max_concurrency=args.concurrency)
        cfg = replace(base, run=run, answerer=roles.answerer, judge=roles.judge)
        for label in ("cold cache", "warm cache"):
            before = server_requests(url)
            t0 = time.perf_counter()
            summary = evaluate(cfg, EvalOptions(candidates=cands, progress=False, run_dir=tmp / label))
            seconds = time.perf_counter() - t0
            made = server_requests(url) - before
            m = summary["metrics"]["counts"]
            print(
                f"openai answerer + judge, {label}: {n} entries in {seconds:.2f} s = {n / seconds:.1f} entries/s, "
                f"{made} requests to the server (latency {args.latency * 1000:.0f} ms, concurrency "
                f"{args.concurrency}; judged {m['n_judged']}, judge errors {m['judge_errors']})"
            )


if __name__ == "__main__":
    main()
