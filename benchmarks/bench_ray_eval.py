"""engine=local vs engine=ray for an HTTP assistant with 100 ms latency (a loopback server in this process) over
1,000 entries: local threads at run.max_concurrency=8, Ray at equal total concurrency (2 actors x 4) and at
double (2 actors x 8). One run each, `doceval eval` as a child process (Ray started for the run, 2 CPUs).

Prints each run's wall time (the whole command: start-up, Ray start included), its call phase (first call's
start to last reply, from the entries' timings), throughput over the call phase, and the ratios to local.

    python benchmarks/bench_ray_eval.py [--entries 1000] [--latency 0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"


def serve(latency_s: float) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            time.sleep(latency_s)
            data = json.dumps({"answer": f"about {body['question']}", "sources": ["D1"], "refused": False})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 64
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def run(root: Path, name: str, *overrides: str) -> dict[str, float]:
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    env.pop("RAY_ADDRESS", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(SRC), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    )
    code = "import sys; from doceval.cli import main; sys.exit(main(sys.argv[1:]))"
    out = root / f"{name}.json"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, "eval", "--golden", "golden.jsonl", "--split", "all", "--no-track",
                    "--quiet", "--fresh", "--output", str(out), "k=1", *overrides],
                   cwd=root, env=env, check=True, capture_output=True)  # fmt: skip
    wall = time.perf_counter() - t0
    entries = json.loads(out.read_text())["entries"]
    starts = [e["timing"]["start"] for e in entries]
    ends = [e["timing"]["start"] + e["timing"]["duration_s"] for e in entries]
    calls = max(ends) - min(starts)
    return {"wall_s": wall, "calls_s": calls, "per_s": len(entries) / calls}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=0.1)
    args = parser.parse_args()
    server = serve(args.latency)
    url = f"http://127.0.0.1:{server.server_address[1]}/ask"
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        rows = [{"id": f"q{i:04d}", "question": f"question {i}", "out_of_scope": False, "relevant_ids": ["D1"],
                 "reference_answer": "r", "expected_apis": [], "forbidden_apis": [], "split": None,
                 "kind": "lookup"} for i in range(args.entries)]  # fmt: skip
        (root / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        agent = ("agent=http", f"agent.url={url}", "agent.timeout_s=30")
        ray = ("engine=ray", "engine.address=local", "engine.num_cpus=2", "engine.actors=2")
        runs = {
            "local, 8 threads": run(root, "local", *agent, "run.max_concurrency=8"),
            "ray, 2 actors x 4": run(root, "ray4", *agent, *ray, "run.max_concurrency=4"),
            "ray, 2 actors x 8": run(root, "ray8", *agent, *ray, "run.max_concurrency=8"),
        }
    base = runs["local, 8 threads"]
    print(f"{args.entries} entries, HTTP assistant with {args.latency * 1000:.0f} ms latency on 127.0.0.1")
    print(
        f"{'run':<20} {'wall s':>8} {'calls s':>8} {'entries/s':>10} {'wall vs local':>14} {'calls vs local':>15}"
    )
    for name, r in runs.items():
        print(f"{name:<20} {r['wall_s']:>8.2f} {r['calls_s']:>8.2f} {r['per_s']:>10.1f} "
              f"{base['wall_s'] / r['wall_s']:>13.2f}x {base['calls_s'] / r['calls_s']:>14.2f}x")  # fmt: skip
    server.shutdown()


if __name__ == "__main__":
    main()
