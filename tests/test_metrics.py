"""Hand-computed cases for doceval.scoring.metrics (docs/design.md section 4)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from doceval.scoring.metrics import CandidateMatrix, build_matrix, contains_apis, cut, mean_or_none
from doceval.scoring.registry import AT_K_NAMES, answer_scores, retrieval_scores

NO_FLOOR = -np.inf
L2_3 = 1.0 / math.log2(3)  # discount at rank 2
L2_4 = 0.5  # discount at rank 3: 1/log2(4)


Ranked = list[tuple[str, float]]


def scores_for(
    ranked: list[Ranked], relevant: list[set[str]], k: int, floors: float | list[float] = NO_FLOOR
) -> dict[str, np.ndarray]:
    m = build_matrix(ranked, relevant)
    f = np.full(m.n, floors) if np.ndim(floors) == 0 else np.asarray(floors, dtype=float)
    return retrieval_scores(m, f, k)


def one(ranked: Ranked, relevant: set[str], k: int, floor: float = NO_FLOOR) -> dict[str, Any]:
    """Scores of a single entry as plain Python values."""
    s = scores_for([ranked], [relevant], k, floor)
    return {key: s[key][0].item() for key in s}


# --- build_matrix -------------------------------------------------------------------------------------------


def test_build_matrix_pads_and_marks_relevance() -> None:
    m = build_matrix([[("a", 0.9), ("b", 0.8)], [("c", 0.5)]], [{"b", "x"}, set()])
    assert m.scores.dtype == np.float64 and m.scores.shape == (2, 2)
    np.testing.assert_array_equal(m.scores, [[0.9, 0.8], [0.5, -np.inf]])
    np.testing.assert_array_equal(m.relevant, [[False, True], [False, False]])
    np.testing.assert_array_equal(m.n_relevant, [2, 0])  # "x" counts although never retrieved
    assert m.doc_ids == [["a", "b"], ["c"]]
    np.testing.assert_array_equal(m.valid, [[True, True], [True, False]])


def test_build_matrix_collapses_duplicates_keeping_first_occurrence() -> None:
    m = build_matrix([[("a", 0.9), ("a", 0.95), ("b", 0.8), ("a", 0.1)]], [{"b"}])
    assert m.doc_ids == [["a", "b"]]
    np.testing.assert_array_equal(m.scores, [[0.9, 0.8]])  # the first score of "a", not its later 0.95


def test_build_matrix_rejects_nan_scores_and_length_mismatch() -> None:
    with pytest.raises(ValueError, match="NaN"):
        build_matrix([[("a", float("nan"))]], [{"a"}])
    with pytest.raises(ValueError, match="relevant"):
        build_matrix([[("a", 1.0)]], [])


def test_build_matrix_rejects_a_bare_string_as_relevant_set() -> None:
    with pytest.raises(TypeError, match="single string"):
        build_matrix([[("ab", 1.0)]], ["ab"])


def test_candidate_matrix_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError):
        CandidateMatrix(np.zeros((2, 3)), np.zeros((2, 2), dtype=bool), np.ones(2, dtype=int), [[], []])


# --- cut ----------------------------------------------------------------------------------------------------


def test_cut_drops_below_floor_before_taking_first_k() -> None:
    # Scores need not be monotone in list order: "b" is dropped by the floor and must not take a slot.
    m = build_matrix([[("a", 0.9), ("b", 0.2), ("c", 0.8), ("d", 0.7)]], [{"c"}])
    np.testing.assert_array_equal(cut(m, np.array([0.5]), 2), [[True, False, True, False]])


def test_cut_rejects_bad_k_and_floors() -> None:
    m = build_matrix([[("a", 0.9)]], [{"a"}])
    with pytest.raises(ValueError, match="k must be >= 1"):
        cut(m, np.array([0.0]), 0)
    with pytest.raises(ValueError, match="shape"):
        cut(m, np.array([0.0, 0.0]), 1)
    with pytest.raises(ValueError, match="NaN"):
        cut(m, np.array([np.nan]), 1)


def test_cut_keeps_real_minus_inf_score_but_never_padding() -> None:
    m = build_matrix([[("a", -np.inf)], [("b", 1.0), ("c", 0.5)]], [{"a"}, {"b"}])
    np.testing.assert_array_equal(cut(m, np.array([-np.inf, -np.inf]), 5), [[True, False], [True, True]])


# --- retrieval_scores ---------------------------------------------------------------------------------------


def test_basic_entry_all_four_metrics() -> None:
    # R = a, b, c; relevant = {b, d, x}: hit at rank 2, d is cut, x never retrieved.
    s = one([("a", 0.9), ("b", 0.8), ("c", 0.7), ("d", 0.6)], {"b", "d", "x"}, k=3)
    assert s["hit_rate"] == 1.0
    assert s["recall"] == pytest.approx(1 / 3)  # denominator is |relevant| = 3, not the 2 retrieved
    assert s["mrr"] == 0.5
    assert s["ndcg"] == pytest.approx(L2_3 / (1 + L2_3 + L2_4))
    assert s["refused"] is False and s["n_retrieved"] == 3


def test_miss_gives_zeros_not_nan() -> None:
    s = one([("a", 0.9), ("b", 0.8)], {"z"}, k=2)
    assert (s["hit_rate"], s["recall"], s["mrr"], s["ndcg"]) == (0.0, 0.0, 0.0, 0.0)


def test_duplicates_collapsed_before_cut() -> None:
    # Without dedup the top 2 would be a, a and miss b.
    s = one([("a", 0.9), ("a", 0.85), ("b", 0.8)], {"b"}, k=2)
    assert s["hit_rate"] == 1.0 and s["mrr"] == 0.5 and s["n_retrieved"] == 2
    # A relevant duplicate counts once: recall 1 (not 2), ndcg exactly 1.
    s = one([("r", 0.9), ("x", 0.8), ("r", 0.7)], {"r"}, k=3)
    assert s["recall"] == 1.0 and s["ndcg"] == 1.0 and s["n_retrieved"] == 2


def test_ties_keep_list_order() -> None:
    tied = [("a", 0.5), ("b", 0.5), ("c", 0.5)]
    assert one(tied, {"b"}, k=1)["hit_rate"] == 0.0  # a comes first although b ties it
    assert one(tied, {"b"}, k=2)["mrr"] == 0.5
    assert one([("b", 0.5), ("a", 0.5)], {"b"}, k=1)["mrr"] == 1.0


def test_k_larger_than_list() -> None:
    s = one([("a", 0.9), ("b", 0.8)], {"b"}, k=10)
    assert s["n_retrieved"] == 2 and s["hit_rate"] == 1.0 and s["recall"] == 1.0 and s["mrr"] == 0.5
    assert s["ndcg"] == pytest.approx(L2_3)  # ideal DCG over min(1, 10) = 1 doc is 1


def test_per_entry_floors_differ() -> None:
    lst = [("a", 0.9), ("b", 0.5), ("c", 0.4)]
    s = scores_for([lst, lst, lst], [{"c"}, {"c"}, {"c"}], k=3, floors=[0.45, 0.3, 0.95])
    np.testing.assert_array_equal(s["n_retrieved"], [2, 3, 0])
    np.testing.assert_array_equal(s["hit_rate"], [0.0, 1.0, 0.0])
    np.testing.assert_allclose(s["mrr"], [0.0, 1 / 3, 0.0])
    np.testing.assert_allclose(s["ndcg"], [0.0, L2_4, 0.0])
    # Everything below the floor: in scope, so scored 0 (not NaN), and refused.
    np.testing.assert_array_equal(s["refused"], [False, False, True])


def test_floor_equal_to_score_is_kept() -> None:
    s = one([("a", 0.9), ("b", 0.5)], {"b"}, k=2, floor=0.5)
    assert s["n_retrieved"] == 2 and s["hit_rate"] == 1.0
    s = one([("a", 0.9), ("b", 0.5)], {"b"}, k=2, floor=np.nextafter(0.5, 1.0))
    assert s["n_retrieved"] == 1 and s["hit_rate"] == 0.0


def test_ndcg_ideal_uses_min_of_n_relevant_and_k() -> None:
    # 5 relevant, k = 2: R = a, z with a relevant at rank 1; ideal DCG = 1 + 1/log2(3) (two slots only).
    s = one([("a", 0.9), ("z", 0.8), ("b", 0.7)], {"a", "b", "c", "d", "e"}, k=2)
    assert s["ndcg"] == pytest.approx(1 / (1 + L2_3))
    assert s["recall"] == pytest.approx(1 / 5)
    assert s["mrr"] == 1.0


def test_perfect_ranking_has_ndcg_one() -> None:
    s = one([("a", 0.9), ("b", 0.8), ("c", 0.1)], {"a", "b"}, k=3)
    assert s["ndcg"] == pytest.approx(1.0) and s["recall"] == 1.0


def test_empty_candidate_lists() -> None:
    s = scores_for([[], [("a", 0.3)]], [{"a"}, {"a"}], k=3)
    np.testing.assert_array_equal(s["refused"], [True, False])
    np.testing.assert_array_equal(s["n_retrieved"], [0, 1])
    for key in AT_K_NAMES:
        if key == "judged_share":  # the share of R that was judged: no R, nothing to share
            assert np.isnan(s[key][0]) and s[key][1] == 1.0
            continue
        assert s[key][0] == 0.0  # in scope but nothing retrieved: a miss, not "not applicable"
        assert s[key][1] == 1.0


def test_all_lists_empty_gives_zero_width_matrix() -> None:
    m = build_matrix([[], []], [{"a"}, set()])
    assert m.scores.shape == (2, 0)
    s = retrieval_scores(m, np.full(2, NO_FLOOR), 5)
    np.testing.assert_array_equal(s["hit_rate"], [0.0, np.nan])
    np.testing.assert_array_equal(s["refused"], [True, True])


def test_all_entries_out_of_scope_aggregate_is_none_not_zero() -> None:
    s = scores_for([[("a", 0.9)], []], [set(), set()], k=3)
    for key in AT_K_NAMES:
        assert np.isnan(s[key]).all()
        assert mean_or_none(s[key]) is None
    np.testing.assert_array_equal(s["refused"], [False, True])


def test_no_entries_at_all() -> None:
    m = build_matrix([], [])
    s = retrieval_scores(m, np.zeros(0), 3)
    assert all(s[key].shape == (0,) for key in s)
    assert mean_or_none(s["hit_rate"]) is None


def test_out_of_scope_entries_are_nan_and_ignored_by_the_mean() -> None:
    s = scores_for([[("a", 0.9)], [("b", 0.9)], [("x", 0.9)]], [{"a"}, {"c"}, set()], k=1)
    np.testing.assert_array_equal(s["hit_rate"], [1.0, 0.0, np.nan])
    assert mean_or_none(s["hit_rate"]) == 0.5  # over A only: (1 + 0) / 2, not / 3


def test_retrieved_ids_follow_the_mask() -> None:
    m = build_matrix([[("a", 0.9), ("a", 0.8), ("b", 0.2), ("c", 0.7)]], [{"c"}])
    assert m.retrieved(cut(m, np.array([0.5]), 5)) == [["a", "c"]]


# --- refused_correctly / contains_apis / mean_or_none -------------------------------------------------------


def test_refused_correctly_uses_the_label_and_the_floor() -> None:
    # e0 and e1 are out of scope by label; e1 keeps a candidate above the floor, e0 has none; e2 is in scope.
    m = build_matrix([[("a", 0.1)], [("b", 0.9)], [("c", 0.9)]], [set(), set(), {"c"}])
    per = retrieval_scores(m, np.array([0.5, 0.5, 0.5]), 3, out_of_scope=np.array([True, True, False]))
    np.testing.assert_array_equal(per["refused_correctly"], [1.0, 0.0, np.nan])
    # Without labels, scope falls back to "no relevant documents".
    per = retrieval_scores(m, np.array([0.5, 0.5, 0.5]), 3)
    np.testing.assert_array_equal(per["refused_correctly"], [1.0, 0.0, np.nan])


def test_contains_apis() -> None:
    assert contains_apis("Use Model.MODEL_DUMP() here", ["model_dump"], [".dict("])
    assert not contains_apis("use model_dump or .dict()", ["model_dump"], [".dict("])  # forbidden present
    assert not contains_apis("use model_dump", ["model_dump", "model_validate"], [])  # one expected missing
    assert contains_apis("anything", [], [])  # nothing required, nothing forbidden
    assert not contains_apis(None, [], [])  # no answer is never correct
    with pytest.raises(TypeError):
        contains_apis("model_dump", "model_dump", [])


def test_mean_or_none() -> None:
    assert mean_or_none(np.array([1.0, np.nan, 0.0, 0.5])) == 0.5
    assert mean_or_none(np.array([np.nan, np.nan])) is None
    assert mean_or_none(np.array([0.0, 0.0])) == 0.0  # a real zero stays zero
    assert mean_or_none(np.array([True, False, True, True])) == 0.75


# --- answer_scores ------------------------------------------------------------------------------------------


def _answer_case(verdicts: list[bool | None] | None = None, **kw: Any) -> dict[str, np.ndarray]:
    oos = np.array([False, False, False, False, True, True])
    refused = np.array([False, True, False, False, True, False])
    answers: list[str | None] = [
        "use model_dump()",
        "model_dump",
        "call .dict()",
        "MODEL_DUMP it",
        None,
        "model_dump",
    ]
    expected = [["model_dump"]] * 4 + [[], ["model_dump"]]
    forbidden = [[".dict("]] * 6
    if verdicts is None:
        verdicts = [True, True, None, False, None, True]
    return answer_scores(oos, refused, answers, expected, forbidden, verdicts, **kw)


def test_answer_scores_per_entry() -> None:
    s = _answer_case()
    # 0: judged right; 1: refused in scope -> wrong although the judge said True and the APIs are there;
    # 2: judge error -> excluded; 3: judged wrong; 4, 5: out of scope -> not applicable.
    np.testing.assert_array_equal(s["answer_accuracy"], [1.0, 0.0, np.nan, 0.0, np.nan, np.nan])
    np.testing.assert_array_equal(s["version_correctness"], [1.0, 0.0, 0.0, 1.0, np.nan, np.nan])
    np.testing.assert_array_equal(s["refusal_rate"], [np.nan] * 4 + [1.0, 0.0])
    np.testing.assert_array_equal(s["overrefusal_rate"], [0.0, 1.0, 0.0, 0.0, np.nan, np.nan])


def test_answer_scores_aggregates() -> None:
    s = _answer_case()
    assert mean_or_none(s["answer_accuracy"]) == pytest.approx(1 / 3)  # (1 + 0 + 0) / 3 judged
    assert mean_or_none(s["version_correctness"]) == 0.5
    assert mean_or_none(s["refusal_rate"]) == 0.5
    assert mean_or_none(s["overrefusal_rate"]) == 0.25


def test_answer_scope_comes_only_from_the_label() -> None:
    # Entry 5 is out of scope by label: its True verdict and correct APIs do not make it count for accuracy,
    # and entry 1 refused but is in scope by label, so the refusal is an over-refusal, not a correct refusal.
    s = _answer_case()
    assert np.isnan(s["answer_accuracy"][5]) and np.isnan(s["version_correctness"][5])
    assert s["overrefusal_rate"][1] == 1.0 and np.isnan(s["refusal_rate"][1])


def test_answer_accuracy_null_when_no_judge_ran() -> None:
    s = _answer_case(verdicts=[None] * 6, judge_ran=False)
    assert mean_or_none(s["answer_accuracy"]) is None  # not the 0 the refused entry would give
    assert mean_or_none(s["version_correctness"]) == 0.5  # unaffected by the judge
    # A judge that ran but returned no verdict anywhere still scores the refused in-scope entry as wrong.
    s = _answer_case(verdicts=[None] * 6)
    np.testing.assert_array_equal(s["answer_accuracy"], [np.nan, 0.0, np.nan, np.nan, np.nan, np.nan])


def test_answer_scores_all_out_of_scope() -> None:
    s = answer_scores(
        np.array([True, True]), np.array([True, True]), [None, None], [[], []], [[], []], [None, None]
    )
    for key in ("answer_accuracy", "version_correctness", "overrefusal_rate"):
        assert mean_or_none(s[key]) is None
    assert mean_or_none(s["refusal_rate"]) == 1.0


def test_answer_scores_rejects_misaligned_inputs() -> None:
    with pytest.raises(ValueError, match="one value per entry"):
        answer_scores(np.array([False]), np.array([False, True]), ["a"], [[]], [[]], [True])
