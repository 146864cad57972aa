"""Run the benchmark suite and write its figures into the README's benchmark section.

    python benchmarks/run_all.py [--scifact PATH/TO/scifact] [--quick] [--no-readme]

Each benchmark is a script in this folder that prints its own table, with every ratio measured side by side
in the same run. This runs them one after another (so they do not compete for the two cores), collects their
output and replaces the block between the README's `<!-- bench:start -->` and `<!-- bench:end -->` markers.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def suite(scifact: Path | None, quick: bool) -> list[tuple[str, list[str]]]:
    runs = [
        ("Metrics: 10,000 entries x 100 candidates vs pytrec_eval and ranx", ["bench_metrics.py"]),
        ("Floor sweep from cached candidates vs re-retrieving per point", ["bench_sweep.py"]),
        ("LLM calls against a local server with 100 ms latency", ["bench_llm.py"]),
        ("Eval throughput through the whole harness", ["bench_eval.py"]),
        ("Index stage vs bare model.encode", ["bench_index.py", *(["--limit", "2000"] if quick else [])]),
    ]
    if scifact is not None:
        runs.append(
            ("BEIR SciFact (test): nDCG@10 vs published, parity with trec_eval", ["beir.py", str(scifact)])
        )
    if not quick:
        runs.append(("dvc repro from a clean clone, stage by stage", ["bench_repro.py"]))
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scifact",
        type=Path,
        metavar="PATH",
        help="a BEIR SciFact folder (not part of the repository); without it the SciFact run is skipped",
    )
    parser.add_argument(
        "--quick", action="store_true", help="index a 2,000-chunk sample; skip the clean-clone run"
    )
    parser.add_argument("--no-readme", action="store_true")
    args = parser.parse_args()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    blocks = [f"Measured {time.strftime('%Y-%m-%d')} on {platform.platform()}, {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}, by `python benchmarks/run_all.py"
              f"{' --quick' if args.quick else ''}`.", ""]  # fmt: skip
    failed = []
    for title, cmd in suite(args.scifact, args.quick):
        print(f"== {title}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, str(HERE / cmd[0]), *cmd[1:]], cwd=ROOT, env=env,
                              capture_output=True, text=True)  # fmt: skip
        out = "\n".join(line for line in proc.stdout.splitlines() if "Loading weights" not in line).strip()
        print(out, flush=True)
        if proc.returncode != 0:
            failed.append(title)
            out += f"\n(exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ''})"
        blocks += [f"**{title}** ({time.perf_counter() - t0:.0f} s)", "", "```", out, "```", ""]
    if not args.no_readme:
        readme = ROOT / "README.md"
        text = readme.read_text()
        if START not in text or END not in text:
            sys.exit(f"{readme}: add {START} and {END} markers to the benchmark section")
        head, rest = text.split(START, 1)
        _, tail = rest.split(END, 1)
        readme.write_text(head + START + "\n" + "\n".join(blocks) + "\n" + END + tail)
        print(f"wrote the figures into {readme}")
    if failed:
        sys.exit(f"benchmarks that exited non-zero (missed a target or failed): {', '.join(failed)}")


if __name__ == "__main__":
    main()
