"""Wall time of `dvc repro` from a clean clone, stage by stage.

    python benchmarks/bench_repro.py [--keep]

Clones this repository (committed state) into a temporary folder, reuses this checkout's .venv (installation
is not what is measured) but nothing else: no corpus, no wheels, no embedding cache, no index. Then runs each
stage with `dvc repro -s STAGE` in pipeline order and prints the seconds each took.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="doceval-repro-"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HF_HUB_OFFLINE": "1",
    }
    stages = list(yaml.safe_load((clone / "dvc.yaml").read_text())["stages"])
    rows = []
    total = time.perf_counter()
    for stage in stages:
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["dvc", "repro", "-s", stage], cwd=clone, env=env, capture_output=True, text=True
        )
        rows.append((stage, time.perf_counter() - t0, proc.returncode))
        if proc.returncode != 0:
            print(proc.stdout[-2000:], proc.stderr[-2000:])
            break
    total_s = time.perf_counter() - total
    t0 = time.perf_counter()
    again = subprocess.run(["dvc", "repro"], cwd=clone, env=env, capture_output=True, text=True)
    noop_s = time.perf_counter() - t0
    print(f"machine: {platform.platform()}, {os.cpu_count()} cpus")
    print(f"{'stage':<12}{'seconds':>9}  exit")
    for stage, seconds, code in rows:
        print(f"{stage:<12}{seconds:>9.1f}  {code}")
    print(f"{'total':<12}{total_s:>9.1f}")
    print(f"second `dvc repro`: {noop_s:.1f} s, ran a stage: {'Running stage' in again.stdout}")
    if args.keep:
        print(f"clone kept at {clone}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
