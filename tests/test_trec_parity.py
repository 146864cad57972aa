"""Per-query parity of doceval's retrieval metrics with trec_eval (via pytrec_eval).

Mapping: hit_rate@k = success_k, recall@k = recall_k, ndcg@k = ndcg_cut_k (binary qrels), mrr = recip_rank.
trec_eval's recip_rank has no cutoff, so it is checked two exact ways: against our mrr with k = the full list
length on the full run, and against our mrr@k on a run truncated to its top k documents.
"""

from __future__ import annotations

import numpy as np
import pytest

from doceval.scoring.metrics import build_matrix
from doceval.scoring.registry import retrieval_scores

pytrec_eval = pytest.importorskip("pytrec_eval")

CUTOFFS = (1, 3, 5, 10)
MEASURES = {f"{m}.{','.join(map(str, CUTOFFS))}" for m in ("success", "recall", "ndcg_cut")} | {"recip_rank"}
TOL = 1e-9


Ranked = list[list[tuple[str, float]]]
Qrels = dict[str, dict[str, int]]
TrecRun = dict[str, dict[str, float]]


def random_runs(seed: int, n_queries: int = 60, pool: int = 80) -> tuple[Ranked, list[set[str]], Qrels]:
    """Seeded runs: distinct scores in descending list order (so trec_eval's sort-by-score reproduces the
    list order), 1-6 relevant docs per query of which some are usually not retrieved, judged non-relevant
    docs in the qrels too, and list lengths from 1 to 20 (shorter and longer than the cutoffs)."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:03d}" for i in range(pool)]
    ranked: Ranked = []
    relevant: list[set[str]] = []
    qrels: Qrels = {}
    for q in range(n_queries):
        length = int(rng.integers(1, 21))
        picked = rng.choice(pool, size=length, replace=False)
        # Distinct scores by construction: sampled without replacement from a grid, then sorted descending.
        scores = np.sort(rng.choice(10**6, size=length, replace=False))[::-1] / 1e6
        ranked.append([(docs[d], float(s)) for d, s in zip(picked, scores, strict=True)])
        rel = {docs[d] for d in rng.choice(pool, size=int(rng.integers(1, 7)), replace=False)}
        relevant.append(rel)
        nonrel = {docs[d] for d in rng.choice(pool, size=5, replace=False)} - rel
        qrels[f"q{q}"] = {d: 1 for d in rel} | {d: 0 for d in nonrel}
    return ranked, relevant, qrels


def to_run(ranked: Ranked, floors: np.ndarray | None = None, top: int | None = None) -> TrecRun:
    """trec run dict, optionally dropping docs below the entry's floor and keeping only the first `top`."""
    run: TrecRun = {}
    for q, lst in enumerate(ranked):
        kept = [(d, s) for d, s in lst if floors is None or s >= floors[q]]
        if top is not None:
            kept = kept[:top]
        if kept:  # trec_eval cannot represent an empty ranking; the caller expects 0 for those queries
            run[f"q{q}"] = dict(kept)
    return run


def trec(qrels: Qrels, run: TrecRun, measures: set[str] = MEASURES) -> dict[str, dict[str, float]]:
    result: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    return result


def assert_parity(
    ours: dict[str, np.ndarray], theirs: dict[str, dict[str, float]], k: int, n: int, with_rr: bool
) -> None:
    pairs = {"hit_rate": f"success_{k}", "recall": f"recall_{k}", "ndcg": f"ndcg_cut_{k}"}
    if with_rr:
        pairs["mrr"] = "recip_rank"
    for q in range(n):
        for our_key, trec_key in pairs.items():
            # A query absent from the run (everything below its floor) scores 0 in trec_eval -c terms.
            expected = theirs[f"q{q}"][trec_key] if f"q{q}" in theirs else 0.0
            assert ours[our_key][q] == pytest.approx(expected, abs=TOL), (q, our_key, k)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_parity_without_floors(seed: int) -> None:
    ranked, relevant, qrels = random_runs(seed)
    m = build_matrix(ranked, relevant)
    no_floor = np.full(m.n, -np.inf)
    # Sanity: the generator does produce relevant docs that are never retrieved.
    assert (m.relevant.sum(axis=1) < m.n_relevant).any()
    full = trec(qrels, to_run(ranked))
    for k in CUTOFFS:
        assert_parity(retrieval_scores(m, no_floor, k), full, k, m.n, with_rr=False)
        # mrr@k == recip_rank on the run truncated to the top k docs.
        assert_parity(retrieval_scores(m, no_floor, k), trec(qrels, to_run(ranked, top=k)), k, m.n, True)
    # Uncut mrr == recip_rank on the full run.
    uncut = retrieval_scores(m, no_floor, m.width)
    for q in range(m.n):
        assert uncut["mrr"][q] == pytest.approx(full[f"q{q}"]["recip_rank"], abs=TOL)


