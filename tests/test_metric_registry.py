"""Metrics are declared once, in doceval.scoring.registry: no other module keeps its own list of metric names,
the per-entry functions (doceval.scoring.metrics) are a leaf module, and one more declaration reaches the
summary, the terminal headline, metrics.json, the sweep table and MLflow without another edit."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from doceval.common.imports import SRC, imports_of, within
from doceval.scoring import registry
from doceval.scoring.registry import METRIC_NAMES, TAGS, names

PKG = SRC / "doceval"
METRIC_NAMES_FILE = PKG / "common" / "metric_names.py"
METRICS_MODULE = PKG / "scoring" / "metrics.py"


def metric_lists(source: str) -> list[tuple[int, list[str]]]:
    """(line, elements) of every literal tuple, list or set of string constants holding two or more metric
    names: a list of metrics kept outside the registry."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Tuple | ast.List | ast.Set) and node.elts:
            values = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(values) == len(node.elts) and sum(v in METRIC_NAMES for v in values) >= 2:
                found.append((node.lineno, values))
    return found


def test_the_scan_finds_a_metric_list() -> None:
    source = 'COLS = ("hit_rate", "mrr")\nx = ["refused", "hit_rate"]\ny = {"a", "b"}\nz = ("hit_rate", 1, "mrr")\n'
    assert metric_lists(source) == [(1, ["hit_rate", "mrr"])]
    assert metric_lists('for m in ["recall", "ndcg", "floor"]:\n    pass\n') == [
        (1, ["recall", "ndcg", "floor"])
    ]


def test_no_metric_list_outside_the_registry() -> None:
    offenders = [
        f"{path.relative_to(SRC)}:{line}: {values}"
        for path in sorted(PKG.rglob("*.py"))
        if path != METRIC_NAMES_FILE
        for line, values in metric_lists(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, (
        "lists of metric names outside doceval.common.metric_names (tag the metrics there and use "
        "names(tag)):\n" + "\n".join(offenders)
    )


def test_metrics_module_is_a_leaf_within_limits() -> None:
    # The one exception: the string matcher the golden set's checks share (it imports nothing of doceval).
    doceval_imports = [name for name in imports_of(METRICS_MODULE) if name.split(".")[0] == "doceval"]
    assert doceval_imports and all(within(name, "doceval.common.apimatch") for name in doceval_imports)
    for path in (METRICS_MODULE, METRIC_NAMES_FILE, PKG / "scoring" / "registry.py"):
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) < 500, path
        long = [
            f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.FunctionDef) and node.end_lineno is not None
            if node.end_lineno - node.lineno + 1 > 80
        ]
        assert not long, f"{path.name}: {long}"


def test_names_by_tag_keep_their_places() -> None:
    # The orders these outputs had before the registry held them (CSV columns, the MLflow description, ...).
    assert names("headline") == (
        "hit_rate", "recall", "mrr", "refused_correctly", "overrefusal_rate", "answer_accuracy",
    )  # fmt: skip
    assert names("curve_csv") == ("hit_rate", "refused_correctly", "mrr")
    assert names("tradeoff_curve") == ("refused_correctly", "overrefusal_rate", "hit_rate")
    assert names("flaky") == ("version_correctness", "hit_rate")
    assert names("sweep") == (
        "hit_rate", "recall", "mrr", "refused_correctly", "version_correctness", "overrefusal_rate",
    )  # fmt: skip
    assert names(population="out_of_scope") == ("refused_correctly", "refusal_rate")
    assert names(family="answer", population="in_scope") == ("version_correctness", "overrefusal_rate")
    assert names() == METRIC_NAMES


def test_every_tag_is_known_used_and_ordered() -> None:
    with pytest.raises(KeyError, match="unknown metric tag 'sweeep'; known: headline, sweep"):
        names("sweeep")
    for metric in registry.METRICS:
        assert set(metric.tags) <= set(TAGS), metric.name
    for tag in TAGS:
        places = [x.tags[tag] for x in registry.METRICS if tag in x.tags]
        assert places, f"tag {tag!r} has no metric"
        assert len(set(places)) == len(places), f"two metrics share a place in {tag!r}"


