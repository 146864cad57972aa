"""What engine=ray costs on one machine: a 12-entry `doceval eval` with engine=local and with engine=ray (a Ray
started for the run), for a retriever function answered by doceval's agent (both phases on Ray) and for a
function assistant. Each run is a `doceval` child process with the user's environment (no RAY_AUTH_MODE set).

Prints, per system and engine, the median wall time of ``--runs`` runs (the whole command: start-up and Ray's
start and stop included), how many times Ray was started ("engine: ray started" lines), and whether any run
printed an error-level Ray line (``core_worker`` ... `` E ``) or Ray's token-authentication warning.

    python benchmarks/bench_ray_overhead.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
ENTRIES = 12
MODULE = """
import re

DOCS = {"D1": "late fees are one dollar per day", "D2": "returns are accepted within thirty days",
        "D3": "shipping is free over fifty dollars", "D4": "gift cards are accepted for returns"}


def scored(question, k):
    words = set(re.findall(r"[a-z]+", question.lower()))
    hits = sorted(((len(words & set(t.split())), d) for d, t in DOCS.items()), reverse=True)
    return [(d, float(s)) for s, d in hits[:k] if s > 1]


def assistant(question, library, version, session_id):
    hits = scored(question, 3)
    return {"answer": " ".join(DOCS[d] for d, _ in hits) or None, "refused": not hits,
            "sources": [{"id": d, "score": s} for d, s in hits]}
"""
QUESTIONS = ["how much are late fees per day", "are returns accepted after thirty days", "is shipping free",
             "are gift cards accepted for returns", "what is the weather", "do you sell pizza"]  # fmt: skip
SYSTEMS = {
    "retriever function + doceval's agent": ["retriever=function", "retriever.target=userret:scored"],
    "function assistant": ["agent=function", "agent.target=userret:assistant"],
}
ERROR_LINE = re.compile(
    r"^\[[^\]]* E \d+ \d+\] ", re.M
)  # glog's error level: "[date time E pid tid] file:line"


def project(root: Path) -> None:
    (root / "userret.py").write_text(MODULE, encoding="utf-8")
    rows = [{"id": f"q{i:02d}", "question": f"{QUESTIONS[i % 6]} {'?' * (i // 6)}".strip(), "out_of_scope": False,
             "relevant_ids": ["D1"], "reference_answer": "see the handbook", "expected_apis": [],
             "forbidden_apis": [], "split": None, "kind": "lookup"} for i in range(ENTRIES)]  # fmt: skip
    (root / "golden.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def run(root: Path, engine: str, system: list[str]) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    env.update(RAY_USAGE_STATS_ENABLED="0", PYTHONPATH=os.pathsep.join([str(SRC), env.get("PYTHONPATH", "")]))
    code = "import sys; from doceval.cli import main; sys.exit(main(sys.argv[1:]))"
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, "eval", "--golden", "golden.jsonl", "--split", "all",
                           "--no-track", "--quiet", "--fresh", "--output", "out.json", "k=2", f"engine={engine}",
                           *system], cwd=root, env=env, capture_output=True, text=True, check=False)  # fmt: skip
    elapsed = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"engine={engine} {' '.join(system)}: exit {done.returncode}\n{done.stderr[-2000:]}")
    return elapsed, done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    print(
        f"{'system':38} {'engine':6} {'median s':>9} {'Ray starts/run':>15} {'error lines':>12} {'auth warning':>13}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        project(root)
        for name, system in SYSTEMS.items():
            for engine in ("local", "ray"):
                times, starts, errors, auth = [], 0, 0, 0
                for _ in range(args.runs):
                    seconds, output = run(root, engine, system)
                    times.append(seconds)
                    starts += output.count("engine: ray started")
                    errors += len(ERROR_LINE.findall(output))
                    auth += "Token authentication" in output
                print(f"{name:38} {engine:6} {statistics.median(times):9.2f} {starts / args.runs:15.1f} "
                      f"{errors:12d} {auth:13d}")  # fmt: skip
    sys.stdout.flush()


if __name__ == "__main__":
    main()
