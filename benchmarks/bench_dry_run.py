"""`doceval eval --dry-run` against the usage of the run it estimates, on the local OpenAI-compatible server.

    .venv/bin/python benchmarks/bench_dry_run.py [--write]

A user's assistant (a Python function over their own ids) answers 30 in-scope and 6 out-of-scope questions;
the judge is `judge=openai` served by tests/openai_server.py (it counts whitespace-separated words as tokens, so
the prompt estimate, characters / 4, is compared with that count). Steps: the dry run on a cold cache, the run
itself, the dry run of the same configuration again (its journals hold every verdict: a rerun pays for
nothing), and the dry run of a new configuration (a larger judge.max_tokens: nothing journaled, completions
from the cache's observed mean instead of max_tokens). ``--write`` replaces this benchmark's block in
docs/benchmarks.md (between its own markers).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from local_server import local_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
START, END = "<!-- dry-run:start -->", "<!-- dry-run:end -->"
N_IN, N_OUT = 30, 6


def _estimate(args: Sequence[str]) -> dict[str, Any]:
    """The judge's row of the dry run of ``args`` (as `doceval eval --dry-run` computes it)."""
    from doceval.config.compose import compose
    from doceval.harness.dry_run import estimate, journaled_entries
    from doceval.harness.plan import EvalOptions, load_inputs

    cfg = compose(list(args))
    options = EvalOptions(golden=Path("golden.json"), split=None)
    _, entries, _, _ = load_inputs(cfg, options, need_corpus=False)
    held, _ = journaled_entries(cfg, options, 1)
    rows = estimate(cfg, entries, mean_chunk_chars=1000.0, external_agent=True, judged=True, journaled=held)
    return next(r for r in rows if r["role"] == "judge")


def measure(base_url: str) -> list[str]:
    from answer_side import own_golden

    from doceval.cli.main import main as doceval
    from doceval.harness.dry_run import UNBOUNDED_ANSWER_TOKENS

    own_golden(Path.cwd(), N_IN, N_OUT)
    Path("bench_assistant.py").write_text("from answer_side import good_assistant as answer\n")
    system = ["agent=function", "agent.target=bench_assistant:answer", "judge=openai", f"judge.base_url={base_url}",
              "judge.model=bench", "judge.max_retries=0"]  # fmt: skip
    cold = _estimate(system)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = doceval(["eval", "--golden", "golden.json", "--split", "all", "--no-track", "--quiet",
                        "--output", "run.json", *system])  # fmt: skip
    if code != 0:
        raise SystemExit(f"the run exited {code}")
    actual = json.loads(Path("run.json").read_text())["config"]["usage"]["by_role"]["judge"]
    warm = _estimate(system)
    fresh = _estimate([*system, "judge.max_tokens=300"])
    rows = [("dry run, cold cache", cold), ("dry run, same configuration after the run", warm),
            ("dry run, new configuration (judge.max_tokens=300)", fresh)]  # fmt: skip
    lines = [f"One run: {N_IN} in-scope and {N_OUT} out-of-scope questions, a user's assistant, `judge=openai` on "
             "the local test server (tokens: its word counts).", "",
             "| judge requests and tokens | requests | cached | prompt tokens to send | completion tokens to send "
             "| tokens per request |", "|---|---:|---:|---:|---:|---|",
             f"| actual usage of the run | {actual['requests']:.0f} | | {actual['prompt_tokens']:.0f} | "
             f"{actual['completion_tokens']:.0f} | {actual['completion_tokens'] / actual['requests']:.1f} (measured) |"]  # fmt: skip
    for title, row in rows:
        lines.append(f"| {title} | {row['requests']} | {row['cached']} | {row['prompt_tokens']} | "
                     f"{row['completion_tokens']} | {row['completion_rule']} |")  # fmt: skip
    prompt_x = cold["prompt_tokens"] / actual["prompt_tokens"]
    completion_x = cold["completion_tokens"] / actual["completion_tokens"]
    lines += ["", f"On a cold cache the estimate is an upper bound, said so: prompts {prompt_x:.1f}x and completions "
              f"{completion_x:.0f}x the run's (an assistant's answer is assumed {UNBOUNDED_ANSWER_TOKENS} tokens long, a reply "
              "max_tokens). Once the cache holds this judge's replies the estimate uses their means (within the "
              "rounding of the run's own figures), and a rerun of the same configuration counts every request "
              "as cached: it pays for nothing."]  # fmt: skip
    return lines


def write_block(lines: list[str]) -> Path:
    """Replace (or append) this benchmark's block in docs/benchmarks.md."""
    path = ROOT / "docs" / "benchmarks.md"
    text = path.read_text() if path.exists() else "# doceval — benchmarks\n"
    block = "\n".join([START, "## The dry run against the run it estimates (`benchmarks/bench_dry_run.py`)", "",
                       *lines, END])  # fmt: skip
    if START in text and END in text:
        text = text[: text.index(START)] + block + text[text.index(END) + len(END) :]
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)
    return path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write the block into docs/benchmarks.md")
    args = ap.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    with local_server(0.0) as base_url, tempfile.TemporaryDirectory() as tmp:
        os.chdir(tmp)
        sys.path.insert(0, tmp)
        lines = measure(base_url)
    print("\n".join(lines))
    if args.write:
        print(f"wrote {write_block(lines)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