# One declaration added to a copy of doceval.common.metric_names, loaded in a fresh interpreter in place of the
# real one, and its per-entry function (of the same name) added to doceval.scoring.metrics.
NEW_METRIC = """    MetricInfo(
        "hit_rate_copy", "retrieval", "in_scope", True, True, "hit_rate again, for the test",
        tags={"headline": 7, "sweep": 7},
    ),
"""

SCRIPT = r"""
import contextlib, importlib.util, io, json, sys
import doceval.common

path, golden = sys.argv[1], sys.argv[2]
source = open(path, encoding="utf-8").read()
anchor = "\n)\n\nMETRIC_NAMES"
assert source.count(anchor) == 1, "the METRICS tuple of metric_names moved: update the test's anchor"
source = source.replace(anchor, "\n" + sys.stdin.read().rstrip("\n") + anchor)
spec = importlib.util.spec_from_loader("doceval.common.metric_names", loader=None)
module = importlib.util.module_from_spec(spec)
module.__file__ = path
sys.modules[spec.name] = module
exec(compile(source, path, "exec"), module.__dict__)
doceval.common.metric_names = module
import doceval.scoring.metrics as m
m.hit_rate_copy = m.hit_rate

import doceval
from doceval.cli.common import print_headline
from doceval.app.sweep import format_points
from doceval.stages.evaluate import headline_metrics
from doceval.tracking.shaping import build_metrics, headline_line

DOCS = {"D1": "late fees are five dollars per day", "D2": "returns are accepted within thirty days"}

def overlap(question, k):
    words = set(question.split())
    scored = [(d, float(len(words & set(t.split())))) for d, t in DOCS.items()]
    return [(d, s) for d, s in sorted(scored, key=lambda x: -x[1]) if s >= 2][:k]

summary = doceval.evaluate(golden, retriever=overlap, k=2)
table = io.StringIO()
with contextlib.redirect_stdout(table):
    print_headline(summary)
point = {"overrides": ["k=2"], "metrics": summary["metrics"]}
print(json.dumps({
    "summary": {k: summary["metrics"][k] for k in ("hit_rate", "hit_rate_copy")},
    "entry_scores": [sorted(e["scores"]) for e in summary["entries"]],
    "headline_table": table.getvalue(),
    "metrics_json": sorted(headline_metrics(summary)),
    "mlflow_metrics": sorted(build_metrics(summary["metrics"], None)),
    "mlflow_description": headline_line(summary["metrics"]),
    "sweep_table": format_points([point]).splitlines()[0].split(),
}))
"""


@pytest.mark.slow
def test_adding_a_metric_is_one_declaration(tmp_path: Path) -> None:
    assert "hit_rate_copy" not in METRIC_NAMES
    rows = [("q1", "how much are late fees", ["D1"], "5"), ("q2", "when are returns accepted", ["D2"], "30"),
            ("q3", "do you sell pizza", [], "")]  # fmt: skip
    golden = tmp_path / "golden.json"
    entries = [{"id": i, "question": q, "relevant_ids": rel, "reference_answer": ref, "out_of_scope": not rel,
                "expected_apis": [], "forbidden_apis": [], "split": None, "kind": "lookup" if rel else "off_topic"}
               for i, q, rel, ref in rows]  # fmt: skip
    golden.write_text(json.dumps(entries), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(METRIC_NAMES_FILE), str(golden)],
        input=NEW_METRIC, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["summary"] == {"hit_rate": 1.0, "hit_rate_copy": 1.0}
    assert all("hit_rate_copy" in scores for scores in out["entry_scores"])
    table = out["headline_table"].splitlines()
    assert any(line.startswith("hit_rate_copy@2") and "1.0000" in line for line in table), table
    assert "hit_rate_copy" in out["metrics_json"]
    assert {"hit_rate_copy", "n_hit_rate_copy", "hit_rate_copy_ci_lo"} <= set(out["mlflow_metrics"])
    # Its place in the headline tag (7) puts it after answer_accuracy (6), with the same interval as hit_rate
    # (the function's ids are its own, so the answer's text is unknown: answer_accuracy is not measured).
    assert out["mlflow_description"].endswith(
        "answer_accuracy not measured, hit_rate_copy 1.000 [0.224, 1.000]"
    )
    assert out["sweep_table"][-1] == "hit_rate_copy"  # the column header, whole (never cut)