@pytest.mark.parametrize("seed", [10, 11])
def test_parity_with_per_entry_floors(seed: int) -> None:
    # Same run filtered by a per-query floor before trec_eval sees it; some floors empty a query's run.
    ranked, relevant, qrels = random_runs(seed)
    m = build_matrix(ranked, relevant)
    floors = np.random.default_rng(seed).uniform(0.0, 1.1, m.n)
    assert any(max(s for _, s in lst) < f for lst, f in zip(ranked, floors, strict=True))
    for k in CUTOFFS:
        theirs = trec(qrels, to_run(ranked, floors=floors, top=k))
        assert_parity(retrieval_scores(m, floors, k), theirs, k, m.n, with_rr=True)


# ---------------------------------------------------------------------------------- graded judgments


def graded_runs(seed: int, n_queries: int = 60, pool: int = 60) -> tuple[Ranked, list[dict[str, int]]]:
    """Seeded runs with graded qrels: each query has at least one grade-2 document, some grade 1, some
    judged 0, and unjudged documents in its ranking."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:03d}" for i in range(pool)]
    ranked: Ranked = []
    grades: list[dict[str, int]] = []
    for _ in range(n_queries):
        length = int(rng.integers(1, 21))
        picked = rng.choice(pool, size=length, replace=False)
        scores = np.sort(rng.choice(10**6, size=length, replace=False))[::-1] / 1e6
        ranked.append([(docs[d], float(s)) for d, s in zip(picked, scores, strict=True)])
        judged = rng.choice(pool, size=int(rng.integers(3, 12)), replace=False)
        g = {docs[d]: int(rng.integers(0, 3)) for d in judged}
        g[docs[int(judged[0])]] = 2
        grades.append(g)
    return ranked, grades


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_graded_metrics_match_trec_eval_at_relevance_level_2_and_1(seed: int) -> None:
    """nDCG with graded gains = ndcg_cut (trec_eval's linear gain); hit_rate, recall and mrr at threshold 2 =
    success, recall, recip_rank at relevance level 2; the *_rel1 metrics = the same at level 1."""
    ranked, grades = graded_runs(seed)
    qrels = {f"q{q}": g for q, g in enumerate(grades)}
    full = max(len(r) for r in ranked)
    measures = {f"success.{','.join(map(str, CUTOFFS))}", f"recall.{','.join(map(str, CUTOFFS))}",
                f"ndcg_cut.{','.join(map(str, CUTOFFS))}", "recip_rank"}  # fmt: skip
    matrix = build_matrix(ranked, grades, threshold=2)
    no_floor = np.full(len(ranked), -np.inf)
    for level, suffix in ((2, ""), (1, "_rel1")):
        ev = pytrec_eval.RelevanceEvaluator(qrels, measures, relevance_level=level)
        got = ev.evaluate(to_run(ranked))
        for k in CUTOFFS:
            ours = retrieval_scores(matrix, no_floor, k)
            for q in range(len(ranked)):
                ref = got[f"q{q}"]
                assert ours[f"hit_rate{suffix}"][q] == pytest.approx(ref[f"success_{k}"], abs=TOL)
                assert ours[f"recall{suffix}"][q] == pytest.approx(ref[f"recall_{k}"], abs=TOL)
                if level == 2:  # ndcg does not depend on the level: the grades are the gains
                    assert ours["ndcg"][q] == pytest.approx(ref[f"ndcg_cut_{k}"], abs=TOL)
        ours_full = retrieval_scores(matrix, no_floor, full)
        for q in range(len(ranked)):
            assert ours_full[f"mrr{suffix}"][q] == pytest.approx(got[f"q{q}"]["recip_rank"], abs=TOL)


def test_judged_is_the_share_of_R_in_the_qrels() -> None:
    ranked = [[("a", 0.9), ("x", 0.8), ("b", 0.7), ("y", 0.6)]]
    m = build_matrix(ranked, [{"a": 2, "b": 0, "c": 1}])
    s = retrieval_scores(m, np.full(1, -np.inf), 3)
    assert s["judged_share"][0] == pytest.approx(2 / 3)  # a and b judged, x not
    assert s["hit_rate_rel1"][0] == 1.0 and s["recall_rel1"][0] == pytest.approx(1 / 2)  # a of {a, c}
    # nDCG@3 by hand: DCG = 2/log2(2) + 0 + 0 = 2; ideal = 2/log2(2) + 1/log2(3) + 0 = 2.6309
    assert s["ndcg"][0] == pytest.approx(2 / (2 + 1 / np.log2(3)))
