"""Hand-checked cases for doceval.results (compare, gate, report.md, plot) and the compare/gate CLI.

Two small runs over the same six entries (four in scope a1..a4, two out of scope u1, u2):

              hit_rate  mrr   refused_correctly  overrefusal_rate
    BASE  a1     1      1.0         -                 0
          a2     0      0.0         -                 1
          a3     1      0.5         -                 0
          a4     0      0.0         -                 0
          u1     -      -           1                 -
          u2     -      -           1                 -
    mean        0.5    0.375       1.0               0.25

    NEW   a1     1      0.5         -                 0
          a2     1      1.0         -                 0
          a3     1      0.5         -                 0
          a4     0      0.0         -                 0
          u1     -      -           0   (got sources)  -
          u2     -      -           1   (refused)      -
    mean        0.75   0.5         0.5               0.0

answer_accuracy is null everywhere (no judge ran).
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from doceval import results as report
from doceval.cli import main as cli_main
from doceval.config.objects import config_dict
from doceval.errors import UsageError
from doceval.results import check_gate_config, compare, format_compare, gate, load_summary
from doceval.scoring.metrics import mean_or_none
from doceval.scoring.proportions import newcombe_paired
from doceval.scoring.registry import METRIC_NAMES

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GATE = ROOT / "conf" / "gate" / "default.yaml"
GATE = {"thresholds": {"hit_rate": 0.60, "refused_correctly": 1.00},
        "non_regression": {"enabled": False, "tolerance": 0.02, "metrics": ["hit_rate", "mrr", "refused_correctly"],
                           "mode": "significant", "alpha": 0.05}}  # fmt: skip
IN_SCOPE = ["a1", "a2", "a3", "a4"]
QUESTIONS = {"u1": "How do I call   pydantic.magic_validate()?", "u2": "What is the best pizza | topping?"}


def _entry(eid: str, hit: float | None, mrr: float | None, rc: float | None, over: float | None,
           retrieved: list[list[Any]], refused: bool) -> dict[str, Any]:  # fmt: skip
    oos = eid.startswith("u")
    scores: dict[str, float | None] = {m: None for m in METRIC_NAMES}
    scores.update({"hit_rate": hit, "recall": hit, "mrr": mrr, "ndcg": hit, "refused_correctly": rc,
                   "overrefusal_rate": over, "refusal_rate": None if not oos else float(refused),
                   "version_correctness": None if oos else 1.0})  # fmt: skip
    return {
        "id": eid, "split": "test", "library": "pydantic" if eid in ("a1", "a2", "u1") else "click",
        "version": "2.8.2" if eid in ("a1", "a2", "u1") else "8.1.7",
        "kind": "lookup" if not oos else "nonexistent_api",
        "question": QUESTIONS.get(eid, f"question {eid}?"), "out_of_scope": oos,
        "relevant_ids": [] if oos else [f"pydantic@2.8.2:{eid}"], "retrieved": retrieved,
        "refused": refused, "refusal_reason": None, "answer": None if refused else "answer",
        "verdict": None, "verdict_reason": None, "judge_error": None, "memory_used": [], "scores": scores,
    }  # fmt: skip


def _summary(entries: list[dict[str, Any]], md5: str = "0f" * 16) -> dict[str, Any]:
    metrics: dict[str, Any] = {}
    for m in METRIC_NAMES:
        metrics[m] = mean_or_none(
            np.array([np.nan if e["scores"][m] is None else e["scores"][m] for e in entries])
        )
    metrics["counts"] = {"n_entries": len(entries), "n_in_scope": sum(not e["out_of_scope"] for e in entries),
                         "n_out_of_scope": sum(e["out_of_scope"] for e in entries), "n_judged": 0,
                         "judge_errors": 0}  # fmt: skip
    metrics["ci95"] = {m: None if metrics[m] is None else [max(0.0, metrics[m] - 0.2), min(1.0, metrics[m] + 0.2)]
                       for m in METRIC_NAMES}  # fmt: skip
    metrics["not_judged"] = True
    for name, key in (("by_library", "library"), ("by_kind", "kind")):
        groups: dict[str, Any] = {}
        for e in entries:
            groups.setdefault(e[key], []).append(e)
        metrics[name] = {
            g: {**{m: mean_or_none(np.array([np.nan if e["scores"][m] is None else e["scores"][m] for e in rows]))
                   for m in METRIC_NAMES},
                "n": len(rows), "n_in_scope": sum(not e["out_of_scope"] for e in rows),
                "n_out_of_scope": sum(e["out_of_scope"] for e in rows)}
            for g, rows in sorted(groups.items())
        }  # fmt: skip
    config = {"split": "test", "k": 5, "retriever": {"name": "dense"},
              "floors": {"global": 0.0, "per_library": {"pydantic": 0.31}, "source": "calibrated:eval/calibration/floors.json",
                         "provenance": {"split": "calibration", "objective": "hit_rate+refused_correctly"}},
              "golden": {"path": "data/golden/v1.jsonl", "md5": md5},
              "provenance": {"git_commit": "abc123", "git_dirty": False, "python": "3.11.9"}}  # fmt: skip
    return {"metrics": metrics, "config": config, "entries": entries}


def base_summary() -> dict[str, Any]:
    return _summary([
        _entry("a1", 1, 1.0, None, 0, [["pydantic@2.8.2:a1", 0.9]], False),
        _entry("a2", 0, 0.0, None, 1, [], True),
        _entry("a3", 1, 0.5, None, 0, [["x", 0.8], ["pydantic@2.8.2:a3", 0.7]], False),
        _entry("a4", 0, 0.0, None, 0, [["x", 0.8]], False),
        _entry("u1", None, None, 1, None, [], True),
        _entry("u2", None, None, 1, None, [], True),
    ])  # fmt: skip


def new_summary() -> dict[str, Any]:
    return _summary([
        _entry("a1", 1, 0.5, None, 0, [["x", 0.9], ["pydantic@2.8.2:a1", 0.8]], False),
        _entry("a2", 1, 1.0, None, 0, [["pydantic@2.8.2:a2", 0.9]], False),
        _entry("a3", 1, 0.5, None, 0, [["x", 0.8], ["pydantic@2.8.2:a3", 0.7]], False),
        _entry("a4", 0, 0.0, None, 0, [["x", 0.8]], False),
        _entry("u1", None, None, 0, None, [["pydantic@2.8.2:pydantic.main.BaseModel", 0.41],
                                            ["pydantic@2.8.2:pydantic.fields.Field", 0.35]], False),
        _entry("u2", None, None, 1, None, [], True),
    ])  # fmt: skip


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return _write(tmp_path / "base.json", base_summary()), _write(tmp_path / "new.json", new_summary())


def _row(text: str, metric: str) -> list[str]:
    for line in text.splitlines():
        if line.split() and line.split()[0].rstrip("*") == metric:
            return line.split()
    raise AssertionError(f"no line for {metric} in:\n{text}")


# ------------------------------------------------------------------------------------------- load_summary


def test_load_summary_reads_a_summary_file(files: tuple[Path, Path]) -> None:
    data = load_summary(files[0])
    assert data["metrics"]["hit_rate"] == 0.5 and len(data["entries"]) == 6


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "not found"),
        ("{not json", "not valid JSON"),
        (json.dumps({"metrics": {}}), "missing key 'entries'"),
        (json.dumps([1, 2]), "top level is a JSON list"),
        (json.dumps({"metrics": {}, "entries": [{"id": "a"}]}), "no 'scores'"),
        (
            json.dumps({"metrics": {}, "entries": [{"id": "a", "scores": {}}, {"id": "a", "scores": {}}]}),
            "duplicate",
        ),
        (json.dumps({"metrics": {"hit_rate": "high"}, "entries": []}), "metrics.hit_rate"),
    ],
)
def test_load_summary_rejects_non_summaries_naming_the_file(
    tmp_path: Path, content: str | None, expected: str
) -> None:
    path = tmp_path / "thing.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(UsageError) as exc:
        load_summary(path)
    assert str(path) in str(exc.value) and expected in str(exc.value)
    assert "doceval eval --output" in str(exc.value)  # the fix


def test_load_summary_directory_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is a directory"):
        load_summary(tmp_path)


def test_load_summary_mlflow_run_id_goes_through_the_loader() -> None:
    run_id = "0123456789abcdef0123456789ABCDEF"
    asked: list[str] = []

    def loader(rid: str) -> dict[str, Any]:
        asked.append(rid)
        return base_summary()

    assert load_summary(run_id, mlflow_loader=loader)["metrics"]["mrr"] == 0.375
    assert asked == [run_id.lower()]
    with pytest.raises(UsageError, match="MLflow run id"):
        load_summary(run_id)
    with pytest.raises(UsageError, match="not a doceval run summary"):
        load_summary(run_id, mlflow_loader=lambda rid: {"metrics": {}})


# ------------------------------------------------------------------------------------------- compare


def test_compare_values_signs_and_win_tie_loss() -> None:
    res = compare(base_summary(), new_summary(), n_boot=500)
    hit = res.row("hit_rate")
    assert (hit.base, hit.new, hit.change) == (0.5, 0.75, 0.25)
    assert (hit.wins, hit.ties, hit.losses, hit.n_paired) == (1, 3, 0, 4)
    # One discordant pair out of four says little: the Newcombe interval spans 0 (the old percentile bootstrap
    # printed [0, +0.5], as if the gain were certain) and McNemar's exact p = 2 * P(Bin(1, 1/2) <= 0) = 1.
    assert hit.ci == pytest.approx(newcombe_paired(2, 0, 1, 1))
    assert hit.ci is not None and hit.ci[0] < 0.0 < 0.25 < hit.ci[1]
    assert (hit.p_value, hit.method) == (1.0, "newcombe+mcnemar")
    mrr = res.row("mrr")
    assert (mrr.base, mrr.new, mrr.change) == (0.375, 0.5, 0.125)
    assert (mrr.wins, mrr.ties, mrr.losses) == (1, 2, 1)
    # Two differing entries of four: the sign-flip test cannot reject 0 from so few, so no interval, only why.
    assert (mrr.ci, mrr.method, mrr.ci_note) == (None, "", "too few differing entries (n=2)")
    # sign-flip over the two non-zero differences: every sign pattern is as extreme or less -> p = 1 or 1/2
    assert mrr.p_value is not None and mrr.p_value >= 0.5
    # Holm over the compared metrics: never below the raw p, and 1 here (nothing is near significant)
    assert all(r.p_holm is None or r.p_holm >= (r.p_value or 0) for r in res.rows)
    rc = res.row("refused_correctly")
    assert (rc.base, rc.new, rc.change, rc.wins, rc.ties, rc.losses, rc.n_paired) == (
        1.0,
        0.5,
        -0.5,
        0,
        1,
        1,
        2,
    )
    over = res.row("overrefusal_rate")  # lower is better: a2 stopped being refused -> a win
    assert (over.base, over.new, over.change, over.wins, over.ties, over.losses) == (
        0.25,
        0.0,
        -0.25,
        1,
        3,
        0,
    )
    acc = res.row("answer_accuracy")
    assert (acc.base, acc.new, acc.change, acc.ci, acc.n_paired) == (None, None, None, None, 0)
    assert res.n_compared == 6 and not res.notes


def test_format_compare_lines() -> None:
    res = compare(base_summary(), new_summary(), n_boot=500)
    text = format_compare(res, "CI gate (hit_rate >= 0.60): PASS")
    assert _row(text, "hit_rate")[:4] == ["hit_rate", "0.5000", "0.7500", "+0.2500"]
    assert _row(text, "hit_rate")[-3:] == ["1/3/0", "4", "newcombe+mcnemar"]  # each row's own method
    assert _row(text, "mrr")[:4] == ["mrr", "0.3750", "0.5000", "+0.1250"]
    assert _row(text, "refused_correctly")[:4] == ["refused_correctly", "1.0000", "0.5000", "-0.5000"]
    assert _row(text, "refused_correctly")[-3:] == ["0/1/1", "2", "newcombe+mcnemar"]
    assert _row(text, "mrr")[-1] == "-"  # too few differing entries: no interval, so no method named
    assert not [line for line in text.splitlines() if line.startswith("hit_rate_rel1 ")]
    assert "hit_rate_rel1, recall_rel1, mrr_rel1 not shown: binary judgments" in text
    assert _row(text, "overrefusal_rate")[:4] == ["overrefusal_rate*", "0.2500", "0.0000", "-0.2500"]
    assert _row(text, "answer_accuracy") == [
        "answer_accuracy",
        "n/a",
        "n/a",
        "n/a",
        "n/a",
        "n/a",
        "n/a",
        "-",
        "0",
        "-",
    ]
    assert _row(text, "hit_rate")[6:8] == ["1.000", "1.000"]  # p and its Holm adjustment next to the interval
    assert "p_holm: Holm-adjusted over the 8 metrics of this table (its family);" in text
    lines = text.splitlines()
    table = [line for line in lines if not line.startswith("unanswerable:")]  # those hold full doc ids
    # Fits a 120-column terminal, with mrr's "too few differing entries (n=2)" in place of its interval.
    assert all(len(line) <= 120 for line in table)
    assert _row(text, "mrr")[4:9] == ["too", "few", "differing", "entries", "(n=2)"]
    # Aligned columns: every value column ends where its header ends.
    header = next(line for line in lines if line.startswith("metric"))
    hit = next(line for line in lines if line.startswith("hit_rate"))
    for title, value in (("base", "0.5000"), ("new ", "0.7500"), ("change", "+0.2500")):
        assert header.index(title.strip()) + len(title.strip()) == hit.index(value) + len(value)
    assert header.index("95% CI") == hit.index("[")
    assert header.index("p_holm") + len("p_holm") == hit.index("1.000 ", hit.index("1.000") + 1) + len(
        "1.000"
    )
    # Every out-of-scope entry of NEW, in order; whitespace collapsed; then the gate line last.
    una = [line for line in lines if line.startswith("unanswerable:")]
    assert una == [
        "unanswerable: How do I call pydantic.magic_validate()? -> "
        "pydantic@2.8.2:pydantic.main.BaseModel, pydantic@2.8.2:pydantic.fields.Field",
        "unanswerable: What is the best pizza | topping? -> no sources",
    ]
    assert lines[-1] == "CI gate (hit_rate >= 0.60): PASS"
    assert lines.index(una[-1]) < len(lines) - 1


def test_identical_runs_show_no_change_but_never_a_zero_width_interval() -> None:
    # Identical on four entries is not proof of "no change possible": a 0/1 metric's interval spans 0 with
    # positive width (the old bootstrap printed [0, 0]); a graded one has no differing entry to build one from
    # and says so. The p-value of "no change" is 1.
    res = compare(base_summary(), base_summary())
    for r in res.rows:
        if r.n_paired:
            assert r.change == 0.0 and r.wins == r.losses == 0 and r.ties == r.n_paired and r.p_value == 1.0
            if r.method == "newcombe+mcnemar":
                assert r.ci is not None and r.ci[0] < 0.0 < r.ci[1]
            else:
                assert (r.ci, r.ci_note) == (None, "too few differing entries (n=0)")
    text = format_compare(res)
    assert _row(text, "hit_rate")[3:8] == ["+0.0000", "[-0.3500,", "+0.3500]", "1.000", "1.000"]
    assert "-0.0000" not in text


def test_different_golden_md5_is_a_usage_error_unless_allowed() -> None:
    other = _summary(new_summary()["entries"], md5="aa" * 16)
    with pytest.raises(UsageError, match="different golden sets.*--allow-different-golden"):
        compare(base_summary(), other)
    res = compare(base_summary(), other, allow_different_golden=True)
    assert res.row("hit_rate").change == 0.25
    assert any("different golden sets" in n for n in res.notes)


def test_mismatched_entry_ids_error_or_intersection() -> None:
    new = new_summary()
    entries = [e for e in new["entries"] if e["id"] != "a2"]
    extra = copy.deepcopy(entries[0])
    extra["id"] = "z9"
    trimmed = _summary([*entries, extra])
    with pytest.raises(UsageError, match="cover different entries.*a2.*z9"):
        compare(base_summary(), trimmed)
    res = compare(base_summary(), trimmed, allow_different_golden=True)
    assert res.n_compared == 5 and res.only_in_base == ["a2"] and res.only_in_new == ["z9"]
    assert (
        "dropped 2 entries not in both runs (1 only in BASE, 1 only in NEW); compared the 5 entries shared"
        in (format_compare(res))
    )
    hit = res.row("hit_rate")  # over a1, a3, a4: base 2/3, new 2/3
    assert hit.change == 0.0 and hit.n_paired == 3


def test_compare_flags_summary_metrics_that_disagree_with_their_entries() -> None:
    new = new_summary()
    new["metrics"]["hit_rate"] = 0.9
    res = compare(base_summary(), new)
    assert res.row("hit_rate").new == 0.75
    assert any("NEW: metrics.hit_rate = 0.9" in n for n in res.notes)


# ------------------------------------------------------------------------------------------- gate


def test_gate_pass_and_fail_lines() -> None:
    res = gate(new_summary(), GATE)
    assert not res.passed
    assert res.line == "CI gate (hit_rate >= 0.60 and refused_correctly >= 1.00): FAIL"
    assert [f.metric for f in res.failures] == ["refused_correctly"]
    assert res.failures[0].by == 0.5
    assert str(res.failures[0]) == "refused_correctly >= 1.00: refused_correctly = 0.5000, short by 0.5000"

    res = gate(base_summary(), GATE)
    assert [(f.metric, round(f.by or 0, 4)) for f in res.failures] == [("hit_rate", 0.1)]

    ok = gate(base_summary(), {"thresholds": {"hit_rate": 0.5, "refused_correctly": 1.0}})  # equality passes
    assert ok.passed and ok.failures == []
    assert ok.line == "CI gate (hit_rate >= 0.50 and refused_correctly >= 1.00): PASS"


def test_gate_threshold_on_null_metric_fails_not_measured() -> None:
    res = gate(base_summary(), {"thresholds": {"hit_rate": 0.1, "answer_accuracy": 0.5}})
    assert not res.passed
    assert res.line == "CI gate (hit_rate >= 0.10 and answer_accuracy >= 0.50): FAIL"
    assert [f.metric for f in res.failures] == ["answer_accuracy"]
    assert "not measured" in str(res.failures[0]) and res.failures[0].value is None


def test_gate_overrefusal_threshold_is_an_upper_bound() -> None:
    cfg = {"thresholds": {"overrefusal_rate": 0.2}}
    res = gate(base_summary(), cfg)  # 0.25 > 0.20
    assert res.line == "CI gate (overrefusal_rate <= 0.20): FAIL"
    assert str(res.failures[0]) == "overrefusal_rate <= 0.20: overrefusal_rate = 0.2500, over by 0.0500"
    assert gate(new_summary(), cfg).passed  # 0.0


def test_gate_threshold_formatting_keeps_precision() -> None:
    assert gate(base_summary(), {"thresholds": {"mrr": 0.375}}).line == "CI gate (mrr >= 0.375): PASS"


def _with(metrics: dict[str, float]) -> dict[str, Any]:
    s = base_summary()
    s["metrics"].update(metrics)
    return s


def test_non_regression_with_tolerance() -> None:
    cfg: dict[str, Any] = {"thresholds": {"hit_rate": 0.0},
           "non_regression": {"enabled": True, "tolerance": 0.02, "metrics": ["hit_rate", "overrefusal_rate"]}}  # fmt: skip
    # A drop of exactly the tolerance passes (0.62 - 0.60 is 0.020000000000000018 in floats).
    res = gate(_with({"hit_rate": 0.60}), cfg, baseline=_with({"hit_rate": 0.62}))
    assert res.passed, res.failures
    assert res.line == ("CI gate (hit_rate >= 0.00 and no regression > 0.02 in hit_rate, overrefusal_rate "
                        "vs baseline): PASS")  # fmt: skip
    res = gate(_with({"hit_rate": 0.60}), cfg, baseline=_with({"hit_rate": 0.63}))
    assert not res.passed and res.line.endswith(": FAIL")
    (f,) = res.failures
    assert f.metric == "hit_rate" and round(f.by or 0, 4) == 0.01
    assert str(f) == "hit_rate dropped by 0.0300 (0.6300 -> 0.6000), beyond the tolerance 0.0200 by 0.0100"
    # overrefusal_rate: a rise is the regression, a fall is fine.
    res = gate(_with({"overrefusal_rate": 0.30}), cfg, baseline=_with({"overrefusal_rate": 0.25}))
    assert [f.metric for f in res.failures] == ["overrefusal_rate"] and "rose by 0.0500" in str(
        res.failures[0]
    )
    assert gate(_with({"overrefusal_rate": 0.0}), cfg, baseline=_with({"overrefusal_rate": 0.25})).passed
    # Null in the baseline: not measured, never a silent pass.
    res = gate(base_summary(), {**cfg, "non_regression": {**cfg["non_regression"], "metrics": ["answer_accuracy"]}},
               baseline=base_summary())  # fmt: skip
    assert not res.passed and "not measured" in str(res.failures[0])
    # Enabled without a baseline: thresholds only, and it says so.
    res = gate(base_summary(), cfg)
    assert res.passed and res.line == "CI gate (hit_rate >= 0.00): PASS"
    assert res.notes and "no baseline" in res.notes[0]


def test_non_regression_disabled_ignores_baseline() -> None:
    res = gate(base_summary(), {**GATE, "thresholds": {"hit_rate": 0.5}}, baseline=new_summary())
    assert res.passed and res.line == "CI gate (hit_rate >= 0.50): PASS"


@pytest.mark.parametrize(
    ("cfg", "expected"),
    [
        ({"thresholds": {"hit_rte": 0.6}}, "thresholds.hit_rte: unknown metric; valid metrics: hit_rate, recall"),
        ({"thresholds": {"hit_rate": 0.6}, "non_regression": {"enabled": True, "metrics": ["ndcg@5"]}},
         "non_regression.metrics[0]=ndcg@5: expected one of hit_rate, recall"),
        ({"thresholds": {"hit_rate": "high"}}, "thresholds.hit_rate=high: expected a number >= 0 and <= 1"),
        ({"threshold": {"hit_rate": 0.6}}, "threshold: unknown key; valid keys: thresholds,"),
        ({"thresholds": {}}, "always passes"),
    ],
)  # fmt: skip
def test_bad_gate_configs_are_usage_errors(cfg: dict[str, Any], expected: str) -> None:
    with pytest.raises(UsageError) as exc:
        check_gate_config(cfg, "conf/gate/x.yaml")
    assert expected in str(exc.value) and "conf/gate/x.yaml" in str(exc.value)


def test_shipped_gate_config_loads() -> None:
    drift = {"enabled": False, "metrics": ["hit_rate", "refused_correctly"], "tolerance": 0.02, "window": 10,
             "reference": "best"}  # fmt: skip
    loaded = config_dict(report.load_gate_config(DEFAULT_GATE))
    assert loaded == {**GATE, "drift": drift, "max_system_errors": 0,
                      "for_assistants": {"refused_correctly": "refusal_rate"}}  # fmt: skip


# ------------------------------------------------------------------------------------------- report.md, plot


def test_render_report() -> None:
    calibration = {
        "objective": "hit_rate+refused_correctly", "split": "calibration",
        "per_library": {
            "pydantic": {"floor": 0.31, "objective": 1.75, "separable": False, "in_scope_top": [0.3, 0.5, 0.9],
                         "out_of_scope_top": [0.2, 0.35, 0.45]},
            "click": {"floor": 0.2, "objective": 2.0, "separable": True, "in_scope_top": [0.4, 0.6, 0.8],
                      "out_of_scope_top": []},
        },
    }  # fmt: skip
    md = report.render_report(new_summary(), calibration)
    assert "| hit_rate | 0.7500 | [0.5500, 0.9500] | - | 4 |" in md  # a hand-made summary names no method
    assert "| answer_accuracy | not judged | - | - | 0 |" in md
    assert "answer_accuracy: not judged" in md
    assert "| overrefusal_rate (lower is better) | 0.0000 |" in md
    assert "## Per library" in md and "| pydantic | 3 | 2 | 1 |" in md
    assert "## Per kind" in md and "| nonexistent_api | 2 | 0 | 2 |" in md
    assert "Source: `calibrated:eval/calibration/floors.json`" in md and "| pydantic | 0.3100 |" in md
    assert "git commit: `abc123` (clean)" in md and "md5 `" + "0f" * 16 + "`" in md
    assert "1 of 2 out-of-scope entries got sources" in md
    assert "| u1 | How do I call pydantic.magic_validate()? | `pydantic@2.8.2:pydantic.main.BaseModel`" in md
    assert "| u2 |" not in md  # refused, no sources
    assert "## Calibration" in md and "| pydantic | 0.3100 | 1.7500 | **no** |" in md
    assert "No floor separates in-scope from out-of-scope scores for: pydantic." in md
    assert "did not use the calibrated floors for: click (calibrated 0.2000, used 0.0000)." in md
    assert "## Calibration" not in report.render_report(base_summary())
    assert "None: all 2 out-of-scope entries got no sources." in report.render_report(base_summary())


def test_plot_compare_writes_a_png(tmp_path: Path) -> None:
    out = report.plot_compare(
        compare(base_summary(), new_summary(), n_boot=200), tmp_path / "plots" / "c.png"
    )
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


# ------------------------------------------------------------------------------------------- CLI


def _yaml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_cli_compare_prints_table_and_exits_3_on_gate_fail(files: tuple[Path, Path], capsys: Any) -> None:
    base, new = files
    rc = cli_main(["compare", str(base), str(new), "--gate", str(DEFAULT_GATE)])
    out, err = capsys.readouterr()
    assert rc == 3
    assert _row(out, "hit_rate")[:4] == ["hit_rate", "0.5000", "0.7500", "+0.2500"]
    assert "unanswerable: What is the best pizza | topping? -> no sources" in out
    assert "CI gate (hit_rate >= 0.60 and refused_correctly >= 1.00): FAIL" in out
    assert "  - refused_correctly >= 1.00: refused_correctly = 0.5000, short by 0.5000" in out
    assert "gate FAIL" in err


def test_cli_compare_pass_no_gate_and_plot(files: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    base, new = files
    easy = _yaml(tmp_path / "easy.yaml", "thresholds: {hit_rate: 0.7}\n")
    assert cli_main(["compare", str(base), str(new), "--gate", str(easy)]) == 0
    assert (
        capsys.readouterr().out.rstrip().endswith(f"CI gate (hit_rate >= 0.70): PASS\n  rules from: {easy}")
    )
    plot = tmp_path / "cmp.png"
    assert cli_main(["compare", str(base), str(new), "--no-gate", "--plot", str(plot)]) == 0
    assert "CI gate" not in capsys.readouterr().out and plot.stat().st_size > 0


def test_cli_compare_usage_errors(files: tuple[Path, Path], tmp_path: Path, capsys: Any,
                                  monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    base, new = files
    other = _write(tmp_path / "other.json", _summary(new_summary()["entries"], md5="aa" * 16))
    assert cli_main(["compare", str(base), str(other), "--no-gate"]) == 2
    assert "--allow-different-golden" in capsys.readouterr().err
    assert cli_main(["compare", str(base), str(other), "--no-gate", "--allow-different-golden"]) == 0
    capsys.readouterr()
    junk = _write(tmp_path / "junk.json", {"hello": 1})
    assert cli_main(["compare", str(base), str(junk), "--no-gate"]) == 2
    assert str(junk) in capsys.readouterr().err
    assert cli_main(["compare", str(base), str(new), "--gate", str(tmp_path / "nope.yaml")]) == 2
    assert "--gate" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)  # a user's own folder: no conf/ here, so the shipped default gate applies
    assert cli_main(["compare", str(base), str(new)]) == 3
    assert "CI gate (hit_rate >= 0.60 and refused_correctly >= 1.00): FAIL" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        cli_main(["compare", str(base)])
    assert exc.value.code == 2


def test_cli_gate_exit_codes(files: tuple[Path, Path], tmp_path: Path, capsys: Any) -> None:
    base, new = files
    assert cli_main(["gate", str(new), "--config", str(DEFAULT_GATE)]) == 3
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "CI gate (hit_rate >= 0.60 and refused_correctly >= 1.00): FAIL"
    assert "short by 0.5000" in out
    ok = _yaml(tmp_path / "ok.yaml", "thresholds: {hit_rate: 0.5, refused_correctly: 1.0}\n")
    assert cli_main(["gate", str(base), "--config", str(ok)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"CI gate (hit_rate >= 0.50 and refused_correctly >= 1.00): PASS\n  rules from: {ok}"
    )
    nonreg = _yaml(tmp_path / "nr.yaml", "thresholds: {hit_rate: 0.0}\n"
                   "non_regression: {enabled: true, tolerance: 0.02, metrics: [hit_rate, mrr]}\n")  # fmt: skip
    assert cli_main(["gate", str(base), "--config", str(nonreg), "--baseline", str(new)]) == 3
    assert "hit_rate dropped by 0.2500" in capsys.readouterr().out
    bad = _yaml(tmp_path / "bad.yaml", "thresholds: {hitrate: 0.6}\n")
    assert cli_main(["gate", str(base), "--config", str(bad)]) == 2
    assert "valid metrics: hit_rate" in capsys.readouterr().err
    assert cli_main(["gate", str(tmp_path / "missing.json"), "--config", str(ok)]) == 2
    assert "missing.json" in capsys.readouterr().err


def test_cli_gate_writes_junit_xml_one_case_per_condition_and_per_failing_entry(
    files: tuple[Path, Path], tmp_path: Path
) -> None:
    import xml.etree.ElementTree as ET

    base, new = files
    junit = tmp_path / "ci" / "gate.xml"
    junit.parent.mkdir()
    assert cli_main(["gate", str(new), "--config", str(DEFAULT_GATE), "--junit", str(junit)]) == 3
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    gate_cases = [c for c in cases if c.get("classname") == "doceval.gate"]
    assert [c.get("name") for c in gate_cases] == ["hit_rate >= 0.60", "refused_correctly >= 1.00"]
    failed = [c for c in gate_cases if c.find("failure") is not None]
    summary = json.loads(new.read_text())
    # one failing case per entry behind the failed refused_correctly, naming it; none for the passed hit_rate
    assert [c.get("name") for c in failed] == ["refused_correctly >= 1.00"]
    misses = [e["id"] for e in summary["entries"] if e["scores"].get("refused_correctly") == 0]
    entry_cases = [c.get("name") for c in cases if c.get("classname") == "doceval.entries.refused_correctly"]
    assert entry_cases == misses and misses
    assert not [c for c in cases if c.get("classname") == "doceval.entries.hit_rate"]
    assert suite.get("tests") == str(len(cases)) and suite.get("failures") == str(len(failed) + len(misses))
    ok = _yaml(tmp_path / "ok.yaml", "thresholds: {hit_rate: 0.5, refused_correctly: 1.0}\n")
    assert cli_main(["gate", str(base), "--config", str(ok), "--junit", str(junit)]) == 0
    root = ET.parse(junit).getroot()
    assert root.get("failures") == "0" and root.get("tests") == "2"
    assert cli_main(["gate", str(base), "--config", str(ok), "--junit", str(tmp_path)]) == 2  # a folder


def test_cli_run_ids_resolve_through_tracking(files: tuple[Path, Path], tmp_path: Path, capsys: Any,
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    import types

    calls: list[tuple[str, str]] = []
    fake = types.ModuleType("doceval.tracking")

    def tracking_uri(cfg_uri: str | None, root: Path | None = None) -> str:
        return cfg_uri or "sqlite:///default.db"

    def load_summary_from_run(run_id: str, uri: str, root: Path | None = None) -> dict[str, Any]:
        calls.append((run_id, uri))
        return base_summary() if run_id.startswith("a") else new_summary()

    fake.tracking_uri = tracking_uri  # type: ignore[attr-defined]
    fake.load_summary_from_run = load_summary_from_run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "doceval.tracking", fake)
    base_id, new_id = "a" * 32, "b" * 32
    rc = cli_main(["compare", base_id, new_id, "--no-gate", "--tracking-uri", "sqlite:///x.db"])
    assert rc == 0 and calls == [(base_id, "sqlite:///x.db"), (new_id, "sqlite:///x.db")]
    assert _row(capsys.readouterr().out, "hit_rate")[:4] == ["hit_rate", "0.5000", "0.7500", "+0.2500"]
    ok = _yaml(tmp_path / "ok.yaml", "thresholds: {hit_rate: 0.5}\n")
    assert cli_main(["gate", base_id, "--config", str(ok)]) == 0
    assert calls[-1] == (base_id, "sqlite:///default.db")
    # A file of that name wins over the run id.
    _write(tmp_path / new_id, base_summary())
    monkeypatch.chdir(tmp_path)
    assert cli_main(["gate", new_id, "--config", str(ok)]) == 0
    assert calls[-1] == (base_id, "sqlite:///default.db")


# The real entry point, `python -m doceval.cli.main`, in a subprocess.


def _doceval(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "doceval.cli.main", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=60)  # fmt: skip


@pytest.mark.slow
def test_doceval_cli_end_to_end(files: tuple[Path, Path], tmp_path: Path) -> None:
    base, new = files
    proc = _doceval("compare", str(base), str(new))  # default gate: conf/gate/default.yaml (cwd = repo root)
    assert proc.returncode == 3, proc.stderr
    assert _row(proc.stdout, "hit_rate")[:4] == ["hit_rate", "0.5000", "0.7500", "+0.2500"]
    assert "CI gate (hit_rate >= 0.60 and refused_correctly >= 1.00): FAIL" in proc.stdout
    ok = _yaml(tmp_path / "ok.yaml", "thresholds: {hit_rate: 0.5}\n")
    assert _doceval("compare", str(base), str(new), "--gate", str(ok)).returncode == 0
    assert _doceval("gate", str(base), "--config", str(ok)).returncode == 0
    assert _doceval("gate", str(new)).returncode == 3
    proc = _doceval("gate", str(tmp_path / "nope.json"))
    assert proc.returncode == 2 and "nope.json" in proc.stderr
    other = _write(tmp_path / "other.json", _summary(new_summary()["entries"], md5="aa" * 16))
    proc = _doceval("compare", str(base), str(other))
    assert proc.returncode == 2 and "--allow-different-golden" in proc.stderr


def test_report_merges_groups_without_in_scope_entries_into_one_weighted_row() -> None:
    summary = base_summary()
    summary["metrics"]["by_library"] = {
        "pydantic": {"n": 4, "n_in_scope": 3, "n_out_of_scope": 1, "hit_rate": 0.5, "refused_correctly": 1.0},
        "flask": {
            "n": 1,
            "n_in_scope": 0,
            "n_out_of_scope": 1,
            "refused_correctly": 1.0,
            "refusal_rate": 1.0,
        },
        "django": {
            "n": 3,
            "n_in_scope": 0,
            "n_out_of_scope": 3,
            "refused_correctly": 0.0,
            "refusal_rate": 0.0,
        },
    }
    text = report.render_report(summary)
    section = text.split("## Per library\n", 1)[1].split("##", 1)[0]
    assert "flask" not in section and "django" not in section and "| pydantic |" in section
    row = next(line for line in section.splitlines() if "2 libraries with no in-scope entry" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:4] == ["4", "0", "4"]
    assert "0.2500 (n<10)" in cells  # (1 x 1.0 + 3 x 0.0) / 4 out-of-scope entries: too few for an interval


def _at_k(summary: dict[str, Any], k: int) -> dict[str, Any]:
    return {**summary, "config": {**summary["config"], "k": k}}


def test_compare_refuses_different_k_unless_allowed() -> None:
    base, new = base_summary(), _at_k(new_summary(), 10)
    with pytest.raises(UsageError, match=r"different k \(k=5 vs k=10\).*--allow-different-k"):
        compare(base, new)
    result = compare(base, new, allow_different_k=True)
    assert any("k=5" in n and "k=10" in n for n in result.notes)
    assert result.row("hit_rate").change == compare(base, new_summary()).row("hit_rate").change


def test_gate_non_regression_refuses_a_baseline_at_another_k() -> None:
    cfg: dict[str, Any] = {"thresholds": {"hit_rate": 0.0},
           "non_regression": {"enabled": True, "tolerance": 0.02, "metrics": ["hit_rate"]}}  # fmt: skip
    with pytest.raises(UsageError, match="--allow-different-k"):
        gate(_with({"hit_rate": 0.6}), cfg, baseline=_at_k(_with({"hit_rate": 0.6}), 3))
    res = gate(
        _with({"hit_rate": 0.6}), cfg, baseline=_at_k(_with({"hit_rate": 0.6}), 3), allow_different_k=True
    )
    assert res.passed and any("k=3" in n for n in res.notes)


def test_cli_compare_and_gate_allow_different_k(
    files: tuple[Path, Path], tmp_path: Path, capsys: Any
) -> None:
    base, _ = files
    other = _write(tmp_path / "k10.json", _at_k(new_summary(), 10))
    assert cli_main(["compare", str(base), str(other), "--no-gate"]) == 2
    assert "--allow-different-k" in capsys.readouterr().err
    assert cli_main(["compare", str(base), str(other), "--no-gate", "--allow-different-k"]) == 0
    assert "different cut-offs" in capsys.readouterr().out
    nonreg = _yaml(
        tmp_path / "nr.yaml",
        "thresholds: {hit_rate: 0.0}\nnon_regression: {enabled: true, tolerance: 1.0, metrics: [hit_rate]}\n",
    )
    assert cli_main(["gate", str(other), "--config", str(nonreg), "--baseline", str(base)]) == 2
    assert (
        cli_main(
            ["gate", str(other), "--config", str(nonreg), "--baseline", str(base), "--allow-different-k"]
        )
        == 0
    )


def test_rel1_rows_only_for_graded_judgments() -> None:
    """Issue 40, C9: with binary judgments the *_rel1 rows repeat hit_rate, recall and mrr; on main every table
    printed them anyway. A run whose judgments have a grade 1 shows them."""
    binary, graded = new_summary(), new_summary()
    binary["config"]["golden"]["graded"] = False
    graded["config"]["golden"]["graded"] = True
    for summary, shown in ((binary, False), (graded, True)):
        report_md = report.render_report(summary)
        assert ("| hit_rate_rel1 |" in report_md) is shown
        assert ("hit_rate_rel1, recall_rel1, mrr_rel1 not shown" in report_md) is not shown
        table = format_compare(compare(base_summary(), summary))
        assert any(line.startswith("hit_rate_rel1 ") for line in table.splitlines()) is shown
