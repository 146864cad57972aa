"""The evaluate stage end to end (`doceval evaluate`, as DVC runs it), with and without tracking: wall and CPU
seconds per run, and whether eval/metrics.json comes out byte-identical to the checkout's.

    python benchmarks/bench_evaluate_stage.py [--repo PATH ...] [--data PATH] [--rounds N]

Each ``--repo`` is a checkout whose code is measured (its src/ on PYTHONPATH); several are run in turns, round
by round, so a before/after pair shares the machine's load (e.g. ``--repo /work/main --repo .``). The stage
runs in a scratch folder holding a copy of ``--data``'s pipeline inputs (data/docs, data/golden, data/runs
candidates, the index manifest, eval/calibration and params.yaml; default: this checkout, after `dvc repro`),
so no checkout's outputs are touched. Tracking writes to the scratch folder's own MLflow store, created by
one untimed run first (a first run pays for creating its tables).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUNNER = "import sys; from doceval.cli import main; sys.exit(main(sys.argv[1:]))"
NO_TRACK = "params-no-tracking.yaml"


def _scratch(data: Path) -> Path:
    """A folder with the stage's inputs copied from ``data`` and a params file with tracking off beside."""
    work = Path(tempfile.mkdtemp(prefix="doceval-evaluate-"))
    for rel in ("data/docs", "data/golden", "data/runs/candidates", "eval/calibration"):
        shutil.copytree(data / rel, work / rel)
    (work / "data" / "index").mkdir(parents=True)
    shutil.copy(data / "data" / "index" / "manifest.json", work / "data" / "index" / "manifest.json")
    params = (data / "params.yaml").read_text(encoding="utf-8")
    (work / "params.yaml").write_text(params, encoding="utf-8")
    off = params.replace("tracking: {enabled: true", "tracking: {enabled: false")
    if off == params:
        raise SystemExit(f"{data / 'params.yaml'}: no `tracking: {{enabled: true, ...}}` line to turn off")
    (work / NO_TRACK).write_text(off, encoding="utf-8")
    return work


def _run(repo: Path, work: Path, track: bool) -> tuple[float, float, bytes]:
    """(wall s, CPU s of the stage's process, eval/metrics.json) of one `doceval evaluate --quiet`."""
    env = {
        **os.environ,
        "PYTHONPATH": str(repo / "src"),
        "HF_HUB_OFFLINE": "1",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    env.pop("MLFLOW_TRACKING_URI", None)
    argv = ["evaluate", "--quiet", *([] if track else ["--params", NO_TRACK])]
    (work / "eval" / "metrics.json").unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, *argv], cwd=work, env=env, capture_output=True, text=True
    )
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{repo}: doceval evaluate exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, (work / "eval" / "metrics.json").read_bytes()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, action="append", help="a checkout whose code runs (repeatable)")
    ap.add_argument("--data", type=Path, default=ROOT, help="a checkout where `dvc repro` has run")
    ap.add_argument("--rounds", type=int, default=3, help="timed runs per checkout and mode (median shown)")
    args = ap.parse_args()
    repos = [r.resolve() for r in (args.repo or [ROOT])]
    expected = (args.data / "eval" / "metrics.json").read_bytes()
    work = _scratch(args.data.resolve())
    try:
        _run(repos[0], work, track=True)  # creates the scratch MLflow store (its tables), untimed
        times: dict[tuple[Path, bool], list[tuple[float, float]]] = {}
        same: dict[Path, bool] = {r: True for r in repos}
        for _ in range(args.rounds):
            for repo in repos:
                for track in (False, True):
                    wall, cpu, metrics = _run(repo, work, track)
                    times.setdefault((repo, track), []).append((wall, cpu))
                    same[repo] &= metrics == expected
        print(f"evaluate stage, {args.rounds} rounds, {os.cpu_count()} CPUs (median wall / CPU seconds)")
        print(f"{'checkout':<40}{'tracking':>9}{'wall s':>8}{'cpu s':>8}  metrics.json")
        for repo in repos:
            for track in (False, True):
                runs = times[(repo, track)]
                wall = statistics.median(w for w, _ in runs)
                cpu = statistics.median(c for _, c in runs)
                verdict = "identical" if same[repo] else "DIFFERS"
                print(f"{str(repo)[-40:]:<40}{'on' if track else 'off':>9}{wall:>8.1f}{cpu:>8.1f}  {verdict}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
