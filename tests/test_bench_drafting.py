"""The measurement code of benchmarks/bench_drafting.py (issue 45): the committed recall list is v2.1's version
traps derived mechanically, tau-b matches a hand count and scipy, recall links names either way round, and
`make bench` writes the drafting figures into docs/benchmarks.md's own marker block."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import kendalltau

from doceval.drafting.differences import Difference

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"


def _load(name: str) -> Any:
    """benchmarks/<name>.py as a module (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_committed_pairs_are_v21s_version_traps() -> None:
    bench = _load("bench_drafting")
    committed = [json.loads(line) for line in bench.PAIRS.read_text(encoding="utf-8").splitlines()]
    assert committed == bench.derive_pairs(bench.V21)
    first = next(i for i in committed if i["id"] == "pyd1-001")
    assert first["expected"] == ["dict", "exclude_none"] and first["forbidden"] == ["model_dump"]
    assert bench.names_of(["Base = declarative_base(", "pattern=", ".dict("]) == [
        "declarative_base",
        "dict",
        "pattern",
    ]


def test_recall_links_a_difference_either_way_round() -> None:
    bench = _load("bench_drafting")
    items = [
        {"id": "a", "library": "lib", "version": "1", "expected": ["dict"], "forbidden": ["model_dump"]},
        {"id": "b", "library": "lib", "version": "2", "expected": ["model_dump"], "forbidden": ["dict"]},
        {
            "id": "c",
            "library": "lib",
            "version": "2",
            "expected": ["TypeAdapter"],
            "forbidden": ["schema_of"],
        },
        {"id": "d", "library": "other", "version": "2", "expected": ["model_dump"], "forbidden": ["dict"]},
    ]
    diffs = [
        Difference("renamed", "lib@1", "lib@2", "dict", "model_dump", "statement:deprecated"),
        Difference(
            "renamed",
            "lib@1",
            "lib@2",
            "schema_of",
            "json_schema",
            "statement:deprecated",
            new_path="TypeAdapter.json_schema",
        ),  # fmt: skip
    ]
    got = bench.recall(items, diffs)
    assert got["total"] == [3, 4] and got["missed"] == ["d"] and got["by_library"]["other"] == [0, 1]


def test_tau_b_matches_scipy_with_ties() -> None:
    bench = _load("bench_drafting")
    rng = np.random.default_rng(1)
    x = np.round(rng.random((20, 11)), 1)  # ties on purpose
    y = np.round(rng.random((20, 11)), 1)
    ours = bench.tau_b(x, y)
    theirs = [kendalltau(a, b).statistic for a, b in zip(x, y, strict=True)]
    assert np.allclose(ours, theirs)
    assert bench.tau_b(np.array([[1.0, 2.0, 3.0]]), np.array([[3.0, 2.0, 1.0]]))[0] == -1.0


def test_make_bench_writes_the_drafting_block_into_docs(tmp_path: Path) -> None:
    run_all = _load("run_all")
    start, end = run_all.DOC_BLOCKS["bench_drafting.py"]
    page = f"# page\n\n{start}\nold\n{end}\n"
    text = run_all.replace_marked(page, start, end, ["first"])
    text = run_all.replace_marked(text, start, end, ["second"])
    assert "second" in text and "first" not in text and "old" not in text and text.count(start) == 1
    shipped = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert start in shipped and end in shipped  # `make bench` has its markers to write between
    assert "bench_drafting.py" in run_all.DOC_BLOCKS


def test_precision_reads_the_reviewers_sheets_never_the_blank_one() -> None:
    """The blank seeded sheet is `audit_sheet.jsonl`, beside the reviewers' `audit_<name>.jsonl`: it is not a
    reviewer (on main the glob took it for one and the benchmark stopped on its blank verdicts)."""
    bench = _load("bench_drafting")
    sheets = bench.reviewer_sheets()
    assert bench.AUDIT not in sheets
    assert [p.name for p in sheets] == ["audit_reviewer-a.jsonl", "audit_reviewer-b.jsonl"]
    figures = bench.precision(sheets)
    assert figures is not None and set(figures["reviewers"]) == {"reviewer-a", "reviewer-b"}
    assert all(r["n"] == 60 for r in figures["reviewers"].values())
