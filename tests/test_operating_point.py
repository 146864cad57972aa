"""Floors a team would ship: operating-point objectives on hand-computed cases, the small-sample fallback to
the global floor, the refusal trade-off (AUROC against scikit-learn, signals by hand), floors on a per-question
signal from the CLI, and the bad inputs (targets outside [0, 1], unknown objectives, no out-of-scope entries)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score
from test_eval_cli import eval_args, overrides
from test_eval_cli import project as project  # noqa: F401 - the tiny project fixture

from doceval.cli.main import main
from doceval.config.compose import compose
from doceval.config.schema import Config
from doceval.errors import UsageError
from doceval.harness.calibrate import calibrate
from doceval.harness.candidate_set import CandidateSet
from doceval.harness.floor_search import (
    OBJECTIVES,
    calibrate_library,
    describe_operating_point,
    make_objective,
)
from doceval.harness.tradeoff import signal_floor_vector, signals
from doceval.inputs.golden import GoldenEntry
from doceval.results.tradeoff_md import tradeoff_lines
from doceval.scoring.answerability import auroc, auroc_interval
from doceval.scoring.metrics import build_matrix

# Four answerable entries (relevant doc at the given score, top of the list) and three out-of-scope ones.
ANSWERABLE = [0.9, 0.8, 0.7, 0.4]
OUT_OF_SCOPE = [0.75, 0.5, 0.3]


def _case() -> tuple[Any, np.ndarray]:
    ranked = [[(f"d{i}", s)] for i, s in enumerate(ANSWERABLE)] + [
        [(f"z{i}", s)] for i, s in enumerate(OUT_OF_SCOPE)
    ]
    relevant = [{f"d{i}"} for i in range(len(ANSWERABLE))] + [set() for _ in OUT_OF_SCOPE]
    oos = np.array([False] * len(ANSWERABLE) + [True] * len(OUT_OF_SCOPE))
    return build_matrix(ranked, relevant), oos


def test_max_refusal_at_overrefusal_on_a_hand_computed_case() -> None:
    """Floors just above 0.3 refuse 1/3 of out-of-scope, 0/4 answerable; above 0.4: 1/3 and 1/4; above 0.5:
    2/3 and 1/4; above 0.7: 2/3 and 2/4. With at most 25% wrongly refused the best is 2/3 at (0.5, 0.7]:
    its lowest floor, the next float above 0.5. At most 0% allows only 1/3, at the floor above 0.3."""
    matrix, oos = _case()
    grid = np.linspace(0, 1, 11)
    cal = calibrate_library("lib", matrix, oos, 5, "max_refusal_at_overrefusal", 0.0, grid,
                            make_objective("max_refusal_at_overrefusal", max_overrefusal=0.25))  # fmt: skip
    assert cal.floor == np.nextafter(0.5, np.inf) and cal.objective == pytest.approx(2 / 3)
    cal = calibrate_library("lib", matrix, oos, 5, "max_refusal_at_overrefusal", 0.0, grid,
                            make_objective("max_refusal_at_overrefusal", max_overrefusal=0.0))  # fmt: skip
    assert cal.floor == np.nextafter(0.3, np.inf) and cal.objective == pytest.approx(1 / 3)
    assert "overrefusal_rate" in cal.curve and cal.curve["overrefusal_rate"][0] == 0.0


def test_min_overrefusal_at_refusal_is_the_mirror() -> None:
    """Refusing every out-of-scope entry needs a floor above 0.75: it wrongly refuses 0.7 and 0.4 (2/4)."""
    matrix, oos = _case()
    fn = make_objective("min_overrefusal_at_refusal", min_refused_correctly=1.0)
    cal = calibrate_library(
        "lib", matrix, oos, 5, "min_overrefusal_at_refusal", 0.0, np.linspace(0, 1, 5), fn
    )
    assert cal.floor == np.nextafter(0.75, np.inf) and cal.objective == pytest.approx(1 - 2 / 4)


def test_an_unreachable_target_takes_the_least_violation() -> None:
    matrix, oos = _case()
    fn = make_objective("min_overrefusal_at_refusal", min_refused_correctly=1.0)
    # drop the out-of-scope entry at 0.75 below every answerable score: still reachable
    value = fn({"refused": np.array([False] * 4 + [False, True, True])}, oos)
    assert value == pytest.approx(-1 - 1 / 3)  # infeasible: below every feasible value, by how far it misses


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"max_overrefusal": 1.5}, "calibration.max_overrefusal=1.5: a rate, must be in [0, 1]"),
        ({"min_refused_correctly": -0.1}, "calibration.min_refused_correctly=-0.1"),
    ],
)
def test_targets_outside_0_1_are_refused(kwargs: dict[str, float], needle: str) -> None:
    with pytest.raises(UsageError, match=needle.replace("[", r"\[").replace("]", r"\]")):
        make_objective("max_refusal_at_overrefusal", **kwargs)


def test_an_unknown_objective_lists_the_known_ones() -> None:
    with pytest.raises(UsageError) as err:
        make_objective("max_hits")
    assert all(name in str(err.value) for name in OBJECTIVES)


def test_the_operating_point_in_words() -> None:
    assert describe_operating_point("max_refusal_at_overrefusal", 0.1) == (
        "floors chosen to refuse as many out-of-scope questions as possible while wrongly refusing at most 10% "
        "of answerable ones"
    )
    assert "at least 95% of out-of-scope" in describe_operating_point("min_overrefusal_at_refusal", 0.1, 0.95)


# ------------------------------------------------------------------------------- calibrate(): fallbacks


def _entry(i: str, lib: str, oos: bool) -> GoldenEntry:
    return GoldenEntry(id=i, question=f"q {i}", library=lib, version="1.0", out_of_scope=oos,
                       relevant_ids=() if oos else (f"{lib}@1.0:{i}",), reference_answer="",
                       expected_apis=(), forbidden_apis=(), split="calibration",
                       kind="off_topic" if oos else "lookup", line=1)  # fmt: skip


def _cfg(**cal: Any) -> Config:
    cfg = compose(["calibration.objective=max_refusal_at_overrefusal", "calibration.grid_points=5", "k=5"])
    return dataclasses.replace(cfg, calibration=dataclasses.replace(cfg.calibration, **cal))


def _cands(entries: list[GoldenEntry], scores: dict[str, float]) -> CandidateSet:
    ranked = {e.id: [((e.relevant_ids or (f"x:{e.id}",))[0], scores[e.id])] for e in entries}
    return CandidateSet(
        {"score_range": [-1.0, 1.0], "candidates_k": 10}, ranked, {e.id: None for e in entries}
    )


def test_a_library_with_too_few_entries_gets_the_global_floor_and_says_why() -> None:
    big = [_entry(f"a{i}", "big", False) for i in range(6)] + [_entry(f"u{i}", "big", True) for i in range(6)]
    small = [_entry("s1", "small", False), _entry("s2", "small", True)]
    entries = big + small
    scores = {**{f"a{i}": 0.6 + i / 100 for i in range(6)}, **{f"u{i}": 0.2 + i / 100 for i in range(6)},
              "s1": 0.9, "s2": 0.85}  # fmt: skip
    art = calibrate(_cfg(min_entries=5), entries, _cands(entries, scores), ["big", "small"], "md5", None)
    assert "small" in art["fallback"] and "big" not in art["fallback"]
    assert "1 in-scope calibration entries < calibration.min_entries=5" in art["fallback"]["small"]
    assert art["per_library"]["small"] == art["global"] != art["libraries"]["small"]["floor"]
    assert art["per_library"]["big"] == art["libraries"]["big"]["floor"]
    assert art["operating_point"].startswith("floors chosen to refuse as many")
    # with min_entries=1 it keeps its own floor
    art = calibrate(_cfg(min_entries=1), entries, _cands(entries, scores), ["big", "small"], "md5", None)
    assert art["fallback"] == {} and art["per_library"]["small"] != art["global"]


def test_a_calibration_split_without_out_of_scope_entries_is_refused() -> None:
    entries = [_entry(f"a{i}", "lib", False) for i in range(4)]
    with pytest.raises(UsageError, match="refusal cannot be calibrated. Add out-of-scope entries"):
        calibrate(_cfg(), entries, _cands(entries, {e.id: 0.5 for e in entries}), ["lib"], "md5", None)


# ------------------------------------------------------------------------------- answerability


def test_auroc_matches_scikit_learn_and_its_interval_contains_it() -> None:
    rng = np.random.default_rng(3)
    for _ in range(30):
        pos, neg = rng.integers(0, 6, 25).astype(float), rng.integers(0, 6, 15).astype(float)
        expected = roc_auc_score([1] * 25 + [0] * 15, np.concatenate([pos, neg]))
        assert auroc(pos, neg) == pytest.approx(expected)
    assert auroc(np.array(ANSWERABLE), np.array(OUT_OF_SCOPE)) == pytest.approx(
        9 / 12
    )  # 0.4 loses to 0.5, 0.75; 0.7 loses to 0.75
    assert auroc(np.array([1.0]), np.array([-np.inf])) == 1.0 and auroc(np.array([]), np.array([1.0])) is None
    pos, neg = rng.normal(1, 1, 40), rng.normal(0, 1, 30)
    lo, hi = auroc_interval(pos, neg, seed=1) or (0, 0)
    assert lo < (auroc(pos, neg) or 0) < hi


def test_signals_by_hand() -> None:
    e = _entry("a", "lib", False)
    cands = CandidateSet({"score_range": [-1.0, 1.0], "candidates_k": 10},
                         {"a": [("d1", 0.9), ("d2", 0.7), ("d3", 0.1)]}, {"a": None})  # fmt: skip
    s = signals([e], cands, {"a": ["d2", "d9", "d1"]})
    assert s["top_score"][0] == 0.9 and s["margin"][0] == pytest.approx(0.2)
    assert s["agreement"][0] == pytest.approx(2 / 5)  # d1, d2 in both top 5s
    # fused: d1 = 1/61 + 1/63, d2 = 1/62 + 1/61 (best)
    assert s["fused"][0] == pytest.approx(1 / 62 + 1 / 61)
    empty = CandidateSet({"score_range": [-1.0, 1.0], "candidates_k": 10}, {"a": []}, {"a": None})
    assert all(v[0] == -np.inf for v in signals([e], empty, {}).values())
    vec = signal_floor_vector("margin", np.array([0.2, 0.05]), np.array([0.1, 0.1]))
    assert list(vec) == [-np.inf, np.inf]


def test_report_section_states_the_operating_point_and_the_tables() -> None:
    data = {
        "libraries": {"(pooled)": {"floor": 0.4, "test": {"chosen": {"refused_correctly": 0.5, "overrefusal_rate": 0.1,
                                                                     "hit_rate": 0.6},
                                                          "top_score": {"auroc": 0.7, "ci95": [0.6, 0.8]}}}},
        "signals": {"test": {"top_score": {"auroc": 0.7, "ci95": [0.6, 0.8]}, "margin": {"auroc": 0.5, "ci95": None}}},
        "per_library_vs_global": {"global_floor": 0.4, "rows": [
            {"metric": "hit_rate", "global": 0.6, "per_library": 0.62, "change": 0.02, "ci95": [-0.01, 0.05],
             "p_holm": 0.5, "n": 100}]},
    }  # fmt: skip
    cal = {
        "operating_point": describe_operating_point("max_refusal_at_overrefusal"),
        "fallback": {"x": "too few"},
    }
    summary = {"metrics": {"by_kind": {"nonexistent_api": {"refused_correctly": 0.0, "n": 16}}}}
    md = "\n".join(tradeoff_lines(data, cal, summary))
    assert "Operating point: floors chosen to refuse as many out-of-scope questions" in md
    assert "- x falls back to the global floor: too few." in md
    assert "| (pooled) | per library | n/a | 0.700 [0.600, 0.800] | 0.500 | 0.100 | 0.600 |" in md
    assert (
        "| margin | 0.500 |" in md
        and "| hit_rate | 0.600 | 0.620 | +0.020 [-0.010, +0.050] | 0.500 | 100 |" in md
    )
    assert "| nonexistent_api | 0.000 | 16 |" in md


# ------------------------------------------------------------------------------- CLI


def test_floors_on_a_per_question_signal_from_the_cli(project: Path) -> None:
    # bm25 candidates: a floor on the margin far above any margin refuses everything, at 0 nothing extra
    assert main(eval_args("--split", "test", *overrides(), "floors.signal=margin", "floors.global=5")) == 0
    refused_all = json.loads((project / "out.json").read_text())
    assert (
        all(e["refused"] for e in refused_all["entries"])
        and refused_all["config"]["floors"]["signal"] == "margin"
    )
    assert main(eval_args("--split", "test", *overrides(), "floors.signal=margin", "floors.global=0")) == 0
    none = json.loads((project / "out.json").read_text())
    assert not all(e["refused"] for e in none["entries"])


def test_calibrated_floors_on_another_signal_are_refused(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact = {"global": 0.1, "per_library": {}, "provenance": {"split": "calibration", "signal": "score"}}
    (project / "floors.json").write_text(json.dumps(artifact))
    args = eval_args("--split", "test", "retriever=bm25", "floors=calibrated", "floors.path=floors.json",
                     "floors.signal=margin")  # fmt: skip
    assert main(args) == 2
    assert "calibrated on floors.signal=score, not margin" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("calibration.max_overrefusal=1.5", "calibration.max_overrefusal"),
        ("calibration.objective=max_hits", "calibration.objective"),
        ("floors.signal=vibes", "floors.signal"),
    ],
)
def test_bad_operating_point_settings_exit_2_naming_the_key(
    project: Path, capsys: pytest.CaptureFixture[str], override: str, needle: str
) -> None:
    assert main(eval_args(*overrides(), override)) == 2
    assert needle in capsys.readouterr().err


def test_an_unbounded_retriever_gets_a_finite_lowest_floor() -> None:
    """A user's function has no lowest score (-inf): the floor that keeps everything is the float just below
    the lowest score seen, never -inf (a floors artifact is strict JSON; a calibrate stage once exited 1)."""
    import numpy as np

    from doceval.harness.floor_search import candidate_floors
    from doceval.scoring.metrics import build_matrix

    matrix = build_matrix([[("a", 3.0), ("b", 1.0)], [("c", -2.5)]], [["a"], []], 2)
    floors = candidate_floors(matrix, np.array([False, True]), -np.inf)
    assert np.isfinite(floors).all()
    assert floors.min() == np.nextafter(-2.5, -np.inf)  # keeps every entry seen, the out-of-scope one too
