"""`doceval judge validate --repeats 3` against a local OpenAI-compatible server with a fixed reply latency.

    .venv/bin/python benchmarks/bench_judge.py [--latency 0.1] [--concurrency 8] [--repeats 3]

Runs the real command (in this process, the shipped judge=openai config with only base_url, model and the
key's variable set) over the shipped label set, cold cache, then again on the warm cache. Prints rows judged
per second against the ideal ``concurrency / latency`` (target ratio >= 0.8), both for the whole command and
net of its fixed cost (the warm rerun's wall time: composing the config, reading the golden set and labels,
writing the report), and checks that the warm rerun sent no request to the server.

The server runs in a child process so its request handling does not compete with the client for the GIL.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import tempfile
import time
from pathlib import Path

from local_server import local_server, server_requests

from doceval.cli.main import main as doceval

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--min-ratio", type=float, default=0.8, help="exit 1 if the net ratio falls below this")
    args = ap.parse_args()

    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.chdir(ROOT)
    with local_server(args.latency) as base_url, tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        cmd = ["judge", "validate", "data/judge/v1.jsonl", "--split", "all", "--repeats", str(args.repeats),
               "--quiet", "--no-track", "--output", str(report), "judge=openai", f"judge.base_url={base_url}",
               "judge.model=bench", f"judge.max_concurrency={args.concurrency}",
               f"run.max_concurrency={args.concurrency}", f"judge.cache_path={tmp}/llm.sqlite"]  # fmt: skip
        walls = []
        for _ in range(2):  # cold cache, then warm
            before = server_requests(base_url)
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                code = doceval(cmd)
            walls.append((time.perf_counter() - start, server_requests(base_url) - before, code))
        rows = json.loads(report.read_text())["n_rows"] * args.repeats
    (cold, cold_requests, c1), (warm, warm_requests, c2) = walls
    ideal = args.concurrency / args.latency
    raw, net = rows / cold, rows / max(cold - warm, 1e-9)
    print(f"server latency {args.latency * 1000:.0f} ms, concurrency {args.concurrency}, {rows} row judgments "
          f"({rows // args.repeats} labelled rows x {args.repeats} repeats)")  # fmt: skip
    print(f"{'run':>22} {'wall s':>7} {'requests':>9} {'rows/s':>8} {'ideal':>7} {'ratio':>6}")
    print(
        f"{'cold cache (command)':>22} {cold:7.2f} {cold_requests:9d} {raw:8.1f} {ideal:7.1f} {raw / ideal:6.2f}"
    )
    print(
        f"{'cold, net of fixed':>22} {cold - warm:7.2f} {cold_requests:9d} {net:8.1f} {ideal:7.1f} {net / ideal:6.2f}"
    )
    print(f"{'warm cache (rerun)':>22} {warm:7.2f} {warm_requests:9d} {'':>8} {'':>7} {'':>6}")
    ok = (
        c1 == 0 and c2 == 0 and warm_requests == 0 and cold_requests == rows and net / ideal >= args.min_ratio
    )
    print(f"rerun from the cache made {warm_requests} requests; target (net ratio >= {args.min_ratio}, rerun 0 "
          f"requests): {'met' if ok else 'NOT met'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
