"""judged_share says what it measures (issue 41 item 6): a golden set's pool record (``NAME.pool.json``) names
the systems its judgments were pooled from; a run records it with whether the judgments are graded, and the
headline and the report say beside the figure whether this run's system was pooled (then 1 is by
construction), or, without graded judgments, that the figure is precision@k."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from test_eval_cli import DOCS, GOLDEN
from tiny_project import make_tiny_project

from doceval.cli.main import main
from doceval.common.naming import judged_share_label, judged_share_note
from doceval.errors import UsageError
from doceval.inputs.golden import parse_golden
from doceval.inputs.qrels import read_pool
from doceval.results.markdown import render_report

ROOT = Path(__file__).resolve().parents[1]
POOL = {"systems": ["overlap", "bm25"], "depth": 5, "how": "top 5 of each, floors at 0"}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    rows = [{**e, "reference_answer": "ref " + " ".join(e["expected_apis"])} for e in GOLDEN]
    make_tiny_project(tmp_path, DOCS, "".join(json.dumps(e) + "\n" for e in rows))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _qrels(golden: Path) -> None:
    """Graded judgments for the tiny set: every document of each in-scope entry's pin (a pool deeper than any
    run's top 5), its relevant one 2, the others 0."""
    rows = []
    for e in GOLDEN:
        pin = f"{e['library']}@{e['version']}"
        for path, _ in DOCS.get(pin, []) if not e["out_of_scope"] else []:
            doc = f"{pin}:{path}"
            grade = 2 if doc in e["relevant_ids"] else 0
            rows.append({"id": e["id"], "doc_id": doc, "grade": grade, "judged_by": "test"})
    golden.with_name("v2.1.qrels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def _eval(project: Path, retriever: str) -> tuple[dict[str, Any], str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["eval", "--no-track", "--output", "out.json", "--split", "test", "--quiet",
                     f"retriever={retriever}", "floors=zero"]) == 0  # fmt: skip
    return json.loads((project / "out.json").read_text()), out.getvalue()


def test_a_pooled_run_is_told_its_share_is_one_by_construction(project: Path) -> None:
    golden = project / "data" / "golden" / "v2.1.jsonl"
    _qrels(golden)
    golden.with_name("v2.1.pool.json").write_text(json.dumps(POOL))
    summary, printed = _eval(project, "bm25")
    assert summary["config"]["golden"]["qrels"] is True
    assert summary["config"]["golden"]["pool"] == POOL
    assert summary["metrics"]["judged_share"] == 1.0
    flat = " ".join(printed.split())  # the terminal wraps the note at 120 columns
    note = flat[flat.index("judged_share@5:") :]
    note = note[: note.index("entries=")].strip()
    assert "pooled from the top 5 of overlap, bm25" in note
    assert "This run's bm25 is a pooled system: 1 by construction up to k = 5" in note
    assert note in " ".join(render_report(summary).split())  # the report's headline section says the same


def test_a_run_outside_the_pool_is_told_what_a_low_share_means(project: Path) -> None:
    golden = project / "data" / "golden" / "v2.1.jsonl"
    _qrels(golden)
    golden.with_name("v2.1.pool.json").write_text(json.dumps({**POOL, "systems": ["dense"]}))
    summary, printed = _eval(project, "bm25")
    assert "This run's bm25 was not pooled: below 1, the other retrieval metrics may undercount" in printed


def test_without_graded_judgments_the_figure_is_shown_as_precision(project: Path) -> None:
    summary, printed = _eval(project, "bm25")
    assert summary["config"]["golden"]["qrels"] is False and summary["config"]["golden"]["pool"] is None
    row = next(line for line in printed.splitlines() if line.startswith("precision@5 "))
    assert row.split()[1] == f"{summary['metrics']['judged_share']:.4f}"
    assert not any(line.startswith("judged_share@5 ") for line in printed.splitlines())
    assert "precision@5: the golden set has no graded judgments" in printed
    assert "| precision |" in render_report(summary)


def test_graded_judgments_without_a_pool_record_say_so() -> None:
    note = judged_share_note({"golden": {"qrels": True, "pool": None}, "retriever": {"name": "dense"}}, 5)
    assert note.startswith("judged_share@5: share of R the judgments cover")
    assert "which systems were pooled is not recorded" in note
    # A summary written before the pool was recorded: neither claim is made.
    old = judged_share_note({"golden": {"md5": "x"}}, 5)
    assert "records neither the judgments' kind nor the pool" in old
    assert judged_share_label({"golden": {}}, 5) == "judged_share@5"


def test_the_shipped_graded_sets_name_their_pool() -> None:
    for name in ("v2", "v2.1", "conversations"):
        pool = read_pool(ROOT / "data" / "golden" / f"{name}.jsonl")
        assert pool is not None and pool["systems"] == ["overlap", "bm25", "dense", "hybrid"], name
        assert pool["depth"] == 5 and pool["how"]
    summary = {"golden": {"qrels": True, "pool": read_pool(ROOT / "data" / "golden" / "v2.1.jsonl")},
               "retriever": {"name": "dense"}}  # fmt: skip
    assert "This run's dense is a pooled system: 1 by construction" in judged_share_note(summary, 5)


@pytest.mark.parametrize(
    "text,field",
    [
        ("{not json", "not a readable JSON object"),
        ('["bm25"]', "must be a JSON object"),
        ('{"systems": [], "depth": 5}', "systems: must be a non-empty list"),
        ('{"systems": ["bm25"], "depth": 0}', "depth: 0 is not a positive number"),
        ('{"systems": ["bm25"], "depth": 5, "sytems": 1}', "unknown field(s) 'sytems'"),
    ],
)
def test_a_bad_pool_record_stops_the_golden_set_from_loading(tmp_path: Path, text: str, field: str) -> None:
    golden = tmp_path / "set.jsonl"
    golden.write_text(json.dumps({**GOLDEN[0], "reference_answer": "ref"}) + "\n")
    (tmp_path / "set.pool.json").write_text(text)
    with pytest.raises(UsageError, match=f"set.pool.json: {field}".replace("(", r"\(").replace(")", r"\)")):
        parse_golden(golden)
