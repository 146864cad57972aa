"""Run the benchmark suite and write its figures into docs/benchmarks.md.

    python benchmarks/run_all.py [--scifact PATH/TO/scifact] [--quick] [--no-write] [--only SCRIPT ...]

Each benchmark is a script in this folder that prints its own table, with every ratio measured side by side
in the same run. This runs them one after another (so they do not compete for the two cores), collects their
output and replaces the block between docs/benchmarks.md's `<!-- bench:start -->` and `<!-- bench:end -->`
markers (section "The suite"). With ``--only bench_intervals.py`` (repeatable) it runs just those scripts and
replaces just their sub-blocks (``**TITLE** (N s)`` and its fenced output), leaving the rest of the block as it
was. A script named in :data:`DOC_BLOCKS` writes into a section of its own on the same page, between its own
markers. Nothing is written into README.md: it keeps one headline table and points here.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
DOCS_PAGE = ROOT / "docs" / "benchmarks.md"
# Scripts whose figures go to a section of their own on docs/benchmarks.md, between their own markers, not into
# the suite's block.
DOC_BLOCKS = {
    "bench_paired_coverage.py": ("<!-- bench-paired:start -->", "<!-- bench-paired:end -->"),
    "bench_drafting.py": ("<!-- drafting:start -->", "<!-- drafting:end -->"),
    "bench_dry_run.py": ("<!-- dry-run:start -->", "<!-- dry-run:end -->"),
    "bench_recovery.py": ("<!-- recovery:start -->", "<!-- recovery:end -->"),
}


def suite(scifact: Path | None, quick: bool) -> list[tuple[str, list[str]]]:
    runs = [
        ("Metrics: 10,000 entries x 100 candidates vs pytrec_eval and ranx", ["bench_metrics.py"]),
        ("Floor sweep from cached candidates vs re-retrieving per point", ["bench_sweep.py"]),
        ("LLM calls against a local server with 100 ms latency", ["bench_llm.py"]),
        ("Eval throughput through the whole harness", ["bench_eval.py"]),
        (
            "Inner loop: a 10-entry `doceval eval`, --no-track and tracked, three systems that answer at once",
            ["bench_inner_loop.py", *(["--runs", "3"] if quick else [])],
        ),
        (
            "MLflow traces: what per-entry traces add to logging a 10,000-entry run",
            ["bench_traces.py", *(["--entries", "2000"] if quick else [])],
        ),
        ("Judge validation: `doceval judge validate --repeats 3`, 100 ms latency", ["bench_judge.py"]),
        ("Evaluate stage: one plan, with and without tracking", ["bench_evaluate_stage.py", "--rounds", "3"]),
        (
            "Hardening: a user's function behind a deadline, and the scrubber over a summary",
            ["bench_hardening.py", *(["--calls", "5000"] if quick else [])],
        ),
        (
            "Interval coverage: exact and simulated, old percentile bootstrap vs the new intervals",
            ["bench_intervals.py"],
        ),
        (
            "Paired interval coverage where most differences are 0: sign-flip interval vs the old BCa",
            ["bench_paired_coverage.py", *(["--sets", "500", "--reference-sets", "100"] if quick else [])],
        ),
        (
            "Memory recovery's interval: coverage on simulated clustered replays",
            ["bench_recovery.py", *(["--reps", "300"] if quick else ["--reps", "1000"])],
        ),
        ("Index stage vs bare model.encode", ["bench_index.py", *(["--limit", "2000"] if quick else [])]),
        (
            "Embedding precision: fp32 vs bf16 autocast vs bf16 weights (embedder=minilm_bf16, minilm_bf16_weights)",
            ["bench_embed_precision.py"],
        ),
        (
            "Store scale: qdrant_local vs Qdrant Edge exact and HNSW",
            ["bench_store_scale.py", *(["--points", "20000", "--queries", "2000"] if quick else [])],
        ),
    ]
    if scifact is not None:
        runs.append(
            ("BEIR SciFact (test): nDCG@10 vs published, parity with trec_eval", ["beir.py", str(scifact)])
        )
    runs += [
        (
            "MiniLM encode per precision on each CPU class (AVX2, AVX-512, AVX-512 BF16, AMX), fp32 knobs",
            ["bench_embed_isa.py", "--sample", "200", "--rounds", "1" if quick else "2"],
        ),
        ("Stage start-up: wall time, needed imports and the rest, per DVC stage", ["bench_stage_startup.py"]),
        (
            "Golden set drafting on the default corpus: time, recall, precision, ranking agreement with v2.1",
            ["bench_drafting.py", *(["--boot", "500", "--coverage", "50"] if quick else [])],
        ),
        (
            "The dry run's estimate against the run it estimates (tokens, cost, the cache)",
            ["bench_dry_run.py"],
        ),
        (
            "engine=ray on one machine: index embedding (2 actors) vs engine=local, a seeded 2,000-chunk sample",
            ["bench_ray_index.py", "--chunks", "2000"],
        ),
        (
            "engine=ray on one machine: an HTTP assistant with 100 ms latency, 1,000 entries, vs engine=local",
            ["bench_ray_eval.py"],
        ),
        (
            "engine=ray on one machine: what a 12-entry command costs, Ray starts, error lines, auth warnings",
            ["bench_ray_overhead.py", "--runs", "1" if quick else "3"],
        ),
    ]
    if not quick:
        runs.append(("dvc repro from a clean clone, stage by stage", ["bench_repro.py"]))
        runs.append(
            (
                "dvc repro from a clean clone, stage by stage, as an AVX2-only CPU",
                ["bench_repro.py", "--isa", "avx2"],
            )
        )
    return runs


def sub_block(title: str, seconds: float, output: str) -> list[str]:
    """One benchmark's lines in the suite's block: its bold title with the time taken, then its output."""
    return [f"**{title}** ({seconds:.0f} s)", "", "```", output, "```"]


def _sub_block_span(lines: Sequence[str], title: str) -> tuple[int, int] | None:
    """[start, end) of the sub-block titled ``title``: its title line through its closing fence."""
    head = f"**{title}** ("
    for start, line in enumerate(lines):
        if not line.startswith(head):
            continue
        fences = [i for i in range(start + 1, len(lines)) if lines[i].startswith("```")]
        if len(fences) < 2:
            return None  # a title without its fenced block: treat the block as absent
        return start, fences[1] + 1
    return None


def splice_sub_blocks(text: str, blocks: Sequence[tuple[str, list[str]]]) -> str:
    """``text`` (the whole page) with each (title, lines) sub-block replaced inside the bench markers, or
    appended at the end of the marked region when it is not there yet; everything else stays as it was."""
    if START not in text or END not in text:
        raise ValueError(f"add {START} and {END} markers to the benchmark section")
    head, rest = text.split(START, 1)
    region, tail = rest.split(END, 1)
    lines = region.split("\n")
    for title, block in blocks:
        span = _sub_block_span(lines, title)
        if span is not None:
            lines[span[0] : span[1]] = block
            continue
        # Append before the region's trailing blank lines, keeping one blank line on each side.
        end = len(lines)
        while end > 0 and not lines[end - 1].strip():
            end -= 1
        lines[end:] = ["", *block, "", ""]
    return head + START + "\n".join(lines) + END + tail


def replace_marked(text: str, start: str, end: str, lines: Sequence[str]) -> str:
    """``text`` with everything between the ``start`` and ``end`` markers replaced by ``lines``."""
    if start not in text or end not in text:
        raise ValueError(f"add {start} and {end} markers")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return head + start + "\n" + "\n".join(lines) + "\n" + end + tail


def with_doc_blocks(text: str, done: Sequence[tuple[str, str, list[str]]], measured: str) -> str:
    """``text`` (docs/benchmarks.md) with each (script, title, sub-block) of DOC_BLOCKS between its markers."""
    for script, _, lines in done:
        start, end = DOC_BLOCKS[script]
        text = replace_marked(text, start, end, [measured, "", *lines])
    return text


def with_suite_block(text: str, done: Sequence[tuple[str, list[str]]], blocks: list[str], only: bool) -> str:
    """``text`` (docs/benchmarks.md) with the suite's block rewritten: whole, or with ``--only`` just the
    sub-blocks of the scripts that ran."""
    if START not in text or END not in text:
        raise ValueError(f'{DOCS_PAGE}: add {START} and {END} markers to the section "The suite"')
    if only:
        return splice_sub_blocks(text, done)
    return replace_marked(text, START, END, blocks)


def run_one(title: str, cmd: list[str], env: dict[str, str]) -> tuple[list[str], bool]:
    """Run one benchmark script; its sub-block and whether it exited 0."""
    print(f"== {title}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(HERE / cmd[0]), *cmd[1:]], cwd=ROOT, env=env,
                          capture_output=True, text=True)  # fmt: skip
    out = "\n".join(line for line in proc.stdout.splitlines() if "Loading weights" not in line).strip()
    print(out, flush=True)
    if proc.returncode != 0:
        out += f"\n(exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ''})"
    return sub_block(title, time.perf_counter() - t0, out), proc.returncode == 0


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
    parser.add_argument(
        "--no-write",
        "--no-readme",  # its name while the suite's block lived in README.md
        dest="no_write",
        action="store_true",
        help="print the figures; leave docs/benchmarks.md as it is",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="SCRIPT",
        help="run just this suite script (e.g. bench_intervals.py; repeatable) and replace just its sub-block "
        "of docs/benchmarks.md (or its own section's block)",
    )
    args = parser.parse_args()
    runs = suite(args.scifact, args.quick)
    if args.only:
        unknown = sorted(set(args.only) - {cmd[0] for _, cmd in runs})
        if unknown:
            sys.exit(
                f"--only: not in the suite: {', '.join(unknown)} (known: {', '.join(c[0] for _, c in runs)})"
            )
        runs = [(title, cmd) for title, cmd in runs if cmd[0] in args.only]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"}
    blocks = [f"Measured {time.strftime('%Y-%m-%d')} on {platform.platform()}, {os.cpu_count()} CPUs, "
              f"Python {platform.python_version()}, by `python benchmarks/run_all.py"
              f"{' --quick' if args.quick else ''}`.", ""]  # fmt: skip
    failed = []
    done: list[tuple[str, list[str]]] = []
    to_docs: list[tuple[str, str, list[str]]] = []
    for title, cmd in runs:
        lines, ok = run_one(title, cmd, env)
        if not ok:
            failed.append(title)
        if cmd[0] in DOC_BLOCKS:
            to_docs.append((cmd[0], title, lines))
            continue
        done.append((title, lines))
        blocks += [*lines, ""]
    if (to_docs or done) and not args.no_write:
        text = DOCS_PAGE.read_text(encoding="utf-8")  # read now: the benchmarks take minutes, others edit it
        if to_docs:
            text = with_doc_blocks(text, to_docs, blocks[0])
        if done:
            try:
                text = with_suite_block(text, done, blocks, bool(args.only))
            except ValueError as err:
                sys.exit(str(err))
        DOCS_PAGE.write_text(text, encoding="utf-8")
        print(f"wrote the figures into {DOCS_PAGE}")
    if failed:
        sys.exit(f"benchmarks that exited non-zero (missed a target or failed): {', '.join(failed)}")


if __name__ == "__main__":
    main()
