"""Wall time of `dvc repro` from a clean clone, stage by stage, optionally under a lowered CPU instruction set.

    python benchmarks/bench_repro.py [--isa default|avx2|best] [--threads N] [--save DIR] [--keep]

Clones this repository (committed state) into a temporary folder, reuses this checkout's .venv (installation
is not what is measured; PYTHONPATH points at the clone's src, so the clone's code runs) but nothing else: no
corpus, no wheels, no embedding cache, no index. Then runs each stage with `dvc repro -s STAGE` in pipeline
order and prints the seconds each took, the index stage's encode time, and whether eval/metrics.json is the
committed one byte for byte.

``--isa`` makes a better CPU behave like a lesser one for torch (ATEN_CPU_CAPABILITY), oneDNN
(ONEDNN_MAX_CPU_ISA) and MKL (MKL_ENABLE_INSTRUCTIONS); ``--threads`` sets OMP/MKL threads. ``--save DIR`` keeps
what benchmarks/bench_isa.py compares across runs: metrics.json, the candidates, the index manifest and the
embedding cache.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from doceval.index.hardware import ISA_CAPS, capped_env

ROOT = Path(__file__).resolve().parents[1]
SAVED = (
    "eval/metrics.json",
    "data/runs/candidates",
    "data/index/manifest.json",
    "data/cache/embeddings.sqlite",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the clone (its path is printed)")
    parser.add_argument("--isa", choices=sorted(ISA_CAPS), default="best", help="instruction-set cap")
    parser.add_argument("--threads", type=int, default=None, help="OMP/MKL threads (default: torch's)")
    parser.add_argument("--save", type=Path, default=None, help="copy the outputs bench_isa.py compares here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="doceval-repro-"))
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {
        **capped_env(ISA_CAPS[args.isa], args.threads),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(clone / "src"),
        "HF_HUB_OFFLINE": "1",
    }
    capability = subprocess.run(
        [sys.executable, "-c", "from doceval.index.hardware import cpu_capability as c; print(c().describe())"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
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
    print(f"machine: {platform.platform()}, {os.cpu_count()} cpus; --isa {args.isa}: {capability}; "
          f"threads {args.threads or 'torch default'}")  # fmt: skip
    print(f"{'stage':<12}{'seconds':>9}  exit")
    for stage, seconds, code in rows:
        print(f"{stage:<12}{seconds:>9.1f}  {code}")
    print(f"{'total':<12}{total_s:>9.1f}")
    print(f"second `dvc repro`: {noop_s:.1f} s, ran a stage: {'Running stage' in again.stdout}")
    record = clone / "data/index/build.json"  # what the index build did (the manifest holds what it is)
    if record.is_file():
        timings = json.loads(record.read_text())["timings"]
        print(f"index stage: encode {timings['embed_s']:.1f} s, upsert {timings['upsert_s']:.1f} s")
    metrics = clone / "eval/metrics.json"
    same = metrics.is_file() and metrics.read_bytes() == (ROOT / "eval/metrics.json").read_bytes()
    print(f"eval/metrics.json identical to the committed one: {same}")
    if args.save:
        for rel in SAVED:
            src, dst = clone / rel, args.save / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
        (args.save / "capability.txt").write_text(f"{args.isa} {args.threads} {capability}\n")
    if args.keep:
        print(f"clone kept at {clone}")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
