"""Eval throughput: golden entries per second through the whole harness (agent, metrics, intervals).

    python benchmarks/bench_eval.py [--latency 0.1] [--concurrency 8]

1. Offline (extractive answerer, no judge) over all 344 entries from the cached candidates.
2. OpenAI answerer + OpenAI judge against the local OpenAI-compatible test server (fixed reply latency, in a
   child process), cold cache, then the same run again: every reply from the cache, zero requests.
Needs `dvc repro retrieve` (the candidate cache).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import tempfile
import time
import urllib.request
from multiprocessing.connection import Connection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from doceval.config.compose import load_params  # noqa: E402
from doceval.harness.candidates import load_candidates  # noqa: E402
from doceval.harness.evaluate import EvalOptions, evaluate  # noqa: E402


def _serve(latency: float, conn: Connection) -> None:
    from openai_server import FakeOpenAI

    with FakeOpenAI(latency_s=latency) as server:
        conn.send(server.base_url)
        conn.recv()


def _requests(base_url: str) -> int:
    with urllib.request.urlopen(base_url.removesuffix("/v1") + "/stats", timeout=5) as resp:
        return int(json.load(resp)["requests"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=8)
    args = ap.parse_args()
    params = load_params()
    cands = load_candidates(Path(params["paths"]["runs"]))
    base = {
        **params,
        "floors": {"source": "config", "global": 0.0, "per_library": {}},
        "split": {"name": None},
    }
    tmp = Path(tempfile.mkdtemp())
    print(f"machine: {platform.platform()}, {os.cpu_count()} cpus")

    t0 = time.perf_counter()
    n = len(evaluate(base, EvalOptions(candidates=cands, progress=False, run_dir=tmp / "offline"))["entries"])
    offline = time.perf_counter() - t0
    print(f"offline (extractive, no judge): {n} entries in {offline:.2f} s = {n / offline:.0f} entries/s")

    parent, child = mp.Pipe()
    server = mp.Process(target=_serve, args=(args.latency, child), daemon=True)
    server.start()
    url = parent.recv()
    llm = {"base_url": url, "model": "fake", "api_key_env": "DOCEVAL_BENCH_KEY", "max_concurrency": args.concurrency,
           "cache_path": str(tmp / "llm.sqlite"), "max_retries": 2}  # fmt: skip
    # run.max_concurrency: entries answered (then judged) at once; the clients' own bound is the same.
    run = {**(base.get("run") or {}), "max_concurrency": args.concurrency}
    cfg = {**base, "run": run, "answerer": {"name": "openai", **llm}, "judge": {"name": "openai", **llm}}
    try:
        for label in ("cold cache", "warm cache"):
            before = _requests(url)
            t0 = time.perf_counter()
            summary = evaluate(cfg, EvalOptions(candidates=cands, progress=False, run_dir=tmp / label))
            seconds = time.perf_counter() - t0
            made = _requests(url) - before
            m = summary["metrics"]["counts"]
            print(
                f"openai answerer + judge, {label}: {n} entries in {seconds:.2f} s = {n / seconds:.1f} entries/s, "
                f"{made} requests to the server (latency {args.latency * 1000:.0f} ms, concurrency "
                f"{args.concurrency}; judged {m['n_judged']}, judge errors {m['judge_errors']})"
            )
    finally:
        parent.send("stop")
        server.join(timeout=5)


if __name__ == "__main__":
    main()
